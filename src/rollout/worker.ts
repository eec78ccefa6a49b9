/**
 * The leased worker: claims items, renews every live lease in one batch call, runs stages, stores outputs
 * by digest and completes with the token. A rejected renewal (stale or canceled) aborts that item's run.
 * stop() stops claiming, lets running items finish within a grace period, then releases what is left.
 * When the blob store, the ledger or the gateway is out of reach (infra.ts), the worker reports the item,
 * gives its lease back at once without spending the item's attempt, pauses claiming with a jittered
 * exponential backoff, and after `giveUpAfter` such failures in a row of one cause stops and run() throws.
 */
import os from 'node:os';
import type { BlobStore } from '../ledger/blobs.js';
import type { Claim, Ledger, StageKind } from '../ledger/types.js';
import { AdaptiveConcurrency, type ConcurrencyStep } from './concurrency.js';
import type { SmolError } from '../errors/index.js';
import { execute } from './execute.js';
import type { GatewayEndpoint } from './gateway-client.js';
import { gaveUp, guard, infraBackoff, infraFailure, redactUrl, type InfraArea, type InfraFailure } from './infra.js';
import {
  CONCURRENCY_WINDOW_MS, WORKER_GIVE_UP_AFTER, WORKER_INFRA_BACKOFF_CAP_MS, WORKER_INFRA_BACKOFF_MS, WORKER_LEASE_MS, WORKER_POLL_MS,
  WORKER_STOP_GRACE_MS,
} from './limits.js';
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
  /**
   * The blob store, ledger or gateway failed (`error` says what was done and why, `where` names it); with an
   * item when one was in hand. `infraFailures` counts them over the worker's life, `inARow` this cause's run.
   */
  | { type: 'infra'; area: InfraArea; error: string; where: string; itemId?: number; attempt?: number; stage?: string;
    released: boolean; inARow: number; backoffMs: number; infraFailures: number }
  | { type: 'stopped'; completed: number; infraFailures: number };

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
  /** Where the ledger and the blob store are, for messages (passwords in a URL are masked). */
  ledgerAt?: string;
  blobsAt?: string;
  /** Infrastructure failures in a row of one cause before the worker gives up (WORKER_GIVE_UP_AFTER). */
  giveUpAfter?: number;
  /** The pause after an infrastructure failure (WORKER_INFRA_BACKOFF_MS, doubled per failure in a row up to the cap). */
  infraBackoff?: { baseMs: number; capMs: number };
  /** How long a gateway may refuse connections within one attempt (GATEWAY_DOWN_MAX_WAIT_MS). */
  gatewayDownMaxWaitMs?: number;
  /** What a give-up stop allows running items, as `stop()`'s grace (WORKER_STOP_GRACE_MS). */
  graceMs?: number;
  /** Fault injection for tests: pause after a claim / after storing output, before completing. */
  faults?: { afterClaimMs?: number; afterOutputMs?: number };
  onEvent?: (e: WorkerEvent) => void;
}

interface Running { claim: Claim; abort: AbortController; started: boolean; done: Promise<void>; claimedAt: number }
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** The store's own description where it has one (a directory, or the ledger holding the blobs). */
function storeWhere(b: object): string {
  const x = b as { where?: unknown; dir?: unknown };
  return typeof x.where === 'string' ? x.where : typeof x.dir === 'string' ? x.dir : 'the blob store';
}

export class Worker {
  readonly id: string;
  readonly concurrency: AdaptiveConcurrency;
  completed = 0;
  /** Infrastructure failures over the worker's life (the `infra` events), also in the `stopped` event. */
  infraFailures = 0;
  private readonly running = new Map<number, Running>();
  private readonly manifests: ManifestCache;
  private stopping = false;
  private wake: (() => void) | null = null;
  private readonly leaseMs: number;
  private clockSkew = 0;
  private readonly ledgerAt: string;
  private readonly blobsAt: string;
  /** The current run of infrastructure failures of one cause; `at`: when its latest counted failure happened. */
  private streak: { area: InfraArea; n: number; at: number } | null = null;
  /** No claims before this (Date.now() ms): the backoff after an infrastructure failure. */
  private pauseUntil = 0;
  /** Infrastructure failures since the last concurrency window ended. */
  private windowInfra = 0;
  /** Set when the worker gave up; run() throws it once running items are drained. */
  private fatal: SmolError | null = null;

  constructor(private readonly o: WorkerOptions) {
    this.id = o.id ?? `${os.hostname()}:${process.pid}`;
    this.concurrency = new AdaptiveConcurrency(Math.max(1, o.concurrency), o.adaptive ?? false);
    this.manifests = new ManifestCache(o.ledger);
    this.leaseMs = o.leaseMs ?? WORKER_LEASE_MS;
    this.ledgerAt = redactUrl(o.ledgerAt ?? 'the ledger');
    this.blobsAt = o.blobsAt ?? storeWhere(o.blobs);
  }

  private emit(e: WorkerEvent): void { this.o.onEvent?.(e); }

