/**
 * The ledger contract shared by the SQLite and PostgreSQL backends (DESIGN.md §6). Every write that touches
 * a leased item carries (item, lease token); a stale token is rejected and counted, never silently applied.
 * All times are milliseconds on the ledger's own clock: callers never compute expiries themselves.
 */

export type StageKind = 'cpu' | 'gpu';
export type ItemStatus = 'queued' | 'leased' | 'done' | 'dead' | 'canceled';

/** A work item as submitted; the ledger assigns id, attempt and lease. */
export interface NewItem {
  rolloutId: string;
  stage: string;
  stageIndex: number;
  kind: StageKind;
  sampleId: string;
  /** Digest of the input blob (the previous stage's output, or the sample's input). */
  inputRef: string;
  inputVersion: string;
  envVersion: string;
  idempotencyKey: string;
  maxAttempts: number;
  /** Per-attempt wall-clock limit the worker enforces. */
  timeoutMs: number;
  /** Base of the exponential retry backoff. */
  backoffMs: number;
  /** Absolute deadline (ledger clock); past it the item goes dead instead of running. */
  deadlineAt: number | null;
}

export interface WorkItem extends NewItem {
  id: number;
  status: ItemStatus;
  attempt: number;
  lastError: string | null;
  createdAt: number;
  updatedAt: number;
}

export interface Claim {
  item: WorkItem;
  attempt: number;
  token: string;
  expiresAt: number;
}

export interface LeaseRef { itemId: number; token: string }

export type RejectReason = 'stale' | 'canceled';
export type RenewResult = { itemId: number; ok: true; expiresAt: number } | { itemId: number; ok: false; reason: RejectReason };

export interface CompleteRequest extends LeaseRef {
  outputRef: string;
  /** Items the next stage needs; inserted in the same transaction (idempotent per key). */
  next?: NewItem[];
  /** Set when the last stage completes: the assembled trajectory. */
  trajectory?: { rolloutId: string; sampleId: string; ref: string };
}
export type CompleteResult = { ok: true; resultCreated: boolean } | { ok: false; reason: RejectReason };

export interface FailRequest extends LeaseRef { error: string; retryable?: boolean }
export type FailResult = { ok: true; state: 'queued' | 'dead' } | { ok: false; reason: RejectReason };

export interface ClaimOptions {
  worker: string;
  leaseMs: number;
  limit?: number;
  kind?: StageKind;
}

export interface RolloutRecord {
  id: string;
  name: string;
  manifestDigest: string;
  envVersion: string;
  gpus: number;
  status: 'active' | 'canceled';
  createdAt: number;
  canceledAt: number | null;
}

export interface RolloutSummary extends RolloutRecord {
  counts: Record<ItemStatus, number>;
  trajectories: number;
}

export interface ResultRecord {
  idempotencyKey: string;
  itemId: number;
  rolloutId: string;
  stage: string;
  sampleId: string;
  attempt: number;
  outputRef: string;
  createdAt: number;
}

export interface TrajectoryRecord { rolloutId: string; sampleId: string; ref: string; createdAt: number }

export type InferenceStatus = 'pending' | 'done' | 'shed' | 'failed';
export interface InferenceRecord {
  idempotencyKey: string;
  requestId: string;
  rolloutId: string;
  requestHash: string;
  model: string;
  modelVersion: string;
  promptVersion: string;
  inputRef: string;
  params: string;
  status: InferenceStatus;
  outputRef: string | null;
  envVersion: string | null;
  batchId: string | null;
  batchSize: number | null;
  upstreamMs: number | null;
  error: string | null;
  createdAt: number;
  completedAt: number | null;
}
export type NewInference = Pick<InferenceRecord, 'idempotencyKey' | 'requestId' | 'rolloutId' | 'requestHash' | 'model' | 'modelVersion' | 'promptVersion' | 'inputRef' | 'params'>;
export interface InferenceOutcome {
  idempotencyKey: string;
  status: Exclude<InferenceStatus, 'pending'>;
  outputRef: string | null;
  envVersion: string | null;
  batchId: string | null;
  batchSize: number | null;
  upstreamMs: number | null;
  error: string | null;
}

/** `infra_failure`: a worker released a lease because it could not reach a blob, the ledger or the gateway. */
export type EventKind = 'stale_rejected' | 'lease_expired' | 'retry' | 'dead' | 'canceled' | 'released' | 'deadline' | 'infra_failure';

