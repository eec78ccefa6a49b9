/**
 * The PostgreSQL ledger: the same contract as SQLite for workers on many hosts. Claims use
 * FOR UPDATE SKIP LOCKED so concurrent claimers never wait on each other; the clock is the server's.
 */
import pg from 'pg';
import { LedgerVersionError } from './errors.js';
import { ExitCode, LedgerError } from '../errors/index.js';
import { postgresMigrations } from './postgres-migrations.js';
import { PostgresReads } from './postgres-reads.js';
import { inTransaction } from './pg-tx.js';
import { attemptCount, DEADLINE_MISSED, holdsLease, rejectReason, settle, type Settlement } from './lease-rule.js';
import { PG_CONNECT_TIMEOUT_MS, PG_INSERT_CHUNK, PG_POOL_MAX, PG_TX_RETRIES, RECLAIM_BATCH } from './limits.js';
import { ITEM_COLUMNS, itemValues, rowToItem } from './rows.js';
import type {
  AttemptTiming, BlobRef, CheckIssue, Claim, ClaimOptions, CompleteRequest, CompleteResult, EventKind, FailRequest, FailResult, InferenceOutcome,
  InferenceRecord, Ledger, LeaseRef, LedgerStats, NewInference, NewItem, RejectReason, RenewResult, ResultRecord, RolloutRecord,
  RolloutSummary, TrajectoryRecord, WorkItem,
} from './types.js';

type Client = pg.PoolClient;

const NETWORK_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE']);
/** The server could not be reached or never answered: transient, unlike a refused password or a bad schema. */
function unreachable(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return NETWORK_CODES.has(e.code ?? '') || /timeout|Connection terminated/i.test(e.message ?? '');
}
function msFromEnv(name: string, fallback: number): number {
  const v = Number(process.env[name]);
  return Number.isInteger(v) && v > 0 ? v : fallback;
}
type Row = Record<string, unknown>;

export class PostgresLedger implements Ledger {
  readonly backend = 'postgres' as const;
  private readonly reads: PostgresReads;

  private constructor(readonly pool: pg.Pool) {
    this.reads = new PostgresReads(pool);
  }

  static async connect(opts: { url: string; max?: number }): Promise<PostgresLedger> {
    const pool = new pg.Pool({
      connectionString: opts.url, max: opts.max ?? PG_POOL_MAX,
      connectionTimeoutMillis: msFromEnv('SMOL_PG_CONNECT_TIMEOUT_MS', PG_CONNECT_TIMEOUT_MS),
      // A peer that vanishes mid-statement without a FIN is noticed by TCP keepalive rather than never. No
      // client-side query_timeout: pg arms it on COPY streams too, which never clear it, so every blob read
      // would end in a late 'Query read timeout' error and hold the process open until it fired.
      keepAlive: true, keepAliveInitialDelayMillis: 5_000,
    });
    pool.on('error', () => { /* idle client errors surface on the next query */ });
    // pg-pool drops its own listener while a client is checked out, so a server restart (57P01) or a reset
    // between two statements of a transaction would be an unhandled 'error' that kills the worker; the
    // failed statement already rejects, and the pool discards the broken client when it is released
    pool.on('connect', (c) => { c.on('error', () => undefined); });
    const l = new PostgresLedger(pool);
    try {
      await l.migrate();
    } catch (err) {
      await pool.end();
      if (err instanceof LedgerError) throw err;
      const where = opts.url.replace(/:[^:@/]*@/, ':***@');
      if (unreachable(err)) {
        throw new LedgerError(`opening ledger failed: cannot reach PostgreSQL (${(err as Error).message})`,
          { cause: err, where, hint: 'Check the host and port in the ledger URL and that the server is up; retrying may work.' }, ExitCode.tempFail);
      }
      throw new LedgerError(`opening ledger failed: ${(err as Error).message}`, { cause: err, where });
    }
    return l;
  }

  private async migrate(): Promise<void> {
    await this.tx(async (c) => {
      await c.query('SELECT pg_advisory_xact_lock(7263541)'); // one migrator at a time
      await c.query('CREATE TABLE IF NOT EXISTS smol_schema (version INTEGER PRIMARY KEY)');
      const have = Number((await c.query('SELECT coalesce(max(version), 0) AS v FROM smol_schema')).rows[0].v);
      if (have > postgresMigrations.length) throw new LedgerVersionError(`ledger schema version ${have} is newer than this smol understands`, { hint: 'Upgrade smol.' });
      for (let v = have; v < postgresMigrations.length; v++) {
        await c.query(postgresMigrations[v]);
        await c.query('INSERT INTO smol_schema (version) VALUES ($1)', [v + 1]);
      }
    });
  }

