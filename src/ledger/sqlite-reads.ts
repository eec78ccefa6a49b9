/**
 * Read side of the SQLite ledger. Reads run as short single statements, never one long transaction: a
 * reader that holds a snapshot stops checkpoints from recycling the WAL, which then grows without bound.
 */
import type Database from 'better-sqlite3';
import type { TxRunner } from './sqlite-tx.js';
import { BLOB_REFS_SQL, INVARIANTS } from './invariants.js';
import { RATE_WINDOW_MS } from './limits.js';
import { percentileIndex, rowToAttempt, rowToInference, rowToItem, rowToResult, rowToRollout, rowToTiming, rowToTrajectory } from './rows.js';
import { countsByStatus, statsFrom } from './stats.js';
import type { AttemptTiming, BlobRef, CheckIssue, InferenceRecord, LedgerStats, ResultRecord, RolloutSummary, TrajectoryRecord, WorkItem } from './types.js';

type Row = Record<string, unknown>;

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
    const counts = countsByStatus(this.all('SELECT status, count(*) AS n FROM items WHERE rollout_id = ? GROUP BY status', r.id));
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
    return this.all('SELECT * FROM trajectories WHERE rollout_id = ? ORDER BY sample_id', rolloutId).map(rowToTrajectory);
  }
  attempts(itemId: number) {
    return this.all('SELECT * FROM attempts WHERE item_id = ? ORDER BY attempt', itemId).map(rowToAttempt);
  }
  inference(key: string): InferenceRecord | null {
    const r = this.get('SELECT * FROM inference_requests WHERE idem_key = ?', key);
    return r ? rowToInference(r) : null;
  }

  stats(rolloutId?: string): LedgerStats {
    const now = this.clock();
    const rid = rolloutId ?? null;
    const counts = countsByStatus(this.all('SELECT status, count(*) AS n FROM items WHERE (@rid IS NULL OR rollout_id = @rid) GROUP BY status', { rid }));
    const ready = Number(this.get(`SELECT count(*) AS n FROM items WHERE status = 'queued' AND run_after <= @now AND (@rid IS NULL OR rollout_id = @rid)`, { rid, now })?.n ?? 0);
    const ageAt = (p: number): number => {
      if (ready === 0) return 0;
      const r = this.get(`SELECT run_after FROM items WHERE status = 'queued' AND run_after <= @now AND (@rid IS NULL OR rollout_id = @rid) ORDER BY run_after DESC LIMIT 1 OFFSET @off`, { rid, now, off: percentileIndex(ready, p) });
      return r ? now - Number(r.run_after) : 0;
    };
    const attempts = this.get('SELECT coalesce(sum(attempt), 0) AS a, coalesce(sum(attempt > 0), 0) AS n FROM items WHERE (@rid IS NULL OR rollout_id = @rid)', { rid });
    const events = this.all('SELECT kind, count(*) AS n FROM events WHERE (@rid IS NULL OR rollout_id = @rid) GROUP BY kind', { rid });
    const results = Number(this.get('SELECT count(*) AS n FROM results WHERE (@rid IS NULL OR rollout_id = @rid)', { rid })?.n ?? 0);
    const recentResults = Number(this.get('SELECT count(*) AS n FROM results WHERE created_at > @now AND (@rid IS NULL OR rollout_id = @rid)', { rid, now: now - RATE_WINDOW_MS })?.n ?? 0);
    // GPU-hours: each rollout's GPUs times the span from its creation to its last trajectory (or now while running)
    const tr = this.get(`SELECT count(*) AS n, coalesce(sum(x.gh), 0) AS gh FROM (
        SELECT r.gpus * ((coalesce(max(t.created_at), @now) - r.created_at) / 3600000.0) AS gh, count(t.sample_id) AS c
        FROM rollouts r JOIN trajectories t ON t.rollout_id = r.id WHERE (@rid IS NULL OR r.id = @rid) GROUP BY r.id) x`, { rid, now });
    const trajectories = Number(this.get('SELECT count(*) AS n FROM trajectories WHERE (@rid IS NULL OR rollout_id = @rid)', { rid })?.n ?? 0);
    const gpuHours = Number(tr?.gh ?? 0);
    const inference = this.get(`SELECT count(*) AS n, coalesce(sum(status = 'done'), 0) AS d, coalesce(sum(status = 'shed'), 0) AS s, avg(CASE WHEN status = 'done' THEN batch_size END) AS b
      FROM inference_requests WHERE (@rid IS NULL OR rollout_id = @rid)`, { rid });
    return statsFrom({ now, counts, attempts, events, results, recentResults, trajectories, gpuHours, inference, queueAgeP50Ms: ageAt(0.5), queueAgeP99Ms: ageAt(0.99) });
  }

  attemptTimings(rolloutId?: string): AttemptTiming[] {
    return this.all(`SELECT i.stage, i.stage_index, i.kind, a.outcome, a.started_at, a.ended_at FROM attempts a JOIN items i ON i.id = a.item_id
      WHERE (@rid IS NULL OR i.rollout_id = @rid) ORDER BY a.started_at, a.item_id, a.attempt`, { rid: rolloutId ?? null }).map(rowToTiming);
  }

  blobRefs(): BlobRef[] {
    return this.all(BLOB_REFS_SQL).map((r) => ({ ref: String(r.ref), what: String(r.what) }));
  }

  check(): CheckIssue[] {
    const issues: CheckIssue[] = [];
    const integrity = this.all('PRAGMA quick_check').map((r) => String(Object.values(r)[0]));
    if (integrity.join() !== 'ok') for (const m of integrity) issues.push({ check: 'sqlite quick_check', detail: m });
    for (const r of this.all('PRAGMA foreign_key_check')) issues.push({ check: 'foreign keys', detail: `${String(r.table)} row ${String(r.rowid)} → ${String(r.parent)}` });
    for (const inv of INVARIANTS) for (const r of this.all(inv.sql)) issues.push({ check: inv.check, detail: inv.detail(r) });
    return issues;
  }
}
