/** Read side of the PostgreSQL ledger; mirrors sqlite-reads.ts query for query. */
import type pg from 'pg';
import { BLOB_REFS_SQL, INVARIANTS } from './invariants.js';
import { RATE_WINDOW_MS } from './limits.js';
import { percentileIndex, rowToAttempt, rowToInference, rowToItem, rowToResult, rowToRollout, rowToTiming, rowToTrajectory } from './rows.js';
import { countsByStatus, statsFrom } from './stats.js';
import type { AttemptTiming, BlobRef, CheckIssue, InferenceRecord, LedgerStats, ResultRecord, RolloutSummary, TrajectoryRecord, WorkItem } from './types.js';

type Row = Record<string, unknown>;
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
    const counts = countsByStatus(await this.all('SELECT status, count(*) AS n FROM items WHERE rollout_id = $1 GROUP BY status', [r.id]));
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
    return (await this.all('SELECT * FROM trajectories WHERE rollout_id = $1 ORDER BY sample_id', [rolloutId])).map(rowToTrajectory);
  }
  async attempts(itemId: number) {
    return (await this.all('SELECT * FROM attempts WHERE item_id = $1 ORDER BY attempt', [itemId])).map(rowToAttempt);
  }
  async inference(key: string): Promise<InferenceRecord | null> {
    const r = await this.one('SELECT * FROM inference_requests WHERE idem_key = $1', [key]);
    return r ? rowToInference(r) : null;
  }

  async stats(rolloutId: string | undefined, now: number): Promise<LedgerStats> {
    const rid = rolloutId ?? null;
    const counts = countsByStatus(await this.all(`SELECT status, count(*) AS n FROM items WHERE ${R} GROUP BY status`, [rid]));
    const ready = Number((await this.one(`SELECT count(*) AS n FROM items WHERE status = 'queued' AND run_after <= $2 AND ${R}`, [rid, now]))?.n ?? 0);
    const ageAt = async (p: number): Promise<number> => {
      if (ready === 0) return 0;
      const r = await this.one(`SELECT run_after FROM items WHERE status = 'queued' AND run_after <= $2 AND ${R} ORDER BY run_after DESC LIMIT 1 OFFSET $3`, [rid, now, percentileIndex(ready, p)]);
      return r ? now - Number(r.run_after) : 0;
    };
    const attempts = await this.one(`SELECT coalesce(sum(attempt), 0) AS a, count(*) FILTER (WHERE attempt > 0) AS n FROM items WHERE ${R}`, [rid]);
    const events = await this.all(`SELECT kind, count(*) AS n FROM events WHERE ${R} GROUP BY kind`, [rid]);
    const results = Number((await this.one(`SELECT count(*) AS n FROM results WHERE ${R}`, [rid]))?.n ?? 0);
    const recentResults = Number((await this.one(`SELECT count(*) AS n FROM results WHERE created_at > $2 AND ${R}`, [rid, now - RATE_WINDOW_MS]))?.n ?? 0);
    const tr = await this.one(`SELECT coalesce(sum(x.gh), 0) AS gh FROM (
        SELECT r.gpus * ((coalesce(max(t.created_at), $2) - r.created_at) / 3600000.0) AS gh
        FROM rollouts r JOIN trajectories t ON t.rollout_id = r.id WHERE ($1::text IS NULL OR r.id = $1) GROUP BY r.id, r.gpus, r.created_at) x`, [rid, now]);
    const trajectories = Number((await this.one(`SELECT count(*) AS n FROM trajectories WHERE ${R}`, [rid]))?.n ?? 0);
    const gpuHours = Number(tr?.gh ?? 0);
    const inference = await this.one(`SELECT count(*) AS n, count(*) FILTER (WHERE status = 'done') AS d, count(*) FILTER (WHERE status = 'shed') AS s,
      avg(batch_size) FILTER (WHERE status = 'done') AS b FROM inference_requests WHERE ${R}`, [rid]);
    const queueAgeP50Ms = await ageAt(0.5);
    const queueAgeP99Ms = await ageAt(0.99);
    return statsFrom({ now, counts, attempts, events, results, recentResults, trajectories, gpuHours, inference, queueAgeP50Ms, queueAgeP99Ms });
  }

  async attemptTimings(rolloutId?: string): Promise<AttemptTiming[]> {
    return (await this.all(`SELECT i.stage, i.stage_index, i.kind, a.outcome, a.started_at, a.ended_at FROM attempts a JOIN items i ON i.id = a.item_id
      WHERE ($1::text IS NULL OR i.rollout_id = $1) ORDER BY a.started_at, a.item_id, a.attempt`, [rolloutId ?? null])).map(rowToTiming);
  }

  async blobRefs(): Promise<BlobRef[]> {
    return (await this.all(BLOB_REFS_SQL)).map((r) => ({ ref: String(r.ref), what: String(r.what) }));
  }

  async check(): Promise<CheckIssue[]> {
    const issues: CheckIssue[] = [];
    for (const inv of INVARIANTS) for (const r of await this.all(inv.sql)) issues.push({ check: inv.check, detail: inv.detail(r) });
    return issues;
  }
}
