/** The SQLite ledger (better-sqlite3, WAL). One file, many processes; see sqlite-tx.ts for the locking rules. */
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { LedgerVersionError } from './errors.js';
import { sqliteMigrations } from './sqlite-migrations.js';
import { Checkpointer } from './sqlite-checkpointer.js';
import { TxRunner } from './sqlite-tx.js';
import { SqliteReads } from './sqlite-reads.js';
import { attemptCount, DEADLINE_MISSED, holdsLease, rejectReason, settle, type Settlement } from './lease-rule.js';
import {
  CHECKPOINT_INTERVAL_MS, RECLAIM_BATCH, SQLITE_BUSY_BUDGET_MS, WAL_AUTOCHECKPOINT_FRAMES, WAL_BEHIND_FRAMES, WAL_SIZE_LIMIT_BYTES,
} from './limits.js';
import { ITEM_COLUMNS, itemValues, rowToItem } from './rows.js';
import type {
  AttemptTiming, BlobRef, CheckIssue, Claim, ClaimOptions, CompleteRequest, CompleteResult, EventKind, FailRequest, FailResult, InferenceOutcome,
  InferenceRecord, Ledger, LeaseRef, LedgerStats, NewInference, NewItem, RejectReason, RenewResult, ResultRecord, RolloutRecord,
  RolloutSummary, TrajectoryRecord, WorkItem,
} from './types.js';

export interface SqliteLedgerOptions {
  path: string;
  /** The ledger's clock (ms). Tests inject one; everything else uses the default. */
  clock?: () => number;
  /** How long a caller may wait for the write lock before LedgerBusyError. */
  busyBudgetMs?: number;
  /** SQLite's own busy handler timeout; 0 (default) leaves waiting to our jittered retry. Benchmarks set it for the baseline. */
  sqliteBusyTimeoutMs?: number;
  /** 'full' fsyncs the WAL at every commit (power-loss durable); 'normal' survives process crashes. */
  synchronous?: 'normal' | 'full';
  /** 'background' (default): a thread checkpoints the WAL once this ledger writes; 'inline': SQLite's autocheckpoint in commits. */
  checkpoints?: 'background' | 'inline';
  /**
   * 'fifo' (default): contended writers queue across processes (sqlite-lock.ts), fairer but slower under
   * heavy contention; 'poll' (also SMOL_LEDGER_LOCK=poll): retry only, as before (the benchmark's baseline).
   */
  lockQueue?: 'fifo' | 'poll';
}

type Row = Record<string, unknown>;

export class SqliteLedger implements Ledger {
  readonly backend = 'sqlite' as const;
  readonly db: Database.Database;
  readonly tx: TxRunner;
  private readonly clock: () => number;
  private readonly reads: SqliteReads;
  private readonly st: Record<string, Database.Statement>;
  private checkpointer: Checkpointer | null = null;

  constructor(opts: SqliteLedgerOptions) {
    fs.mkdirSync(path.dirname(path.resolve(opts.path)), { recursive: true });
    this.clock = opts.clock ?? Date.now;
    this.db = new Database(opts.path, { timeout: opts.sqliteBusyTimeoutMs ?? 0 });
    this.tx = new TxRunner(this.db, opts.busyBudgetMs ?? Number(process.env.SMOL_LEDGER_BUSY_MS ?? SQLITE_BUSY_BUDGET_MS), { lockQueue: opts.lockQueue ?? (process.env.SMOL_LEDGER_LOCK === 'poll' ? 'poll' : 'fifo') });
    this.tx.retry('opening ledger', () => {
      this.db.pragma('journal_mode = WAL');
      this.db.pragma(`synchronous = ${opts.synchronous ?? 'normal'}`);
      // Bounded WAL: checkpoint every ~4 MB of frames and truncate the file back to 64 MB after a reset.
      this.db.pragma(`wal_autocheckpoint = ${WAL_AUTOCHECKPOINT_FRAMES}`);
      this.db.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
      this.db.pragma('foreign_keys = ON');
    });
    this.migrate();
    // a ledger that only reads (rollout ls, stats) starts no checkpointer
    if (opts.checkpoints !== 'inline' && !this.db.memory) this.tx.beforeFirstWrite = () => this.startCheckpointer();
    // the write queue's thread starts now: by the first contended write it has joined (a cold one took
    // 200+ ms with eight processes starting at once, during which their writers polled, unfairly)
    this.tx.startQueue();
    this.st = this.prepare();
    this.reads = new SqliteReads(this.db, this.tx, this.clock);
  }