  private tx<T>(fn: (c: Client) => Promise<T>): Promise<T> {
    return inTransaction(this.pool, fn, PG_TX_RETRIES);
  }

  private async clock(c: Client | pg.Pool): Promise<number> {
    return Number((await c.query('SELECT smol_now_ms() AS t')).rows[0].t);
  }
  async now(): Promise<number> { return this.clock(this.pool); }

  private async event(c: Client, now: number, kind: EventKind, itemId: number | null, rolloutId: string | null, detail: string | null): Promise<void> {
    await c.query('INSERT INTO events (at, kind, item_id, rollout_id, detail) VALUES ($1, $2, $3, $4, $5)', [now, kind, itemId, rolloutId, detail]);
  }

  private async insertItems(c: Client, items: NewItem[], now: number): Promise<number> {
    let n = 0;
    // multi-row VALUES in chunks: one round trip per chunk
    for (let i = 0; i < items.length; i += PG_INSERT_CHUNK) {
      const chunk = items.slice(i, i + PG_INSERT_CHUNK);
      const params: unknown[] = [];
      const rows = chunk.map((it) => {
        const vals = itemValues(it, now);
        const base = params.length;
        params.push(...vals);
        return `(${vals.map((_, k) => `$${base + k + 1}`).join(',')})`;
      });
      const r = await c.query(`INSERT INTO items (${ITEM_COLUMNS.join(',')}) VALUES ${rows.join(',')} ON CONFLICT (idem_key) DO NOTHING`, params);
      n += r.rowCount ?? 0;
    }
    return n;
  }

  async putManifest(digest: string, body: string): Promise<void> {
    await this.pool.query('INSERT INTO manifests (digest, body, created_at) VALUES ($1, $2, smol_now_ms()) ON CONFLICT DO NOTHING', [digest, body]);
  }
  async getManifest(digest: string): Promise<string | null> { return this.reads.manifest(digest); }

  async createRollout(r: Omit<RolloutRecord, 'status' | 'createdAt' | 'canceledAt'>, items: NewItem[]): Promise<{ created: boolean }> {
    return this.tx(async (c) => {
      const now = await this.clock(c);
      const ins = await c.query('INSERT INTO rollouts (id, name, manifest_digest, env_version, gpus, created_at) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING',
        [r.id, r.name, r.manifestDigest, r.envVersion, r.gpus, now]);
      if (ins.rowCount === 0) return { created: false };
      await this.insertItems(c, items, now);
      return { created: true };
    });
  }
  async getRollout(id: string): Promise<RolloutSummary | null> { return this.reads.rollout(id); }
  async listRollouts(): Promise<RolloutSummary[]> { return this.reads.rollouts(); }

  async cancelRollout(id: string): Promise<{ canceled: number }> {
    return this.tx(async (c) => {
      const now = await this.clock(c);
      await c.query(`UPDATE rollouts SET status = 'canceled', canceled_at = coalesce(canceled_at, $1) WHERE id = $2`, [now, id]);
      const r = await c.query(`UPDATE items SET status = 'canceled', updated_at = $1 WHERE rollout_id = $2 AND status IN ('queued', 'leased')`, [now, id]);
      await this.event(c, now, 'canceled', null, id, `${r.rowCount} items`);
      return { canceled: r.rowCount ?? 0 };
    });
  }

  async enqueue(items: NewItem[]): Promise<number> {
    return this.tx(async (c) => this.insertItems(c, items, await this.clock(c)));
  }

  async claim(opts: ClaimOptions): Promise<Claim[]> {
    const kinds = opts.kind ? [opts.kind] : ['cpu', 'gpu'];
    return this.tx(async (c) => {
      const now = await this.clock(c);
      await this.reclaimLocked(c, now);
      const late = await c.query(`UPDATE items SET status = 'dead', last_error = $3, updated_at = $1
        WHERE id IN (SELECT id FROM items WHERE status = 'queued' AND kind = ANY($2) AND deadline_at < $1 LIMIT ${RECLAIM_BATCH} FOR UPDATE SKIP LOCKED) RETURNING id, rollout_id`, [now, kinds, DEADLINE_MISSED]);
      for (const r of late.rows) await this.event(c, now, 'deadline', Number(r.id), String(r.rollout_id), null);
      // one kind per statement: an equality on kind lets the index deliver rows in run_after order
      const rows: Row[] = [];
      for (const kind of kinds) {
        const want = (opts.limit ?? 1) - rows.length;
        if (want <= 0) break;
        const res = await c.query(`WITH c AS (SELECT id FROM items WHERE status = 'queued' AND kind = $1 AND run_after <= $2 ORDER BY run_after, id LIMIT $3 FOR UPDATE SKIP LOCKED)
          UPDATE items i SET status = 'leased', attempt = i.attempt + 1, lease_token = gen_random_uuid()::text, lease_owner = $4,
            lease_expires_at = $2::bigint + $5::bigint, updated_at = $2 FROM c WHERE i.id = c.id RETURNING i.*`, [kind, now, want, opts.worker, opts.leaseMs]);
        rows.push(...(res.rows as Row[]));
      }
      if (rows.length === 0) return [];
      await c.query(`INSERT INTO attempts (item_id, attempt, token, worker, started_at, outcome)
        SELECT id, att, tok, $4, $5, 'running' FROM unnest($1::bigint[], $2::int[], $3::text[]) AS u(id, att, tok)`,
      [rows.map((r) => r.id), rows.map((r) => r.attempt), rows.map((r) => r.lease_token), opts.worker, now]);
      return rows.map((r) => ({ item: rowToItem(r), attempt: Number(r.attempt), token: String(r.lease_token), expiresAt: Number(r.lease_expires_at) }));
    });
  }

