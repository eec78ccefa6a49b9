/** Read side of the PostgreSQL ledger; mirrors sqlite-reads.ts query for query. */
import type pg from 'pg';
import { percentileIndex, rowToInference, rowToItem, rowToResult, rowToRollout, rowToTiming } from './rows.js';
import type { AttemptTiming, CheckIssue, InferenceRecord, ItemStatus, LedgerStats, ResultRecord, RolloutSummary, TrajectoryRecord, WorkItem } from './types.js';

type Row = Record<string, unknown>;
const STATUSES: ItemStatus[] = ['queued', 'leased', 'done', 'dead', 'canceled'];
const RATE_WINDOW_MS = 10_000;
const R = '($1::text IS NULL OR rollout_id = $1)';

export class PostgresReads {
  constructor(private readonly pool: pg.Pool) {}

  private async all(sql: string, args: unknown[] = []): Promise<Row[]> {
    return (await this.pool.query(sql, args)).rows as Row[];
  }
  private async one(sql: string, args: unknown[] = []): Promise<Row | undefined> {
    return (await this.all(sql, args))[0];
  }

  async manifest(digest: string): Promise<string | null> {
    const r = await this.one('SELECT body FROM manifests WHERE digest = $1', [digest]);
    return r ? String(r.body) : null;
  }
  private async summarize(r: Row): Promise<RolloutSummary> {
    const counts = Object.fromEntries(STATUSES.map((s) => [s, 0])) as Record<ItemStatus, number>;
    for (const c of await this.all('SELECT status, count(*) AS n FROM items WHERE rollout_id = $1 GROUP BY status', [r.id])) counts[c.status as ItemStatus] = Number(c.n);
    const t = await this.one('SELECT count(*) AS n FROM trajectories WHERE rollout_id = $1', [r.id]);
    return { ...rowToRollout(r), counts, trajectories: Number(t?.n ?? 0) };
  }
  async rollout(id: string): Promise<RolloutSummary | null> {
    const r = await this.one('SELECT * FROM rollouts WHERE id = $1', [id]);
    return r ? this.summarize(r) : null;
  }
  async rollouts(): Promise<RolloutSummary[]> {
    return Promise.all((await this.all('SELECT * FROM rollouts ORDER BY created_at, id')).map((r) => this.summarize(r)));
  }
  async item(id: number): Promise<WorkItem | null> {
    const r = await this.one('SELECT * FROM items WHERE id = $1', [id]);
    return r ? rowToItem(r) : null;
  }
  async items(rolloutId: string, limit: number): Promise<WorkItem[]> {
    return (await this.all('SELECT * FROM items WHERE rollout_id = $1 ORDER BY id LIMIT $2', [rolloutId, limit])).map(rowToItem);
  }
  async results(f: { rolloutId?: string; sampleId?: string }): Promise<ResultRecord[]> {
    return (await this.all(`SELECT * FROM results WHERE ${R} AND ($2::text IS NULL OR sample_id = $2) ORDER BY created_at, item_id`, [f.rolloutId ?? null, f.sampleId ?? null])).map(rowToResult);
  }
  async trajectories(rolloutId: string): Promise<TrajectoryRecord[]> {
    return (await this.all('SELECT * FROM trajectories WHERE rollout_id = $1 ORDER BY sample_id', [rolloutId]))
      .map((r) => ({ rolloutId: String(r.rollout_id), sampleId: String(r.sample_id), ref: String(r.ref), createdAt: Number(r.created_at) }));
  }
  async attempts(itemId: number) {
    return (await this.all('SELECT * FROM attempts WHERE item_id = $1 ORDER BY attempt', [itemId])).map((r) => ({
      attempt: Number(r.attempt), worker: String(r.worker), outcome: String(r.outcome), startedAt: Number(r.started_at), endedAt: r.ended_at === null ? null : Number(r.ended_at),
    }));
  }
  async inference(key: string): Promise<InferenceRecord | null> {
    const r = await this.one('SELECT * FROM inference_requests WHERE idem_key = $1', [key]);
    return r ? rowToInference(r) : null;
  }