  /** Takes checkpoints out of this process's commits (see sqlite-checkpointer.ts); inline again if the thread fails. */
  private startCheckpointer(): void {
    try {
      const o = { intervalMs: CHECKPOINT_INTERVAL_MS, minFrames: WAL_AUTOCHECKPOINT_FRAMES, maxFrames: WAL_BEHIND_FRAMES };
      this.checkpointer = new Checkpointer(this.db.name, o, () => {
        this.checkpointer = null;
        this.tx.beforeWrite = null;
        if (this.db.open) this.db.pragma(`wal_autocheckpoint = ${WAL_AUTOCHECKPOINT_FRAMES}`);
      });
      this.db.pragma('wal_autocheckpoint = 0');
      let inline = false;
      // while the WAL is past WAL_BEHIND_FRAMES the commits checkpoint too (see Checkpointer.behind)
      this.tx.beforeWrite = () => {
        const behind = this.checkpointer?.behind() ?? false;
        if (behind === inline) return;
        inline = behind;
        this.db.pragma(`wal_autocheckpoint = ${inline ? WAL_AUTOCHECKPOINT_FRAMES : 0}`);
      };
    } catch {
      this.checkpointer = null; // no threads here: SQLite's autocheckpoint stays on
    }
  }

  private migrate(): void {
    this.tx.write('migrating ledger', () => {
      const have = this.db.pragma('user_version', { simple: true }) as number;
      if (have > sqliteMigrations.length) {
        throw new LedgerVersionError(`ledger schema version ${have} is newer than this smol understands (${sqliteMigrations.length})`, { hint: 'Upgrade smol.' });
      }
      for (let v = have; v < sqliteMigrations.length; v++) this.db.exec(sqliteMigrations[v]);
      if (have !== sqliteMigrations.length) this.db.pragma(`user_version = ${sqliteMigrations.length}`);
    });
  }

  private prepare(): Record<string, Database.Statement> {
    const p = (sql: string) => this.db.prepare(sql);
    return {
      insItem: p(`INSERT OR IGNORE INTO items (${ITEM_COLUMNS.join(',')}) VALUES (${ITEM_COLUMNS.map(() => '?').join(',')})`),
      // one kind per query: with `kind IN (…)` SQLite sorts every ready row instead of walking the index
      ready: p(`SELECT * FROM items WHERE status = 'queued' AND kind = ? AND run_after <= ? ORDER BY run_after, id LIMIT ?`),
      lease: p(`UPDATE items SET status = 'leased', attempt = ?, lease_token = ?, lease_owner = ?, lease_expires_at = ?, updated_at = ? WHERE id = ?`),
      insAttempt: p(`INSERT INTO attempts (item_id, attempt, token, worker, started_at, outcome) VALUES (?, ?, ?, ?, ?, 'running')`),
      endAttempt: p(`UPDATE attempts SET outcome = ?, ended_at = ?, error = ? WHERE item_id = ? AND attempt = ?`),
      expired: p(`SELECT id, attempt, max_attempts, backoff_ms, rollout_id FROM items WHERE status = 'leased' AND lease_expires_at < ? LIMIT ${RECLAIM_BATCH}`),
      requeue: p(`UPDATE items SET status = 'queued', run_after = ?, last_error = ?, lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, updated_at = ? WHERE id = ?`),
      kill: p(`UPDATE items SET status = 'dead', last_error = ?, lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, updated_at = ? WHERE id = ?`),
      renew: p(`UPDATE items SET lease_expires_at = ?, updated_at = ? WHERE id = ? AND lease_token = ? AND status = 'leased' AND lease_expires_at >= ?`),
      leaseState: p(`SELECT status, lease_token, lease_expires_at, attempt, max_attempts, backoff_ms, rollout_id, stage, sample_id, idem_key FROM items WHERE id = ?`),
      insResult: p(`INSERT OR IGNORE INTO results (idem_key, item_id, rollout_id, stage, sample_id, attempt, output_ref, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`),
      done: p(`UPDATE items SET status = 'done', lease_expires_at = NULL, updated_at = ? WHERE id = ?`),
      insTraj: p(`INSERT OR IGNORE INTO trajectories (rollout_id, sample_id, ref, created_at) VALUES (?, ?, ?, ?)`),
      event: p(`INSERT INTO events (at, kind, item_id, rollout_id, detail) VALUES (?, ?, ?, ?, ?)`),
      unclaim: p(`UPDATE items SET status = 'queued', attempt = attempt - 1, run_after = ?, lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL, updated_at = ? WHERE id = ?`),
      delAttempt: p(`DELETE FROM attempts WHERE item_id = ? AND attempt = ?`),
    };
  }

