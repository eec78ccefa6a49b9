/**
 * Clones of saved fork points kept waiting for a program that starts one clone per job (a rollout worker: one
 * per attempt), as a forkable machine's warm spare (spare.ts) waits for its next fork: each is a prepared clone
 * (prepareClone: registered, its QEMU up on its overlay with `-incoming defer`, its control connection set up),
 * so QEMU's start and the overlay (~70 ms under TCG) happen while earlier jobs run. A pool keeps as many per
 * point as jobs have run at once, at most one per core: a waiting QEMU costs ~28 MiB and no CPU.
 * `SMOL_FORK_SPARE=0` turns these off as it turns off spares. The clones stay this process's: a kill -9 of it
 * leaves them to the next `machine ls`.
 */
import os from 'node:os';
import type { MachineService } from '../service.js';
import type { CloneOutcome } from './clone.js';
import { prepareClone, startPrepared, type PreparedClone } from './from-point.js';
import { sparesEnabled } from './spare.js';

export interface PointPoolOptions {
  /** A new clone's name, unique (a caller may recognise its clones by it, e.g. to reap a dead process's). */
  name: () => string;
  /** Profiling: when each clone's preparation began and ended, performance.now() ms. */
  onPrepared?: (beginMs: number, endMs: number) => void;
}

interface Waiting { p: Promise<PreparedClone | null>; ready: boolean }

export class ForkPointPool {
  private readonly waiting = new Map<string, Waiting[]>();
  private inUse = 0;
  private peak = 1;
  /** Clones being removed after their job; close() waits for them. */
  private readonly teardowns = new Set<Promise<unknown>>();
  private closed = false;

  constructor(private readonly svc: MachineService, private readonly o: PointPoolOptions) {}

  /**
   * A waiting clone of the point (a ready one first, else one being made), else a new one. It counts as in use
   * (the pool's size follows the most in use at once) until release().
   */
  async take(point: string): Promise<PreparedClone> {
    this.inUse++;
    this.peak = Math.max(this.peak, this.inUse);
    try {
      const pool = this.waiting.get(point) ?? [];
      const i = pool.findIndex((s) => s.ready);
      const [spare] = pool.splice(i < 0 ? 0 : i, 1);
      const got = spare ? await spare.p : null;
      return got ?? await this.prepare(point);
    } catch (err) {
      this.inUse--;
      throw err;
    }
  }

  /**
   * Loads the point's state into a taken clone (startPrepared, which removes a clone that fails), then starts
   * the next waiting ones: after, so that their QEMU start does not compete with this clone's.
   */
  async start(p: PreparedClone, o: { owned?: boolean; keepChannel?: boolean } = {}): Promise<CloneOutcome> {
    const c = await startPrepared(this.svc, p, o);
    if (c.ok) this.refill(p.point);
    return c;
  }

  /** The job of a taken clone is over: the clone is removed in the background (the job's result need not wait). */
  release(p: PreparedClone): void {
    this.inUse--;
    const rec = this.svc.store.find(p.id);
    if (!rec) return; // a clone that failed to start is gone already
    const t = this.svc.remove(rec.id, { force: true }).catch(() => undefined);
    this.teardowns.add(t);
    void t.finally(() => this.teardowns.delete(t));
  }

  /** Removes the waiting clones and waits for the released ones' removal; the pool starts no more. */
  async close(): Promise<void> {
    this.closed = true;
    const spares = [...this.waiting.values()].flat().map((s) => s.p);
    this.waiting.clear();
    for (const s of await Promise.all(spares)) {
      s?.primed?.close();
      if (s) await this.svc.remove(s.id, { force: true }).catch(() => undefined);
    }
    while (this.teardowns.size) await Promise.all([...this.teardowns]);
  }

  private prepare(point: string): Promise<PreparedClone> {
    const t = performance.now();
    const p = prepareClone(this.svc, point, this.o.name());
    void p.then(() => this.o.onPrepared?.(t, performance.now()), () => undefined);
    return p;
  }

  private refill(point: string): void {
    if (this.closed || !sparesEnabled()) return;
    const pool = this.waiting.get(point) ?? [];
    this.waiting.set(point, pool);
    while (pool.length < Math.min(this.peak, Math.max(1, os.cpus().length))) {
      const s: Waiting = { p: this.prepare(point).catch(() => null), ready: false };
      pool.push(s);
      // one still being made at close() is removed there, once made; one taken meanwhile is its taker's
      void s.p.then(() => { s.ready = true; });
    }
  }
}