export interface LedgerStats {
  now: number;
  queueDepth: number;
  leased: number;
  done: number;
  dead: number;
  canceled: number;
  queueAgeP50Ms: number;
  queueAgeP99Ms: number;
  attempts: number;
  itemsAttempted: number;
  retryRate: number;
  leaseExpiries: number;
  staleRejections: number;
  /** Leases given back because the worker could not read or write a blob or reach the gateway (not the item's fault). */
  infraFailures: number;
  results: number;
  resultsPerSec: number;
  trajectories: number;
  trajectoriesPerGpuHour: number | null;
  inference: { requests: number; done: number; shed: number; meanBatchSize: number | null };
}

/** One execution's stage and times, for per-stage timing (`rollout stats`). */
export interface AttemptTiming { stage: string; stageIndex: number; kind: StageKind; outcome: string; startedAt: number; endedAt: number | null }

export interface CheckIssue { check: string; detail: string }
export interface BlobRef { ref: string; what: string }

/** One interface, two backends. Methods are async so the PostgreSQL backend fits the same shape. */
export interface Ledger {
  readonly backend: 'sqlite' | 'postgres';
  now(): Promise<number>;
  putManifest(digest: string, body: string): Promise<void>;
  getManifest(digest: string): Promise<string | null>;
  /** Creates the rollout and its first items atomically; false when it already existed with the same manifest. */
  createRollout(r: Omit<RolloutRecord, 'status' | 'createdAt' | 'canceledAt'>, items: NewItem[]): Promise<{ created: boolean }>;
  getRollout(id: string): Promise<RolloutSummary | null>;
  listRollouts(): Promise<RolloutSummary[]>;
  cancelRollout(id: string): Promise<{ canceled: number }>;
  /** Inserts items; an existing idempotency key is left alone. Returns how many were new. */
  enqueue(items: NewItem[]): Promise<number>;
  claim(opts: ClaimOptions): Promise<Claim[]>;
  renew(leases: LeaseRef[], leaseMs: number): Promise<RenewResult[]>;
  complete(req: CompleteRequest): Promise<CompleteResult>;
  /** Several completions in one transaction (each checked on its own token); results in request order. */
  completeMany(reqs: CompleteRequest[]): Promise<CompleteResult[]>;
  fail(req: FailRequest): Promise<FailResult>;
  /**
   * Gives a lease back (graceful shutdown). The attempt stays counted unless `started` is false. `infra`:
   * the worker could not do the work (blob store, gateway), recorded as an `infra_failure` event instead.
   */
  release(lease: LeaseRef & { started?: boolean; infra?: boolean }, reason: string): Promise<boolean>;
  /** Reclaims expired leases now (claim also does this). Returns how many were reclaimed. */
  reclaimExpired(): Promise<number>;
  getItem(id: number): Promise<WorkItem | null>;
  listItems(rolloutId: string, limit?: number): Promise<WorkItem[]>;
  results(filter: { rolloutId?: string; sampleId?: string }): Promise<ResultRecord[]>;
  trajectories(rolloutId: string): Promise<TrajectoryRecord[]>;
  attemptsOf(itemId: number): Promise<{ attempt: number; worker: string; outcome: string; startedAt: number; endedAt: number | null }[]>;
  beginInference(reqs: NewInference[]): Promise<void>;
  finishInference(outcomes: InferenceOutcome[]): Promise<void>;
  getInference(idempotencyKey: string): Promise<InferenceRecord | null>;
  stats(rolloutId?: string): Promise<LedgerStats>;
  /** Every attempt's stage and start/end (ledger clock), oldest first. */
  attemptTimings(rolloutId?: string): Promise<AttemptTiming[]>;
  check(): Promise<CheckIssue[]>;
  /** Every blob digest a row names, once each, with one of the rows that names it (`ledger check`). */
  blobRefs(): Promise<BlobRef[]>;
  /**
   * Readies a process that is about to write (a worker, the gateway) so that its first writes are not slow:
   * SQLite starts its checkpoint thread now instead of inside the first write, where a new thread's start-up
   * competed with every other writer's turn. A no-op for PostgreSQL.
   */
  prepareWrites(): void;
  close(): Promise<void>;
}