  /** Runs until stop() (or until idle, with exitWhenIdleMs); throws when the worker gave up (infra.ts). */
  async run(): Promise<void> {
    this.o.ledger.prepareWrites();
    const kind = this.o.kind ?? (this.o.gateway ? undefined : 'cpu');
    const renewTimer = setInterval(() => void this.renewAll(), Math.max(50, Math.floor(this.leaseMs / 3)));
    const windowMs = this.o.windowMs ?? CONCURRENCY_WINDOW_MS;
    const windowTimer = setInterval(() => this.endWindow(windowMs), windowMs);
    let idleSince: number | null = null;
    try {
      while (!this.stopping) {
        const pause = this.pauseUntil - Date.now();
        if (pause > 0) { await this.waitForSlot(pause); continue; }
        const free = this.concurrency.current - this.running.size;
        if (free <= 0) { await this.waitForSlot(this.o.pollMs ?? WORKER_POLL_MS); continue; }
        try {
          const claims = await this.ledgerCall('claiming items', () => this.o.ledger.claim({ worker: this.id, leaseMs: this.leaseMs, limit: free, kind }));
          if (claims.length) this.clockSkew = claims[0].expiresAt - this.leaseMs - Date.now();
          for (const c of claims) this.start(c);
          // the ledger had no claimable item for a free slot: only now did the queue run dry
          if (claims.length < free) this.concurrency.markStarved();
          if (claims.length === 0) {
            if (this.running.size === 0 && this.o.exitWhenIdleMs !== undefined) {
              // idle means no work left anywhere: items backing off or leased by others may still come back
              const s = await this.ledgerCall('reading queue stats', () => this.o.ledger.stats());
              if (s.queueDepth + s.leased > 0) idleSince = null;
              else if (Date.now() - (idleSince ??= Date.now()) >= this.o.exitWhenIdleMs) break;
            }
            await this.waitForSlot(this.o.pollMs ?? WORKER_POLL_MS);
          } else idleSince = null;
        } catch (err) {
          this.infraFailed(infraFailure('ledger', 'claiming items', this.ledgerAt, err));
        }
      }
    } finally {
      clearInterval(windowTimer);
      await this.drain();
      await this.o.runner.close?.().catch(() => undefined);
      clearInterval(renewTimer);
      this.emit({ type: 'stopped', completed: this.completed, infraFailures: this.infraFailures });
    }
    if (this.fatal) throw this.fatal;
  }

  /**
   * A window whose items failed on infrastructure says nothing about capacity: it is not judged, and it is not
   * reported as the queue running dry, which it was not.
   */
  private endWindow(windowMs: number): void {
    const failed = this.windowInfra;
    this.windowInfra = 0;
    if (failed && this.concurrency.adaptive) this.concurrency.markStarved();
    const step = this.concurrency.endWindow(windowMs);
    this.emit({ type: 'concurrency', step: failed && this.concurrency.adaptive ? { ...step, reason: `${failed} infrastructure failures; not judged` } : step });
  }

  /** A ledger call whose failure is an infrastructure failure; its success ends a run of ledger failures. */
  private async ledgerCall<T>(op: string, fn: () => Promise<T>): Promise<T> {
    const r = await guard('ledger', op, this.ledgerAt, fn);
    if (this.streak?.area === 'ledger') this.streak = null;
    return r;
  }

