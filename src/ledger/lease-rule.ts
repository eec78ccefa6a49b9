/**
 * The lease rule, decided once for both backends: whose token may still write, and what the end of an
 * attempt (its lease expired, the worker failed it, the worker gave it back) does to the attempt and the
 * item. Pure: each backend reads the item's row, asks here, and carries the answer out in its own
 * transaction, so SQLite and PostgreSQL cannot drift on when an item retries, waits or goes dead.
 */
import { BACKOFF_CAP_MS } from './limits.js';
import type { EventKind, LeaseRef, RejectReason } from './types.js';

type Row = Record<string, unknown>;

/** The counters of a leased item that the rule looks at. */
export interface AttemptCount { attempt: number; maxAttempts: number; backoffMs: number }

/** Why an attempt ended. */
export type AttemptEnd =
  | { why: 'expired' }
  | { why: 'failed'; error: string; retryable?: boolean }
  /** `started: false`: the worker never ran it (a prefetched claim at shutdown). */
  | { why: 'released'; reason: string; started?: boolean; infra?: boolean };

/** What the backend writes, in this order: the attempt row, the item row, then the events. */
export interface Settlement {
  /** Close the attempt row with an outcome and error, or drop it (it never ran, so it never counted). */
  attempt: { outcome: 'expired' | 'failed' | 'released'; error: string } | 'drop';
  /**
   * queued: back in line at runAfter with lastError; dead: never runs again; unclaimed: queued now with
   * the attempt counter given back and last_error untouched. Every case clears the lease.
   */
  item: { to: 'queued'; runAfter: number; lastError: string } | { to: 'dead'; lastError: string } | { to: 'unclaimed'; runAfter: number };
  events: { kind: EventKind; detail: string }[];
}

/** What a queued item past its deadline records as it goes dead at claim time (with a 'deadline' event). */
export const DEADLINE_MISSED = 'deadline exceeded before it could run';

/** Exponential backoff with a cap; the ledger applies it so every worker agrees. */
export function backoffFor(baseMs: number, attempt: number): number {
  return Math.min(baseMs * 2 ** Math.max(0, attempt - 1), BACKOFF_CAP_MS);
}

/** The rule's inputs from an items row (PostgreSQL returns BIGINT as strings, hence Number()). */
export function attemptCount(r: Row): AttemptCount {
  return { attempt: Number(r.attempt), maxAttempts: Number(r.max_attempts), backoffMs: Number(r.backoff_ms) };
}

/**
 * What ending the current attempt does. An expired lease or a retryable failure retries with backoff while
 * attempts remain; a release retries at once (the work was not at fault) unless it was the last attempt;
 * an unstarted release gives the attempt back, so prefetched claims do not burn retries.
 */
export function settle(c: AttemptCount, end: AttemptEnd, now: number): Settlement {
  const last = c.attempt >= c.maxAttempts;
  const retryAt = now + backoffFor(c.backoffMs, c.attempt);
  switch (end.why) {
    case 'expired': {
      const msg = `lease expired on attempt ${c.attempt}`;
      const expired = { kind: 'lease_expired' as const, detail: msg };
      return last
        ? { attempt: { outcome: 'expired', error: msg }, item: { to: 'dead', lastError: msg }, events: [expired, { kind: 'dead', detail: msg }] }
        : { attempt: { outcome: 'expired', error: msg }, item: { to: 'queued', runAfter: retryAt, lastError: msg }, events: [expired] };
    }
    case 'failed': {
      const attempt = { outcome: 'failed' as const, error: end.error };
      return end.retryable !== false && !last
        ? { attempt, item: { to: 'queued', runAfter: retryAt, lastError: end.error }, events: [{ kind: 'retry', detail: end.error }] }
        : { attempt, item: { to: 'dead', lastError: end.error }, events: [{ kind: 'dead', detail: end.error }] };
    }
    case 'released': {
      const events = [{ kind: end.infra ? 'infra_failure' as const : 'released' as const, detail: end.reason }];
      if (end.started === false) return { attempt: 'drop', item: { to: 'unclaimed', runAfter: now }, events };
      const attempt = { outcome: 'released' as const, error: end.reason };
      return last
        ? { attempt, item: { to: 'dead', lastError: `released after the last attempt: ${end.reason}` }, events }
        : { attempt, item: { to: 'queued', runAfter: now, lastError: end.reason }, events };
    }
  }
}

/** Whether `l` holds the item's live lease (leased, its token, not yet expired); `s` is the item's row. */
export function holdsLease(s: Row | undefined, l: LeaseRef, now: number): s is Row {
  return !!s && s.status === 'leased' && s.lease_token === l.token && !(Number(s.lease_expires_at) < now);
}

/**
 * Why a write with `l` was refused: 'canceled' when the rollout was canceled under a live holder (cancel
 * keeps the token so the holder learns that), else 'stale', which the backend records as an event.
 */
export function rejectReason(s: Row | undefined, l: LeaseRef): RejectReason {
  return s && s.status === 'canceled' && s.lease_token === l.token ? 'canceled' : 'stale';
}
