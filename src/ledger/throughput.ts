/**
 * Rates and stage times computed from attempt rows (`rollout stats`): attempts per minute over the span
 * the attempts cover, and per stage the p50/p95 wall time of attempts that completed. Pure, so tests can
 * hand it rows whose answer they know.
 */
import { percentileIndex } from './rows.js';
import type { AttemptTiming, StageKind } from './types.js';

export interface StageTiming {
  stage: string;
  kind: StageKind;
  /** Executions started, whatever their outcome. */
  attempts: number;
  done: number;
  /** Failed or lease expired. */
  failed: number;
  /** Wall time of completed attempts (claim to completion); null before any completed. */
  p50Ms: number | null;
  p95Ms: number | null;
}

export interface Throughput {
  /** Attempts started per minute, over the span from the first start to the last end (or now, while one runs). */
  attemptsPerMin: number | null;
  spanMs: number;
  stages: StageTiming[];
}

export function throughput(rows: AttemptTiming[], now: number): Throughput {
  const stages = new Map<string, { t: StageTiming; index: number; durations: number[] }>();
  let first = Infinity;
  let last = -Infinity;
  for (const r of rows) {
    first = Math.min(first, r.startedAt);
    last = Math.max(last, r.endedAt ?? now);
    let s = stages.get(r.stage);
    if (!s) stages.set(r.stage, (s = { t: { stage: r.stage, kind: r.kind, attempts: 0, done: 0, failed: 0, p50Ms: null, p95Ms: null }, index: r.stageIndex, durations: [] }));
    s.t.attempts++;
    if (r.outcome === 'done' && r.endedAt !== null) { s.t.done++; s.durations.push(r.endedAt - r.startedAt); }
    if (r.outcome === 'failed' || r.outcome === 'expired') s.t.failed++;
  }
  const spanMs = rows.length ? Math.max(0, last - first) : 0;
  const out = [...stages.values()].sort((a, b) => a.index - b.index).map(({ t, durations }) => {
    if (durations.length === 0) return t;
    durations.sort((a, b) => a - b);
    return { ...t, p50Ms: durations[percentileIndex(durations.length, 0.5)], p95Ms: durations[percentileIndex(durations.length, 0.95)] };
  });
  return { attemptsPerMin: spanMs > 0 ? rows.length / (spanMs / 60_000) : null, spanMs, stages: out };
}
