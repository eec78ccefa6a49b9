/**
 * The leased worker: claims items, renews every live lease in one batch call, runs stages, stores outputs
 * by digest and completes with the token. A rejected renewal (stale or canceled) aborts that item's run.
 * stop() stops claiming, lets running items finish within a grace period, then releases what is left.
 */
import os from 'node:os';
import type { BlobStore } from '../ledger/blobs.js';
import type { Claim, Ledger, StageKind } from '../ledger/types.js';
import { AdaptiveConcurrency, type ConcurrencyStep } from './concurrency.js';
import { execute } from './execute.js';
import type { GatewayEndpoint } from './gateway-client.js';
import { CONCURRENCY_WINDOW_MS, WORKER_LEASE_MS, WORKER_POLL_MS, WORKER_STOP_GRACE_MS } from './limits.js';
import { stageIsolation } from './manifest.js';
import { advance, ManifestCache } from './pipeline.js';
import type { StageRunner } from './stage-runner.js';

export type WorkerEvent =
  | { type: 'claimed'; itemId: number; attempt: number; stage: string }
  | { type: 'output'; itemId: number; attempt: number; outputRef: string }
  | { type: 'completed'; itemId: number; attempt: number; stage: string }
  | { type: 'failed'; itemId: number; attempt: number; error: string; state: string }
  | { type: 'rejected'; itemId: number; attempt: number; op: string; reason: string }
  | { type: 'released'; itemId: number; attempt: number }
  | { type: 'concurrency'; step: ConcurrencyStep }
  | { type: 'stopped'; completed: number };

export interface WorkerOptions {
  ledger: Ledger;
  blobs: BlobStore;
  runner: StageRunner;
  gateway?: string | GatewayEndpoint;
  id?: string;
  concurrency: number;
  adaptive?: boolean;
  leaseMs?: number;
  pollMs?: number;
  windowMs?: number;
  /** Which stages to claim; GPU stages need `gateway`. */
  kind?: StageKind;
  /** Stop once no item is queued or leased anywhere for this long (batch runs, tests); unset = run until stop(). */
  exitWhenIdleMs?: number;
  /** Fault injection for tests: pause after a claim / after storing output, before completing. */
  faults?: { afterClaimMs?: number; afterOutputMs?: number };
  onEvent?: (e: WorkerEvent) => void;
}