  async reclaimExpired(): Promise<number> {
    return this.tx(async (c) => this.reclaimLocked(c, await this.clock(c)));
  }

  private async reclaimLocked(c: Client, now: number): Promise<number> {
    const rows = (await c.query(`SELECT id, attempt, max_attempts, backoff_ms, rollout_id FROM items WHERE status = 'leased' AND lease_expires_at < $1 LIMIT ${RECLAIM_BATCH} FOR UPDATE SKIP LOCKED`, [now])).rows as Row[];
    for (const r of rows) await this.apply(c, now, Number(r.id), r, settle(attemptCount(r), { why: 'expired' }, now));
    return rows.length;
  }

  /** Writes the lease rule's settlement for item `id`, whose row `s` this transaction holds locked. */
  private async apply(c: Client, now: number, id: number, s: Row, d: Settlement): Promise<void> {
    const attempt = Number(s.attempt);
    if (d.attempt === 'drop') await c.query('DELETE FROM attempts WHERE item_id = $1 AND attempt = $2', [id, attempt]);
    else await c.query('UPDATE attempts SET outcome = $1, ended_at = $2, error = $3 WHERE item_id = $4 AND attempt = $5', [d.attempt.outcome, now, d.attempt.error, id, attempt]);
    const free = 'lease_token = NULL, lease_owner = NULL, lease_expires_at = NULL';
    const i = d.item;
    if (i.to === 'queued') await c.query(`UPDATE items SET status = 'queued', run_after = $1, last_error = $2, ${free}, updated_at = $3 WHERE id = $4`, [i.runAfter, i.lastError, now, id]);
    else if (i.to === 'dead') await c.query(`UPDATE items SET status = 'dead', last_error = $1, ${free}, updated_at = $2 WHERE id = $3`, [i.lastError, now, id]);
    else await c.query(`UPDATE items SET status = 'queued', attempt = attempt - 1, run_after = $1, ${free}, updated_at = $2 WHERE id = $3`, [i.runAfter, now, id]);
    for (const e of d.events) await this.event(c, now, e.kind, id, String(s.rollout_id), e.detail);
  }

  async renew(leases: LeaseRef[], leaseMs: number): Promise<RenewResult[]> {
    return this.tx(async (c) => {
      const now = await this.clock(c);
      const ok = await c.query(`UPDATE items i SET lease_expires_at = $1::bigint + $2::bigint, updated_at = $1 FROM unnest($3::bigint[], $4::text[]) AS u(id, tok)
        WHERE i.id = u.id AND i.lease_token = u.tok AND i.status = 'leased' AND i.lease_expires_at >= $1 RETURNING i.id`,
      [now, leaseMs, leases.map((l) => l.itemId), leases.map((l) => l.token)]);
      const renewed = new Set(ok.rows.map((r) => Number(r.id)));
      const out: RenewResult[] = [];
      for (const l of leases) {
        out.push(renewed.has(l.itemId) ? { itemId: l.itemId, ok: true, expiresAt: now + leaseMs } : { itemId: l.itemId, ok: false, reason: await this.reject(c, now, l, 'renew') });
      }
      return out;
    });
  }

  private async reject(c: Client, now: number, l: LeaseRef, op: string): Promise<RejectReason> {
    const s = (await c.query('SELECT status, lease_token, rollout_id FROM items WHERE id = $1', [l.itemId])).rows[0] as Row | undefined;
    const reason = rejectReason(s, l);
    if (reason === 'stale') await this.event(c, now, 'stale_rejected', l.itemId, s ? String(s.rollout_id) : null, `${op} with a stale token`);
    return reason;
  }

  private async live(c: Client, now: number, l: LeaseRef): Promise<Row | null> {
    const s = (await c.query('SELECT * FROM items WHERE id = $1 FOR UPDATE', [l.itemId])).rows[0] as Row | undefined;
    return holdsLease(s, l, now) ? s : null;
  }

