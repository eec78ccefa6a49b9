/** Row ↔ record mapping shared by both backends (PostgreSQL returns BIGINT as strings, hence Number()). */
import type { AttemptTiming, InferenceRecord, ItemStatus, NewItem, ResultRecord, RolloutRecord, TrajectoryRecord, WorkItem } from './types.js';

type Row = Record<string, unknown>;
const num = (v: unknown): number => Number(v);
const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));
const strOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : String(v));

export function rowToItem(r: Row): WorkItem {
  return {
    id: num(r.id),
    rolloutId: String(r.rollout_id),
    stage: String(r.stage),
    stageIndex: num(r.stage_index),
    kind: r.kind as WorkItem['kind'],
    sampleId: String(r.sample_id),
    inputRef: String(r.input_ref),
    inputVersion: String(r.input_version),
    envVersion: String(r.env_version),
    idempotencyKey: String(r.idem_key),
    maxAttempts: num(r.max_attempts),
    timeoutMs: num(r.timeout_ms),
    backoffMs: num(r.backoff_ms),
    deadlineAt: numOrNull(r.deadline_at),
    status: r.status as ItemStatus,
    attempt: num(r.attempt),
    lastError: strOrNull(r.last_error),
    createdAt: num(r.created_at),
    updatedAt: num(r.updated_at),
  };
}

/** Column values for an INSERT into items, in ITEM_COLUMNS order. */
export const ITEM_COLUMNS = ['rollout_id', 'stage', 'stage_index', 'kind', 'sample_id', 'input_ref', 'input_version', 'env_version', 'idem_key', 'max_attempts', 'timeout_ms', 'backoff_ms', 'deadline_at', 'status', 'attempt', 'run_after', 'created_at', 'updated_at'] as const;
export function itemValues(i: NewItem, now: number): unknown[] {
  return [i.rolloutId, i.stage, i.stageIndex, i.kind, i.sampleId, i.inputRef, i.inputVersion, i.envVersion, i.idempotencyKey, i.maxAttempts, i.timeoutMs, i.backoffMs, i.deadlineAt, 'queued', 0, now, now, now];
}

export function rowToRollout(r: Row): RolloutRecord {
  return {
    id: String(r.id), name: String(r.name), manifestDigest: String(r.manifest_digest), envVersion: String(r.env_version),
    gpus: num(r.gpus), status: r.status as RolloutRecord['status'], createdAt: num(r.created_at), canceledAt: numOrNull(r.canceled_at),
  };
}

export function rowToResult(r: Row): ResultRecord {
  return {
    idempotencyKey: String(r.idem_key), itemId: num(r.item_id), rolloutId: String(r.rollout_id), stage: String(r.stage),
    sampleId: String(r.sample_id), attempt: num(r.attempt), outputRef: String(r.output_ref), createdAt: num(r.created_at),
  };
}

export function rowToInference(r: Row): InferenceRecord {
  return {
    idempotencyKey: String(r.idem_key), requestId: String(r.request_id), rolloutId: String(r.rollout_id), requestHash: String(r.request_hash),
    model: String(r.model), modelVersion: String(r.model_version), promptVersion: String(r.prompt_version), inputRef: String(r.input_ref),
    params: String(r.params), status: r.status as InferenceRecord['status'], outputRef: strOrNull(r.output_ref), envVersion: strOrNull(r.env_version),
    batchId: strOrNull(r.batch_id), batchSize: numOrNull(r.batch_size), upstreamMs: numOrNull(r.upstream_ms), error: strOrNull(r.error),
    createdAt: num(r.created_at), completedAt: numOrNull(r.completed_at),
  };
}

export function rowToTrajectory(r: Row): TrajectoryRecord {
  return { rolloutId: String(r.rollout_id), sampleId: String(r.sample_id), ref: String(r.ref), createdAt: num(r.created_at) };
}

export function rowToAttempt(r: Row): { attempt: number; worker: string; outcome: string; startedAt: number; endedAt: number | null } {
  return { attempt: num(r.attempt), worker: String(r.worker), outcome: String(r.outcome), startedAt: num(r.started_at), endedAt: numOrNull(r.ended_at) };
}

export function percentileIndex(count: number, p: number): number {
  return Math.min(count - 1, Math.max(0, Math.ceil(p * count) - 1));
}

export function rowToTiming(r: Row): AttemptTiming {
  return {
    stage: String(r.stage), stageIndex: Number(r.stage_index), kind: r.kind as AttemptTiming['kind'], outcome: String(r.outcome),
    startedAt: Number(r.started_at), endedAt: r.ended_at === null ? null : Number(r.ended_at),
  };
}