  async stats(rolloutId: string | undefined, now: number): Promise<LedgerStats> {
    const rid = rolloutId ?? null;
    const counts = Object.fromEntries(STATUSES.map((s) => [s, 0])) as Record<ItemStatus, number>;
    for (const c of await this.all(`SELECT status, count(*) AS n FROM items WHERE ${R} GROUP BY status`, [rid])) counts[c.status as ItemStatus] = Number(c.n);
    const ready = Number((await this.one(`SELECT count(*) AS n FROM items WHERE status = 'queued' AND run_after <= $2 AND ${R}`, [rid, now]))?.n ?? 0);
    const ageAt = async (p: number): Promise<number> => {
      if (ready === 0) return 0;
      const r = await this.one(`SELECT run_after FROM items WHERE status = 'queued' AND run_after <= $2 AND ${R} ORDER BY run_after DESC LIMIT 1 OFFSET $3`, [rid, now, percentileIndex(ready, p)]);
      return r ? now - Number(r.run_after) : 0;
    };
    const att = await this.one(`SELECT coalesce(sum(attempt), 0) AS a, count(*) FILTER (WHERE attempt > 0) AS n FROM items WHERE ${R}`, [rid]);
    const ev: Record<string, number> = {};
    for (const e of await this.all(`SELECT kind, count(*) AS n FROM events WHERE ${R} GROUP BY kind`, [rid])) ev[String(e.kind)] = Number(e.n);
    const results = Number((await this.one(`SELECT count(*) AS n FROM results WHERE ${R}`, [rid]))?.n ?? 0);
    const recent = Number((await this.one(`SELECT count(*) AS n FROM results WHERE created_at > $2 AND ${R}`, [rid, now - RATE_WINDOW_MS]))?.n ?? 0);
    const tr = await this.one(`SELECT coalesce(sum(x.gh), 0) AS gh FROM (
        SELECT r.gpus * ((coalesce(max(t.created_at), $2) - r.created_at) / 3600000.0) AS gh
        FROM rollouts r JOIN trajectories t ON t.rollout_id = r.id WHERE ($1::text IS NULL OR r.id = $1) GROUP BY r.id, r.gpus, r.created_at) x`, [rid, now]);
    const trajectories = Number((await this.one(`SELECT count(*) AS n FROM trajectories WHERE ${R}`, [rid]))?.n ?? 0);
    const gpuHours = Number(tr?.gh ?? 0);
    const inf = await this.one(`SELECT count(*) AS n, count(*) FILTER (WHERE status = 'done') AS d, count(*) FILTER (WHERE status = 'shed') AS s,
      avg(batch_size) FILTER (WHERE status = 'done') AS b FROM inference_requests WHERE ${R}`, [rid]);
    const attempts = Number(att?.a ?? 0);
    const attempted = Number(att?.n ?? 0);
    return {
      now, queueDepth: counts.queued, leased: counts.leased, done: counts.done, dead: counts.dead, canceled: counts.canceled,
      queueAgeP50Ms: await ageAt(0.5), queueAgeP99Ms: await ageAt(0.99), attempts, itemsAttempted: attempted,
      retryRate: attempts === 0 ? 0 : (attempts - attempted) / attempts,
      leaseExpiries: ev.lease_expired ?? 0, staleRejections: ev.stale_rejected ?? 0,
      results, resultsPerSec: recent / (RATE_WINDOW_MS / 1000), trajectories,
      trajectoriesPerGpuHour: gpuHours > 0 ? trajectories / gpuHours : null,
      inference: { requests: Number(inf?.n ?? 0), done: Number(inf?.d ?? 0), shed: Number(inf?.s ?? 0), meanBatchSize: inf?.b === null || inf?.b === undefined ? null : Number(inf.b) },
    };
  }

  async attemptTimings(rolloutId?: string): Promise<AttemptTiming[]> {
    return (await this.all(`SELECT i.stage, i.stage_index, i.kind, a.outcome, a.started_at, a.ended_at FROM attempts a JOIN items i ON i.id = a.item_id
      WHERE ($1::text IS NULL OR i.rollout_id = $1) ORDER BY a.started_at, a.item_id, a.attempt`, [rolloutId ?? null])).map(rowToTiming);
  }

  async check(): Promise<CheckIssue[]> {
    const issues: CheckIssue[] = [];
    const q = async (check: string, sql: string, fmt: (r: Row) => string) => {
      for (const r of await this.all(sql)) issues.push({ check, detail: fmt(r) });
    };
    await q('leased items hold a token and expiry', `SELECT id FROM items WHERE status = 'leased' AND (lease_token IS NULL OR lease_expires_at IS NULL) LIMIT 100`, (r) => `item ${String(r.id)}`);
    await q('executions within max_attempts', `SELECT id, attempt, max_attempts FROM items WHERE attempt > max_attempts LIMIT 100`, (r) => `item ${String(r.id)}: attempt ${String(r.attempt)} of ${String(r.max_attempts)}`);
    await q('done items have exactly their result', `SELECT i.id FROM items i LEFT JOIN results r ON r.idem_key = i.idem_key WHERE i.status = 'done' AND r.idem_key IS NULL LIMIT 100`, (r) => `item ${String(r.id)} is done without a result`);
    await q('results belong to done items', `SELECT r.idem_key FROM results r JOIN items i ON i.idem_key = r.idem_key WHERE i.status != 'done' LIMIT 100`, (r) => `result ${String(r.idem_key)}`);
    await q('one running attempt per leased item', `SELECT item_id, count(*) AS n FROM attempts WHERE outcome = 'running' GROUP BY item_id HAVING count(*) > 1 LIMIT 100`, (r) => `item ${String(r.item_id)} has ${String(r.n)} running attempts`);
    await q('attempt rows match attempt counters', `SELECT i.id FROM items i JOIN attempts a ON a.item_id = i.id GROUP BY i.id HAVING max(a.attempt) != max(i.attempt) LIMIT 100`, (r) => `item ${String(r.id)}`);
    await q('dead items say why', `SELECT id FROM items WHERE status = 'dead' AND last_error IS NULL LIMIT 100`, (r) => `item ${String(r.id)}`);
    return issues;
  }
}