  async now(): Promise<number> { return this.clock(); }

  private readonly stmts = new Map<string, Database.Statement>();
  private cached(sql: string): Database.Statement {
    let s = this.stmts.get(sql);
    if (!s) this.stmts.set(sql, (s = this.db.prepare(sql)));
    return s;
  }

  private event(now: number, kind: EventKind, itemId: number | null, rolloutId: string | null, detail: string | null): void {
    this.st.event.run(now, kind, itemId, rolloutId, detail);
  }

  async putManifest(digest: string, body: string): Promise<void> {
    this.tx.write('storing manifest', () => {
      this.db.prepare('INSERT OR IGNORE INTO manifests (digest, body, created_at) VALUES (?, ?, ?)').run(digest, body, this.clock());
    });
  }
  async getManifest(digest: string): Promise<string | null> { return this.reads.manifest(digest); }

  async createRollout(r: Omit<RolloutRecord, 'status' | 'createdAt' | 'canceledAt'>, items: NewItem[]): Promise<{ created: boolean }> {
    return this.tx.write('creating rollout', () => {
      const now = this.clock();
      const ins = this.db.prepare('INSERT OR IGNORE INTO rollouts (id, name, manifest_digest, env_version, gpus, created_at) VALUES (?, ?, ?, ?, ?, ?)')
        .run(r.id, r.name, r.manifestDigest, r.envVersion, r.gpus, now);
      if (ins.changes === 0) return { created: false };
      for (const i of items) this.st.insItem.run(...itemValues(i, now));
      return { created: true };
    });
  }

  async getRollout(id: string): Promise<RolloutSummary | null> { return this.reads.rollout(id); }
  async listRollouts(): Promise<RolloutSummary[]> { return this.reads.rollouts(); }

  async cancelRollout(id: string): Promise<{ canceled: number }> {
    return this.tx.write('canceling rollout', () => {
      const now = this.clock();
      this.db.prepare(`UPDATE rollouts SET status = 'canceled', canceled_at = coalesce(canceled_at, ?) WHERE id = ?`).run(now, id);
      // lease_token stays so the holder's next renew learns "canceled" rather than "stale"
      const res = this.db.prepare(`UPDATE items SET status = 'canceled', updated_at = ? WHERE rollout_id = ? AND status IN ('queued', 'leased')`).run(now, id);
      this.event(now, 'canceled', null, id, `${res.changes} items`);
      return { canceled: res.changes };
    });
  }

  async enqueue(items: NewItem[]): Promise<number> { return this.enqueueSync(items); }
  enqueueSync(items: NewItem[]): number {
    return this.tx.write('enqueueing items', () => {
      const now = this.clock();
      let n = 0;
      for (const i of items) n += this.st.insItem.run(...itemValues(i, now)).changes;
      return n;
    });
  }

  async claim(opts: ClaimOptions): Promise<Claim[]> { return this.claimSync(opts); }
  claimSync(opts: ClaimOptions): Claim[] {
    const kinds = opts.kind ? [opts.kind] : ['cpu', 'gpu'];
    const limit = opts.limit ?? 1;
    return this.tx.write('claiming work', () => {
      const now = this.clock();
      this.reclaimLocked(now);
      const out: Claim[] = [];
      let rows = kinds.flatMap((k) => this.st.ready.all(k, now, limit) as Row[]);
      if (kinds.length > 1) rows = rows.sort((a, b) => Number(a.run_after) - Number(b.run_after) || Number(a.id) - Number(b.id)).slice(0, limit);
      for (const r of rows) {
        const id = Number(r.id);
        if (r.deadline_at !== null && Number(r.deadline_at) < now) {
          this.st.kill.run(DEADLINE_MISSED, now, id);
          this.event(now, 'deadline', id, String(r.rollout_id), null);
          continue;
        }
        const attempt = Number(r.attempt) + 1;
        const token = randomUUID();
        const expiresAt = now + opts.leaseMs;
        this.st.lease.run(attempt, token, opts.worker, expiresAt, now, id);
        this.st.insAttempt.run(id, attempt, token, opts.worker, now);
        out.push({ item: { ...rowToItem(r), status: 'leased', attempt, updatedAt: now }, attempt, token, expiresAt });
      }
      return out;
    });
  }

