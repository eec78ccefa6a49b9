/**
 * Read side of the SQLite ledger. Reads run as short single statements, never one long transaction: a
 * reader that holds a snapshot stops checkpoints from recycling the WAL, which then grows without bound.
 */
import type Database from 'better-sqlite3';
import type { TxRunner } from './sqlite-tx.js';
import { percentileIndex, rowToInference, rowToItem, rowToResult, rowToRollout, rowToTiming } from './rows.js';
import type { AttemptTiming, CheckIssue, InferenceRecord, ItemStatus, LedgerStats, ResultRecord, RolloutSummary, TrajectoryRecord, WorkItem } from './types.js';

type Row = Record<string, unknown>;
const STATUSES: ItemStatus[] = ['queued', 'leased', 'done', 'dead', 'canceled'];
const RATE_WINDOW_MS = 10_000;

export class SqliteReads {
  constructor(private readonly db: Database.Database, private readonly tx: TxRunner, private readonly clock: () => number) {}

  private readonly prepared = new Map<string, Database.Statement>();
  private stmt(sql: string): Database.Statement {
    let s = this.prepared.get(sql);
    if (!s) this.prepared.set(sql, (s = this.db.prepare(sql)));
    return s;
  }
  private all(sql: string, ...args: unknown[]): Row[] {
    return this.tx.retry('reading ledger', () => this.stmt(sql).all(...args) as Row[]);
  }
  private get(sql: string, ...args: unknown[]): Row | undefined {
    return this.tx.retry('reading ledger', () => this.stmt(sql).get(...args) as Row | undefined);
  }

  manifest(digest: string): string | null {
    const r = this.get('SELECT body FROM manifests WHERE digest = ?', digest);
    return r ? String(r.body) : null;
  }

  private summarize(r: Row): RolloutSummary {
    const counts = Object.fromEntries(STATUSES.map((s) => [s, 0])) as Record<ItemStatus, number>;
    for (const c of this.all('SELECT status, count(*) AS n FROM items WHERE rollout_id = ? GROUP BY status', r.id)) counts[c.status as ItemStatus] = Number(c.n);
    const t = this.get('SELECT count(*) AS n FROM trajectories WHERE rollout_id = ?', r.id);
    return { ...rowToRollout(r), counts, trajectories: Number(t?.n ?? 0) };
  }

  rollout(id: string): RolloutSummary | null {
    const r = this.get('SELECT * FROM rollouts WHERE id = ?', id);
    return r ? this.summarize(r) : null;
  }
  rollouts(): RolloutSummary[] {
    return this.all('SELECT * FROM rollouts ORDER BY created_at, id').map((r) => this.summarize(r));
  }
  item(id: number): WorkItem | null {
    const r = this.get('SELECT * FROM items WHERE id = ?', id);
    return r ? rowToItem(r) : null;
  }
  items(rolloutId: string, limit: number): WorkItem[] {
    return this.all('SELECT * FROM items WHERE rollout_id = ? ORDER BY id LIMIT ?', rolloutId, limit).map(rowToItem);
  }
  results(f: { rolloutId?: string; sampleId?: string }): ResultRecord[] {
    return this.all(`SELECT * FROM results WHERE (@rid IS NULL OR rollout_id = @rid) AND (@sid IS NULL OR sample_id = @sid) ORDER BY created_at, item_id`, { rid: f.rolloutId ?? null, sid: f.sampleId ?? null }).map(rowToResult);
  }
  trajectories(rolloutId: string): TrajectoryRecord[] {
    return this.all('SELECT * FROM trajectories WHERE rollout_id = ? ORDER BY sample_id', rolloutId)
      .map((r) => ({ rolloutId: String(r.rollout_id), sampleId: String(r.sample_id), ref: String(r.ref), createdAt: Number(r.created_at) }));
  }
  attempts(itemId: number) {
    return this.all('SELECT * FROM attempts WHERE item_id = ? ORDER BY attempt', itemId).map((r) => ({
      attempt: Number(r.attempt), worker: String(r.worker), outcome: String(r.outcome), startedAt: Number(r.started_at), endedAt: r.ended_at === null ? null : Number(r.ended_at),
    }));
  }
  inference(key: string): InferenceRecord | null {
    const r = this.get('SELECT * FROM inference_requests WHERE idem_key = ?', key);
    return r ? rowToInference(r) : null;
  }