  /**
   * Counts, reports and backs off; the `giveUpAfter`th failure in a row of one cause stops the worker. A row
   * counts tries, not items: an item claimed before the row's latest counted failure was already in flight
   * when the outage began, so its failure is the same try seen again (N items running meet one gateway outage
   * N times) and neither lengthens the row nor the backoff; it is still counted and reported.
   */
  private infraFailed(f: InfraFailure, on?: { claim: Claim; released: boolean; claimedAt: number }): void {
    this.infraFailures++;
    this.windowInfra++;
    const now = Date.now();
    const same = this.streak?.area === f.area;
    const seenAgain = same && on !== undefined && on.claimedAt <= this.streak!.at;
    const n = seenAgain ? this.streak!.n : same ? this.streak!.n + 1 : 1;
    if (!seenAgain) this.streak = { area: f.area, n, at: now };
    const giveUp = !seenAgain && n >= (this.o.giveUpAfter ?? WORKER_GIVE_UP_AFTER);
    const b = this.o.infraBackoff ?? { baseMs: WORKER_INFRA_BACKOFF_MS, capMs: WORKER_INFRA_BACKOFF_CAP_MS };
    const backoffMs = giveUp ? 0 : seenAgain ? Math.max(0, this.pauseUntil - now) : infraBackoff(n, b.baseMs, b.capMs);
    this.pauseUntil = Math.max(this.pauseUntil, now + backoffMs);
    const item = on ? { itemId: on.claim.item.id, attempt: on.claim.attempt, stage: on.claim.item.stage } : {};
    this.emit({ type: 'infra', area: f.area, error: f.message, where: f.where ?? '', ...item, released: on?.released ?? false, inARow: n, backoffMs, infraFailures: this.infraFailures });
    if (giveUp && !this.fatal) {
      this.fatal = gaveUp(f, n);
      this.stop(this.o.graceMs);
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
    const r: Running = { claim: c, abort: new AbortController(), started: false, done: Promise.resolve(), claimedAt: Date.now() };
    this.running.set(c.item.id, r);
    this.emit({ type: 'claimed', itemId: c.item.id, attempt: c.attempt, stage: c.item.stage });
    // process() reports its own failures; a throw that gets here came from an onEvent listener
    r.done = this.process(r).catch(() => undefined).finally(() => {
      this.running.delete(c.item.id);
      this.wake?.();
    });
  }

  private async renewAll(): Promise<void> {
    const live = [...this.running.values()];
    if (live.length === 0) return;
    try {
      const res = await this.ledgerCall('renewing leases', () => this.o.ledger.renew(live.map((r) => ({ itemId: r.claim.item.id, token: r.claim.token })), this.leaseMs));
      for (const x of res) {
        if (x.ok) continue;
        const r = this.running.get(x.itemId);
        if (!r) continue;
        this.emit({ type: 'rejected', itemId: x.itemId, attempt: r.claim.attempt, op: 'renew', reason: x.reason });
        r.abort.abort(); // canceled or lease lost: stop working on it now
      }
    } catch (err) {
      // retried on the next tick (the lease has slack for one miss), but said and counted: a ledger that
      // stays away costs every lease this worker holds
      if (!this.stopping || this.running.size) this.infraFailed(infraFailure('ledger', 'renewing leases', this.ledgerAt, err));
    }
  }

  /**
   * Runs one item; whatever keeps the worker from doing it (infra.ts, or any other throw) gives the lease
   * back at once as not the item's fault, instead of leaving it held until it expires, and is reported.
   */
  private async process(r: Running): Promise<void> {
    try {
      await this.attempt(r);
    } catch (err) {
      const c = r.claim;
      const f = infraFailure('worker', `working on item ${c.item.id}`, os.hostname(), err);
      let released = false;
      try {
        released = await this.o.ledger.release({ itemId: c.item.id, token: c.token, started: false, infra: true }, `${this.id}: ${f.message}`);
      } catch {
        // the ledger failed too (or is what failed): the lease expires instead, and the event says it was not released
      }
      this.infraFailed(f, { claim: c, released, claimedAt: r.claimedAt });
    }
  }

  private async attempt(r: Running): Promise<void> {
    const { claim: c, abort } = r;
    const { blobs } = this.o;
    const ledger = this.ledgerOps();
    const lease = { itemId: c.item.id, token: c.token };
    if (this.o.faults?.afterClaimMs) await sleep(this.o.faults.afterClaimMs);
    if (this.stopping || abort.signal.aborted) {
      if (await ledger.release({ ...lease, started: false }, 'worker stopping')) this.emit({ type: 'released', itemId: c.item.id, attempt: c.attempt });
      return;
    }
    r.started = true;
    const m = await this.ledgerCall(`reading the manifest of rollout ${c.item.rolloutId}`, () => this.manifests.get(c.item.rolloutId));
    const stage = m.stages[c.item.stageIndex];
    if (stage?.kind === 'cpu' && stageIsolation(stage).vm && this.o.runner.isolation !== 'vm') {
      // never run a stage outside the isolation it asks for; a retry here would only meet the same worker kind
      const error = `stage "${stage.name}" asks for vm isolation; run it with: smol worker --isolation vm`;
      const f = await ledger.fail({ ...lease, error, retryable: false });
      if (f.ok) this.emit({ type: 'failed', itemId: c.item.id, attempt: c.attempt, error, state: f.state });
      return;
    }
    const res = await execute({
      blobs, blobsAt: this.blobsAt, runner: this.o.runner, gateway: this.o.gateway, gatewayDownMaxWaitMs: this.o.gatewayDownMaxWaitMs, now: () => Date.now() + this.clockSkew,
    }, m, c, abort.signal);
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
    const extra = await advance(this.o.ledger, blobs, m, c.item, c.attempt, res.outputRef, { ledger: this.ledgerAt, blobs: this.blobsAt });
    const done = await ledger.complete({ ...lease, outputRef: res.outputRef, ...extra });
    if (done.ok) {
      this.completed++;
      this.streak = null; // the whole path worked: blobs, ledger and (for GPU stages) the gateway
      this.concurrency.completedOne();
      this.emit({ type: 'completed', itemId: c.item.id, attempt: c.attempt, stage: c.item.stage });
    } else {
      this.emit({ type: 'rejected', itemId: c.item.id, attempt: c.attempt, op: 'complete', reason: done.reason });
    }
  }

  /** The ledger writes of an attempt, each an infrastructure failure (naming the ledger) when it throws. */
  private ledgerOps() {
    const l = this.o.ledger;
    return {
      release: (...a: Parameters<Ledger['release']>) => this.ledgerCall('releasing a lease', () => l.release(...a)),
      fail: (...a: Parameters<Ledger['fail']>) => this.ledgerCall('recording a failed attempt', () => l.fail(...a)),
      complete: (...a: Parameters<Ledger['complete']>) => this.ledgerCall('completing an item', () => l.complete(...a)),
    };
  }
}