  async reclaimExpired(): Promise<number> {
    return this.tx.write('reclaiming leases', () => this.reclaimLocked(this.clock()));
  }

  private reclaimLocked(now: number): number {
    const rows = this.st.expired.all(now) as Row[];
    for (const r of rows) this.apply(now, Number(r.id), r, settle(attemptCount(r), { why: 'expired' }, now));
    return rows.length;
  }

  /** Writes the lease rule's settlement for item `id`, whose row `s` was read in this write transaction. */
  private apply(now: number, id: number, s: Row, d: Settlement): void {
    const attempt = Number(s.attempt);
    if (d.attempt === 'drop') this.st.delAttempt.run(id, attempt);
    else this.st.endAttempt.run(d.attempt.outcome, now, d.attempt.error, id, attempt);
    const i = d.item;
    if (i.to === 'queued') this.st.requeue.run(i.runAfter, i.lastError, now, id);
    else if (i.to === 'dead') this.st.kill.run(i.lastError, now, id);
    else this.st.unclaim.run(i.runAfter, now, id);
    for (const e of d.events) this.event(now, e.kind, id, String(s.rollout_id), e.detail);
  }

  async renew(leases: LeaseRef[], leaseMs: number): Promise<RenewResult[]> { return this.renewSync(leases, leaseMs); }
  renewSync(leases: LeaseRef[], leaseMs: number): RenewResult[] {
    return this.tx.write('renewing leases', () => {
      const now = this.clock();
      return leases.map((l): RenewResult => {
        if (this.st.renew.run(now + leaseMs, now, l.itemId, l.token, now).changes === 1) return { itemId: l.itemId, ok: true, expiresAt: now + leaseMs };
        return { itemId: l.itemId, ok: false, reason: this.reject(now, l, 'renew') };
      });
    });
  }

  /** Classifies a rejected token and counts it; called inside a write transaction. */
  private reject(now: number, l: LeaseRef, op: string): RejectReason {
    const s = this.st.leaseState.get(l.itemId) as Row | undefined;
    const reason = rejectReason(s, l);
    if (reason === 'stale') this.event(now, 'stale_rejected', l.itemId, s ? String(s.rollout_id) : null, `${op} with a stale token`);
    return reason;
  }

  /** The lease row when `l` is its live holder, else null. */
  private live(now: number, l: LeaseRef): Row | null {
    const s = this.st.leaseState.get(l.itemId) as Row | undefined;
    return holdsLease(s, l, now) ? s : null;
  }

  async complete(req: CompleteRequest): Promise<CompleteResult> { return this.completeSync(req); }
  completeSync(req: CompleteRequest): CompleteResult {
    return this.tx.write('completing item', () => this.completeLocked(this.clock(), req));
  }
  async completeMany(reqs: CompleteRequest[]): Promise<CompleteResult[]> { return this.completeManySync(reqs); }
  completeManySync(reqs: CompleteRequest[]): CompleteResult[] {
    return this.tx.write('completing items', () => {
      const now = this.clock();
      return reqs.map((r) => this.completeLocked(now, r));
    });
  }

  private completeLocked(now: number, req: CompleteRequest): CompleteResult {
    const s = this.live(now, req);
    if (!s) return { ok: false, reason: this.reject(now, req, 'complete') };
    const attempt = Number(s.attempt);
    const created = this.st.insResult.run(s.idem_key, req.itemId, s.rollout_id, s.stage, s.sample_id, attempt, req.outputRef, now).changes === 1;
    this.st.done.run(now, req.itemId);
    this.st.endAttempt.run('done', now, null, req.itemId, attempt);
    for (const i of req.next ?? []) this.st.insItem.run(...itemValues(i, now));
    if (req.trajectory) this.st.insTraj.run(req.trajectory.rolloutId, req.trajectory.sampleId, req.trajectory.ref, now);
    return { ok: true, resultCreated: created };
  }