  stats(rolloutId?: string): LedgerStats {
    const now = this.clock();
    const rid = rolloutId ?? null;
    const counts = Object.fromEntries(STATUSES.map((s) => [s, 0])) as Record<ItemStatus, number>;
    for (const c of this.all('SELECT status, count(*) AS n FROM items WHERE (@rid IS NULL OR rollout_id = @rid) GROUP BY status', { rid })) counts[c.status as ItemStatus] = Number(c.n);
    const ready = Number(this.get(`SELECT count(*) AS n FROM items WHERE status = 'queued' AND run_after <= @now AND (@rid IS NULL OR rollout_id = @rid)`, { rid, now })?.n ?? 0);
    const ageAt = (p: number): number => {
      if (ready === 0) return 0;
      const r = this.get(`SELECT run_after FROM items WHERE status = 'queued' AND run_after <= @now AND (@rid IS NULL OR rollout_id = @rid) ORDER BY run_after DESC LIMIT 1 OFFSET @off`, { rid, now, off: percentileIndex(ready, p) });
      return r ? now - Number(r.run_after) : 0;
    };
    const att = this.get('SELECT coalesce(sum(attempt), 0) AS a, coalesce(sum(attempt > 0), 0) AS n FROM items WHERE (@rid IS NULL OR rollout_id = @rid)', { rid });
    const ev: Record<string, number> = {};
    for (const e of this.all('SELECT kind, count(*) AS n FROM events WHERE (@rid IS NULL OR rollout_id = @rid) GROUP BY kind', { rid })) ev[String(e.kind)] = Number(e.n);
    const results = Number(this.get('SELECT count(*) AS n FROM results WHERE (@rid IS NULL OR rollout_id = @rid)', { rid })?.n ?? 0);
    const recent = Number(this.get('SELECT count(*) AS n FROM results WHERE created_at > @now AND (@rid IS NULL OR rollout_id = @rid)', { rid, now: now - RATE_WINDOW_MS })?.n ?? 0);
    // GPU-hours: each rollout's GPUs times the span from its creation to its last trajectory (or now while running)
    const tr = this.get(`SELECT count(*) AS n, coalesce(sum(x.gh), 0) AS gh FROM (
        SELECT r.gpus * ((coalesce(max(t.created_at), @now) - r.created_at) / 3600000.0) AS gh, count(t.sample_id) AS c
        FROM rollouts r JOIN trajectories t ON t.rollout_id = r.id WHERE (@rid IS NULL OR r.id = @rid) GROUP BY r.id) x`, { rid, now });
    const trajectories = Number(this.get('SELECT count(*) AS n FROM trajectories WHERE (@rid IS NULL OR rollout_id = @rid)', { rid })?.n ?? 0);
    const gpuHours = Number(tr?.gh ?? 0);
    const inf = this.get(`SELECT count(*) AS n, coalesce(sum(status = 'done'), 0) AS d, coalesce(sum(status = 'shed'), 0) AS s, avg(CASE WHEN status = 'done' THEN batch_size END) AS b
      FROM inference_requests WHERE (@rid IS NULL OR rollout_id = @rid)`, { rid });
    const attempts = Number(att?.a ?? 0);
    const attempted = Number(att?.n ?? 0);
    return {
      now, queueDepth: counts.queued, leased: counts.leased, done: counts.done, dead: counts.dead, canceled: counts.canceled,
      queueAgeP50Ms: ageAt(0.5), queueAgeP99Ms: ageAt(0.99), attempts, itemsAttempted: attempted,
      retryRate: attempts === 0 ? 0 : (attempts - attempted) / attempts,
      leaseExpiries: ev.lease_expired ?? 0, staleRejections: ev.stale_rejected ?? 0,
      results, resultsPerSec: recent / (RATE_WINDOW_MS / 1000), trajectories,
      trajectoriesPerGpuHour: gpuHours > 0 ? trajectories / gpuHours : null,
      inference: { requests: Number(inf?.n ?? 0), done: Number(inf?.d ?? 0), shed: Number(inf?.s ?? 0), meanBatchSize: inf?.b === null || inf?.b === undefined ? null : Number(inf.b) },
    };
  }

  attemptTimings(rolloutId?: string): AttemptTiming[] {
    return this.all(`SELECT i.stage, i.stage_index, i.kind, a.outcome, a.started_at, a.ended_at FROM attempts a JOIN items i ON i.id = a.item_id
      WHERE (@rid IS NULL OR i.rollout_id = @rid) ORDER BY a.started_at, a.item_id, a.attempt`, { rid: rolloutId ?? null }).map(rowToTiming);
  }

  check(): CheckIssue[] {
    const issues: CheckIssue[] = [];
    const integrity = this.all('PRAGMA quick_check').map((r) => String(Object.values(r)[0]));
    if (integrity.join() !== 'ok') for (const m of integrity) issues.push({ check: 'sqlite quick_check', detail: m });
    for (const r of this.all('PRAGMA foreign_key_check')) issues.push({ check: 'foreign keys', detail: `${String(r.table)} row ${String(r.rowid)} → ${String(r.parent)}` });
    const q = (check: string, sql: string, fmt: (r: Row) => string) => {
      for (const r of this.all(sql)) issues.push({ check, detail: fmt(r) });
    };
    q('leased items hold a token and expiry', `SELECT id FROM items WHERE status = 'leased' AND (lease_token IS NULL OR lease_expires_at IS NULL) LIMIT 100`, (r) => `item ${String(r.id)}`);
    q('executions within max_attempts', `SELECT id, attempt, max_attempts FROM items WHERE attempt > max_attempts LIMIT 100`, (r) => `item ${String(r.id)}: attempt ${String(r.attempt)} of ${String(r.max_attempts)}`);
    q('done items have exactly their result', `SELECT i.id FROM items i LEFT JOIN results r ON r.idem_key = i.idem_key WHERE i.status = 'done' AND r.idem_key IS NULL LIMIT 100`, (r) => `item ${String(r.id)} is done without a result`);
    q('results belong to done items', `SELECT r.idem_key FROM results r JOIN items i ON i.idem_key = r.idem_key WHERE i.status != 'done' LIMIT 100`, (r) => `result ${String(r.idem_key)}`);
    q('one running attempt per leased item', `SELECT item_id, count(*) AS n FROM attempts WHERE outcome = 'running' GROUP BY item_id HAVING n > 1 LIMIT 100`, (r) => `item ${String(r.item_id)} has ${String(r.n)} running attempts`);
    q('attempt rows match attempt counters', `SELECT i.id FROM items i JOIN attempts a ON a.item_id = i.id GROUP BY i.id HAVING max(a.attempt) != max(i.attempt) LIMIT 100`, (r) => `item ${String(r.id)}`);
    q('dead items say why', `SELECT id FROM items WHERE status = 'dead' AND last_error IS NULL LIMIT 100`, (r) => `item ${String(r.id)}`);
    return issues;
  }
}