interface Running { claim: Claim; abort: AbortController; started: boolean; done: Promise<void> }
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class Worker {
  readonly id: string;
  readonly concurrency: AdaptiveConcurrency;
  completed = 0;
  private readonly running = new Map<number, Running>();
  private readonly manifests: ManifestCache;
  private stopping = false;
  private wake: (() => void) | null = null;
  private readonly leaseMs: number;
  private clockSkew = 0;

  constructor(private readonly o: WorkerOptions) {
    this.id = o.id ?? `${os.hostname()}:${process.pid}`;
    this.concurrency = new AdaptiveConcurrency(Math.max(1, o.concurrency), o.adaptive ?? false);
    this.manifests = new ManifestCache(o.ledger);
    this.leaseMs = o.leaseMs ?? WORKER_LEASE_MS;
  }

  private emit(e: WorkerEvent): void { this.o.onEvent?.(e); }

  /** Runs until stop() (or until idle, with exitWhenIdleMs). */
  async run(): Promise<void> {
    this.o.ledger.prepareWrites();
    const kind = this.o.kind ?? (this.o.gateway ? undefined : 'cpu');
    const renewTimer = setInterval(() => void this.renewAll(), Math.max(50, Math.floor(this.leaseMs / 3)));
    const windowMs = this.o.windowMs ?? CONCURRENCY_WINDOW_MS;
    const windowTimer = setInterval(() => this.emit({ type: 'concurrency', step: this.concurrency.endWindow(windowMs) }), windowMs);
    let idleSince: number | null = null;
    try {
      while (!this.stopping) {
        const free = this.concurrency.current - this.running.size;
        if (free <= 0) { await this.waitForSlot(this.o.pollMs ?? WORKER_POLL_MS); continue; }
        const claims = await this.o.ledger.claim({ worker: this.id, leaseMs: this.leaseMs, limit: free, kind });
        if (claims.length) this.clockSkew = claims[0].expiresAt - this.leaseMs - Date.now();
        for (const c of claims) this.start(c);
        if (claims.length < free) this.concurrency.markStarved();
        if (claims.length === 0) {
          if (this.running.size === 0 && this.o.exitWhenIdleMs !== undefined) {
            // idle means no work left anywhere: items backing off or leased by others may still come back
            const s = await this.o.ledger.stats();
            if (s.queueDepth + s.leased > 0) idleSince = null;
            else if (Date.now() - (idleSince ??= Date.now()) >= this.o.exitWhenIdleMs) break;
          }
          await this.waitForSlot(this.o.pollMs ?? WORKER_POLL_MS);
        } else idleSince = null;
      }
    } finally {
      clearInterval(windowTimer);
      await this.drain();
      await this.o.runner.close?.().catch(() => undefined);
      clearInterval(renewTimer);
      this.emit({ type: 'stopped', completed: this.completed });
    }
  }

  /** Graceful stop: no new claims; running items get `graceMs` to finish, then are aborted and released. */
  stop(graceMs = WORKER_STOP_GRACE_MS): void {
    if (this.stopping) return;
    this.stopping = true;
    this.wake?.();
    setTimeout(() => { for (const r of this.running.values()) r.abort.abort(); }, graceMs).unref();
  }

  private waitForSlot(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(() => { this.wake = null; resolve(); }, ms);
      this.wake = () => { clearTimeout(t); this.wake = null; resolve(); };
    });
  }

  private async drain(): Promise<void> {
    while (this.running.size) await Promise.race([...this.running.values()].map((r) => r.done));
  }

  private start(c: Claim): void {
    const r: Running = { claim: c, abort: new AbortController(), started: false, done: Promise.resolve() };
    this.running.set(c.item.id, r);
    this.emit({ type: 'claimed', itemId: c.item.id, attempt: c.attempt, stage: c.item.stage });
    r.done = this.process(r).catch(() => undefined).finally(() => {
      this.running.delete(c.item.id);
      this.wake?.();
    });
  }

  private async renewAll(): Promise<void> {
    const live = [...this.running.values()];
    if (live.length === 0) return;
    try {
      const res = await this.o.ledger.renew(live.map((r) => ({ itemId: r.claim.item.id, token: r.claim.token })), this.leaseMs);
      for (const x of res) {
        if (x.ok) continue;
        const r = this.running.get(x.itemId);
        if (!r) continue;
        this.emit({ type: 'rejected', itemId: x.itemId, attempt: r.claim.attempt, op: 'renew', reason: x.reason });
        r.abort.abort(); // canceled or lease lost: stop working on it now
      }
    } catch {
      // a failed renewal round is retried on the next tick; the lease has slack for that
    }
  }

  private async process(r: Running): Promise<void> {
    const { claim: c, abort } = r;
    const { ledger, blobs } = this.o;
    const lease = { itemId: c.item.id, token: c.token };
    if (this.o.faults?.afterClaimMs) await sleep(this.o.faults.afterClaimMs);
    if (this.stopping || abort.signal.aborted) {
      if (await ledger.release({ ...lease, started: false }, 'worker stopping')) this.emit({ type: 'released', itemId: c.item.id, attempt: c.attempt });
      return;
    }
    r.started = true;
    const m = await this.manifests.get(c.item.rolloutId);
    const stage = m.stages[c.item.stageIndex];
    if (stage?.kind === 'cpu' && stageIsolation(stage).vm && this.o.runner.isolation !== 'vm') {
      // never run a stage outside the isolation it asks for; a retry here would only meet the same worker kind
      const error = `stage "${stage.name}" asks for vm isolation; run it with: smol worker --isolation vm`;
      const f = await ledger.fail({ ...lease, error, retryable: false });
      if (f.ok) this.emit({ type: 'failed', itemId: c.item.id, attempt: c.attempt, error, state: f.state });
      return;
    }
    const res = await execute({ blobs, runner: this.o.runner, gateway: this.o.gateway, now: () => Date.now() + this.clockSkew }, m, c, abort.signal);
    if ('aborted' in res) {
      // stopped by shutdown: hand the lease back; canceled or stale leases are already gone
      if (this.stopping && (await ledger.release(lease, 'worker stopped mid-run'))) this.emit({ type: 'released', itemId: c.item.id, attempt: c.attempt });
      return;
    }
    if (!res.ok) {
      const f = await ledger.fail({ ...lease, error: res.error, retryable: res.retryable });
      if (f.ok) this.emit({ type: 'failed', itemId: c.item.id, attempt: c.attempt, error: res.error, state: f.state });
      else this.emit({ type: 'rejected', itemId: c.item.id, attempt: c.attempt, op: 'fail', reason: f.reason });
      return;
    }
    this.emit({ type: 'output', itemId: c.item.id, attempt: c.attempt, outputRef: res.outputRef });
    if (this.o.faults?.afterOutputMs) await sleep(this.o.faults.afterOutputMs);
    const extra = await advance(ledger, blobs, m, c.item, c.attempt, res.outputRef);
    const done = await ledger.complete({ ...lease, outputRef: res.outputRef, ...extra });
    if (done.ok) {
      this.completed++;
      this.concurrency.completedOne();
      this.emit({ type: 'completed', itemId: c.item.id, attempt: c.attempt, stage: c.item.stage });
    } else {
      this.emit({ type: 'rejected', itemId: c.item.id, attempt: c.attempt, op: 'complete', reason: done.reason });
    }
  }
}