  async fail(req: FailRequest): Promise<FailResult> { return this.failSync(req); }
  failSync(req: FailRequest): FailResult {
    return this.tx.write('failing item', (): FailResult => {
      const now = this.clock();
      const s = this.live(now, req);
      if (!s) return { ok: false, reason: this.reject(now, req, 'fail') };
      const d = settle(attemptCount(s), { why: 'failed', error: req.error, retryable: req.retryable }, now);
      this.apply(now, req.itemId, s, d);
      return { ok: true, state: d.item.to === 'dead' ? 'dead' : 'queued' };
    });
  }

  async release(lease: LeaseRef & { started?: boolean; infra?: boolean }, reason: string): Promise<boolean> {
    return this.tx.write('releasing lease', () => {
      const now = this.clock();
      const s = this.live(now, lease);
      if (!s) return false;
      this.apply(now, lease.itemId, s, settle(attemptCount(s), { why: 'released', reason, started: lease.started, infra: lease.infra }, now));
      return true;
    });
  }

  async getItem(id: number): Promise<WorkItem | null> { return this.reads.item(id); }
  async listItems(rolloutId: string, limit = 1000): Promise<WorkItem[]> { return this.reads.items(rolloutId, limit); }
  async results(filter: { rolloutId?: string; sampleId?: string }): Promise<ResultRecord[]> { return this.reads.results(filter); }
  async trajectories(rolloutId: string): Promise<TrajectoryRecord[]> { return this.reads.trajectories(rolloutId); }
  async attemptsOf(itemId: number) { return this.reads.attempts(itemId); }

  async beginInference(reqs: NewInference[]): Promise<void> {
    if (reqs.length === 0) return;
    this.tx.write('recording inference requests', () => {
      const now = this.clock();
      const ins = this.cached(`INSERT INTO inference_requests (idem_key, request_id, rollout_id, request_hash, model, model_version, prompt_version, input_ref, params, status, created_at)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending', ?)
        ON CONFLICT (idem_key) DO UPDATE SET status = 'pending', error = NULL WHERE status IN ('shed', 'failed')`);
      for (const r of reqs) ins.run(r.idempotencyKey, r.requestId, r.rolloutId, r.requestHash, r.model, r.modelVersion, r.promptVersion, r.inputRef, r.params, now);
    });
  }

  async finishInference(outcomes: InferenceOutcome[]): Promise<void> {
    if (outcomes.length === 0) return;
    this.tx.write('recording inference results', () => {
      const now = this.clock();
      // a finished result is never overwritten: the first durable answer per key wins
      const up = this.cached(`UPDATE inference_requests SET status = ?, output_ref = ?, env_version = ?, batch_id = ?, batch_size = ?, upstream_ms = ?, error = ?, completed_at = ?
        WHERE idem_key = ? AND status != 'done'`);
      for (const o of outcomes) up.run(o.status, o.outputRef, o.envVersion, o.batchId, o.batchSize, o.upstreamMs, o.error, now, o.idempotencyKey);
    });
  }

  async getInference(key: string): Promise<InferenceRecord | null> { return this.reads.inference(key); }
  async stats(rolloutId?: string): Promise<LedgerStats> { return this.reads.stats(rolloutId); }
  async attemptTimings(rolloutId?: string): Promise<AttemptTiming[]> { return this.reads.attemptTimings(rolloutId); }
  async check(): Promise<CheckIssue[]> { return this.reads.check(); }
  async blobRefs(): Promise<BlobRef[]> { return this.reads.blobRefs(); }
  prepareWrites(): void { this.tx.prepareWrites(); }

  /** Checkpoints and truncates the WAL (used by `ledger check` and on clean shutdown). */
  checkpoint(): { walFrames: number; checkpointed: number } {
    const r = this.tx.retry('checkpointing', () => this.db.pragma('wal_checkpoint(TRUNCATE)') as { busy: number; log: number; checkpointed: number }[]);
    return { walFrames: r[0]?.log ?? 0, checkpointed: r[0]?.checkpointed ?? 0 };
  }

  async close(): Promise<void> {
    const c = this.checkpointer;
    this.checkpointer = null;
    this.tx.beforeFirstWrite = null;
    this.tx.beforeWrite = null;
    await c?.stop();
    await this.tx.close();
    if (this.db.open) this.db.close();
  }
}