  async complete(req: CompleteRequest): Promise<CompleteResult> {
    return this.tx(async (c) => this.completeLocked(c, await this.clock(c), req));
  }
  async completeMany(reqs: CompleteRequest[]): Promise<CompleteResult[]> {
    return this.tx(async (c) => {
      const now = await this.clock(c);
      const out: CompleteResult[] = [];
      for (const r of reqs) out.push(await this.completeLocked(c, now, r));
      return out;
    });
  }

  private async completeLocked(c: Client, now: number, req: CompleteRequest): Promise<CompleteResult> {
    const s = await this.live(c, now, req);
    if (!s) return { ok: false, reason: await this.reject(c, now, req, 'complete') };
    const attempt = Number(s.attempt);
    const ins = await c.query(`INSERT INTO results (idem_key, item_id, rollout_id, stage, sample_id, attempt, output_ref, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING`,
      [s.idem_key, req.itemId, s.rollout_id, s.stage, s.sample_id, attempt, req.outputRef, now]);
    await c.query(`UPDATE items SET status = 'done', lease_expires_at = NULL, updated_at = $1 WHERE id = $2`, [now, req.itemId]);
    await c.query(`UPDATE attempts SET outcome = 'done', ended_at = $1 WHERE item_id = $2 AND attempt = $3`, [now, req.itemId, attempt]);
    if (req.next?.length) await this.insertItems(c, req.next, now);
    if (req.trajectory) {
      await c.query('INSERT INTO trajectories (rollout_id, sample_id, ref, created_at) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING',
        [req.trajectory.rolloutId, req.trajectory.sampleId, req.trajectory.ref, now]);
    }
    return { ok: true, resultCreated: ins.rowCount === 1 };
  }

  async fail(req: FailRequest): Promise<FailResult> {
    return this.tx(async (c): Promise<FailResult> => {
      const now = await this.clock(c);
      const s = await this.live(c, now, req);
      if (!s) return { ok: false, reason: await this.reject(c, now, req, 'fail') };
      const d = settle(attemptCount(s), { why: 'failed', error: req.error, retryable: req.retryable }, now);
      await this.apply(c, now, req.itemId, s, d);
      return { ok: true, state: d.item.to === 'dead' ? 'dead' : 'queued' };
    });
  }

  async release(lease: LeaseRef & { started?: boolean; infra?: boolean }, reason: string): Promise<boolean> {
    return this.tx(async (c) => {
      const now = await this.clock(c);
      const s = await this.live(c, now, lease);
      if (!s) return false;
      await this.apply(c, now, lease.itemId, s, settle(attemptCount(s), { why: 'released', reason, started: lease.started, infra: lease.infra }, now));
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
    await this.tx(async (c) => {
      const now = await this.clock(c);
      for (const r of reqs) {
        await c.query(`INSERT INTO inference_requests (idem_key, request_id, rollout_id, request_hash, model, model_version, prompt_version, input_ref, params, status, created_at)
          VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending', $10)
          ON CONFLICT (idem_key) DO UPDATE SET status = 'pending', error = NULL WHERE inference_requests.status IN ('shed', 'failed')`,
        [r.idempotencyKey, r.requestId, r.rolloutId, r.requestHash, r.model, r.modelVersion, r.promptVersion, r.inputRef, r.params, now]);
      }
    });
  }

  async finishInference(outcomes: InferenceOutcome[]): Promise<void> {
    if (outcomes.length === 0) return;
    await this.tx(async (c) => {
      const now = await this.clock(c);
      for (const o of outcomes) {
        await c.query(`UPDATE inference_requests SET status = $1, output_ref = $2, env_version = $3, batch_id = $4, batch_size = $5, upstream_ms = $6, error = $7, completed_at = $8
          WHERE idem_key = $9 AND status != 'done'`, [o.status, o.outputRef, o.envVersion, o.batchId, o.batchSize, o.upstreamMs, o.error, now, o.idempotencyKey]);
      }
    });
  }

  async getInference(key: string): Promise<InferenceRecord | null> { return this.reads.inference(key); }
  async stats(rolloutId?: string): Promise<LedgerStats> { return this.reads.stats(rolloutId, await this.now()); }
  async attemptTimings(rolloutId?: string): Promise<AttemptTiming[]> { return this.reads.attemptTimings(rolloutId); }
  async check(): Promise<CheckIssue[]> { return this.reads.check(); }
  async blobRefs(): Promise<BlobRef[]> { return this.reads.blobRefs(); }
  prepareWrites(): void {}
  async close(): Promise<void> { await this.pool.end(); }
}
