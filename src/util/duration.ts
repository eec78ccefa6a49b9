/**
 * Durations from manifests and flags ("30s", "5m", a number). One maximum for all of them: Node's timers
 * hold at most 2^31-1 ms (24.8 days) and fire at once past it, and the ledger keeps milliseconds as integers,
 * so "99999999999999999999h" must be an error naming its field, not a timer that fires now or a failed insert.
 */
import ms from 'ms';

/** 24 days: the longest duration smol accepts anywhere (docs/exit-codes.md). */
export const MAX_DURATION_MS = 24 * 24 * 3600 * 1000;

/**
 * Whole milliseconds in `v`, or why it is not a duration smol accepts. A bare number (or numeric string)
 * counts in `bare` units: milliseconds in manifests, seconds on the command line.
 */
export function parseDuration(v: string | number, bare: 'ms' | 's'): { ms: number } | { problem: string } {
  const scale = bare === 's' ? 1000 : 1;
  const n = typeof v === 'number' ? v * scale
    : /^\d+(\.\d+)?$/.test(v.trim()) ? Number(v) * scale
      : (ms as (s: string) => number | undefined)(v);
  const forms = bare === 's' ? 'seconds or forms like 500ms, 30s, 5m' : 'forms like 500ms, 30s, 5m or milliseconds';
  if (n === undefined || !Number.isFinite(n) || n <= 0) return { problem: `${JSON.stringify(v)} is not a duration; use ${forms}` };
  if (n > MAX_DURATION_MS) return { problem: `${JSON.stringify(v)} is too long: durations are at most 24d` };
  return { ms: Math.ceil(n) };
}
