/**
 * The figures of `rollout stats` from the counts each backend's queries return: the queries differ by
 * dialect, the arithmetic (retry rate, rates, GPU-hours) is one.
 */
import { RATE_WINDOW_MS } from './limits.js';
import type { ItemStatus, LedgerStats } from './types.js';

type Row = Record<string, unknown>;
const STATUSES: ItemStatus[] = ['queued', 'leased', 'done', 'dead', 'canceled'];

/** Rows of `SELECT status, count(*) AS n … GROUP BY status` as a count for every status, absent ones 0. */
export function countsByStatus(rows: Row[]): Record<ItemStatus, number> {
  const counts = Object.fromEntries(STATUSES.map((s) => [s, 0])) as Record<ItemStatus, number>;
  for (const c of rows) counts[c.status as ItemStatus] = Number(c.n);
  return counts;
}

/** What the backend counted; rows come straight from its queries (PostgreSQL's counts are strings). */
export interface StatsCounts {
  now: number;
  counts: Record<ItemStatus, number>;
  /** SUM(attempt) as a, items with attempt > 0 as n. */
  attempts: Row | undefined;
  /** `SELECT kind, count(*) AS n FROM events … GROUP BY kind`. */
  events: Row[];
  results: number;
  /** Results created in the last RATE_WINDOW_MS. */
  recentResults: number;
  trajectories: number;
  gpuHours: number;
  /** Inference requests as n, done as d, shed as s, mean batch size of the done ones as b. */
  inference: Row | undefined;
  queueAgeP50Ms: number;
  queueAgeP99Ms: number;
}

export function statsFrom(c: StatsCounts): LedgerStats {
  const ev: Record<string, number> = {};
  for (const e of c.events) ev[String(e.kind)] = Number(e.n);
  const attempts = Number(c.attempts?.a ?? 0);
  const attempted = Number(c.attempts?.n ?? 0);
  const inf = c.inference;
  return {
    now: c.now, queueDepth: c.counts.queued, leased: c.counts.leased, done: c.counts.done, dead: c.counts.dead, canceled: c.counts.canceled,
    queueAgeP50Ms: c.queueAgeP50Ms, queueAgeP99Ms: c.queueAgeP99Ms, attempts, itemsAttempted: attempted,
    retryRate: attempts === 0 ? 0 : (attempts - attempted) / attempts,
    leaseExpiries: ev.lease_expired ?? 0, staleRejections: ev.stale_rejected ?? 0, infraFailures: ev.infra_failure ?? 0,
    results: c.results, resultsPerSec: c.recentResults / (RATE_WINDOW_MS / 1000), trajectories: c.trajectories,
    trajectoriesPerGpuHour: c.gpuHours > 0 ? c.trajectories / c.gpuHours : null,
    inference: { requests: Number(inf?.n ?? 0), done: Number(inf?.d ?? 0), shed: Number(inf?.s ?? 0), meanBatchSize: inf?.b === null || inf?.b === undefined ? null : Number(inf.b) },
  };
}
