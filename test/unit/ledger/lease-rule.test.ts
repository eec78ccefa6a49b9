/**
 * The lease rule both backends carry out, case by case: what the end of an attempt does to the attempt
 * row, the item and the events, and whose token still counts. The contract suite checks that each
 * backend writes what the rule says; here the rule itself is pinned down without a database.
 */
import { describe, expect, it } from 'vitest';
import { attemptCount, backoffFor, holdsLease, rejectReason, settle, type AttemptCount, type AttemptEnd, type Settlement } from '../../../src/ledger/lease-rule.js';

const now = 1_000_000;
const at = (attempt: number, maxAttempts = 3, backoffMs = 100): AttemptCount => ({ attempt, maxAttempts, backoffMs });

describe('settle: what ending an attempt does', () => {
  const cases: [string, AttemptCount, AttemptEnd, Settlement][] = [
    ['an expired lease with attempts left retries after the backoff', at(2), { why: 'expired' }, {
      attempt: { outcome: 'expired', error: 'lease expired on attempt 2' },
      item: { to: 'queued', runAfter: now + 200, lastError: 'lease expired on attempt 2' },
      events: [{ kind: 'lease_expired', detail: 'lease expired on attempt 2' }],
    }],
    ['an expired lease on the last attempt goes dead, recorded as expiry and death', at(3), { why: 'expired' }, {
      attempt: { outcome: 'expired', error: 'lease expired on attempt 3' },
      item: { to: 'dead', lastError: 'lease expired on attempt 3' },
      events: [{ kind: 'lease_expired', detail: 'lease expired on attempt 3' }, { kind: 'dead', detail: 'lease expired on attempt 3' }],
    }],
    ['a failure with attempts left retries after the backoff (retryable by default)', at(1), { why: 'failed', error: 'boom' }, {
      attempt: { outcome: 'failed', error: 'boom' },
      item: { to: 'queued', runAfter: now + 100, lastError: 'boom' },
      events: [{ kind: 'retry', detail: 'boom' }],
    }],
    ['a failure marked retryable retries too', at(2), { why: 'failed', error: 'boom', retryable: true }, {
      attempt: { outcome: 'failed', error: 'boom' },
      item: { to: 'queued', runAfter: now + 200, lastError: 'boom' },
      events: [{ kind: 'retry', detail: 'boom' }],
    }],
    ['a failure on the last attempt goes dead with its error', at(3), { why: 'failed', error: 'boom' }, {
      attempt: { outcome: 'failed', error: 'boom' },
      item: { to: 'dead', lastError: 'boom' },
      events: [{ kind: 'dead', detail: 'boom' }],
    }],
    ['a non-retryable failure goes dead even with attempts left', at(1), { why: 'failed', error: 'bad input', retryable: false }, {
      attempt: { outcome: 'failed', error: 'bad input' },
      item: { to: 'dead', lastError: 'bad input' },
      events: [{ kind: 'dead', detail: 'bad input' }],
    }],
    ['a release with attempts left requeues at once, without backoff', at(1), { why: 'released', reason: 'shutdown' }, {
      attempt: { outcome: 'released', error: 'shutdown' },
      item: { to: 'queued', runAfter: now, lastError: 'shutdown' },
      events: [{ kind: 'released', detail: 'shutdown' }],
    }],
    ['a started release on the last attempt goes dead, saying so, with only a release event', at(3), { why: 'released', reason: 'shutdown', started: true }, {
      attempt: { outcome: 'released', error: 'shutdown' },
      item: { to: 'dead', lastError: 'released after the last attempt: shutdown' },
      events: [{ kind: 'released', detail: 'shutdown' }],
    }],
    ['an unstarted release drops the attempt and gives it back, even the last one', at(3), { why: 'released', reason: 'stopping', started: false }, {
      attempt: 'drop',
      item: { to: 'unclaimed', runAfter: now },
      events: [{ kind: 'released', detail: 'stopping' }],
    }],
    ['a worker\'s infrastructure failure gives the attempt back and is recorded as such, not as the item\'s failure', at(3),
      { why: 'released', reason: 'cannot read blob', started: false, infra: true }, {
        attempt: 'drop',
        item: { to: 'unclaimed', runAfter: now },
        events: [{ kind: 'infra_failure', detail: 'cannot read blob' }],
      }],
    ['an attempt past max_attempts (a lowered limit) counts as the last', at(5), { why: 'expired' }, {
      attempt: { outcome: 'expired', error: 'lease expired on attempt 5' },
      item: { to: 'dead', lastError: 'lease expired on attempt 5' },
      events: [{ kind: 'lease_expired', detail: 'lease expired on attempt 5' }, { kind: 'dead', detail: 'lease expired on attempt 5' }],
    }],
  ];
  it.each(cases)('%s', (_name, count, end, want) => {
    expect(settle(count, end, now)).toEqual(want);
  });
});

describe('backoffFor', () => {
  it.each([
    [100, 0, 100], [100, 1, 100], [100, 2, 200], [100, 3, 400], [100, 10, 51_200], [100, 11, 60_000], [50_000, 2, 60_000], [0, 5, 0],
  ])('base %i ms, attempt %i → %i ms (doubling, capped at a minute)', (base, attempt, want) => {
    expect(backoffFor(base, attempt)).toBe(want);
  });
});

describe('attemptCount', () => {
  it('reads the counters from an items row, PostgreSQL BIGINT strings included', () => {
    expect(attemptCount({ attempt: '2', max_attempts: 3, backoff_ms: '250', status: 'leased' })).toEqual({ attempt: 2, maxAttempts: 3, backoffMs: 250 });
  });
});

describe('whose token counts', () => {
  const lease = { itemId: 7, token: 'tok' };
  const row = (over: Record<string, unknown> = {}) => ({ status: 'leased', lease_token: 'tok', lease_expires_at: now, ...over });
  it.each([
    ['the live holder, up to and including the expiry instant', row(), true],
    ['the holder of a lease that is already past its expiry', row({ lease_expires_at: now - 1 }), false],
    ['a token that is not the current one', row({ lease_token: 'other' }), false],
    ['an item no longer leased', row({ status: 'queued' }), false],
    ['an item that does not exist', undefined, false],
    ['PostgreSQL BIGINT expiry as a string', row({ lease_expires_at: String(now + 5) }), true],
  ] as const)('holdsLease: %s → %s', (_name, s, want) => {
    expect(holdsLease(s, lease, now)).toBe(want);
  });

  it.each([
    ['canceled under the same holder', row({ status: 'canceled' }), 'canceled'],
    ['canceled, but the token is an older one', row({ status: 'canceled', lease_token: 'old' }), 'stale'],
    ['re-leased to someone else', row({ lease_token: 'other' }), 'stale'],
    ['done', row({ status: 'done' }), 'stale'],
    ['missing', undefined, 'stale'],
  ] as const)('rejectReason: %s → %s', (_name, s, want) => {
    expect(rejectReason(s, lease)).toBe(want);
  });
});
