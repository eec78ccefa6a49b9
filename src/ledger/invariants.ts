/** What `ledger check` asks of either backend: plain SQL that SQLite and PostgreSQL read alike. */
import { CHECK_ISSUES_MAX } from './limits.js';

type Row = Record<string, unknown>;
const L = `LIMIT ${CHECK_ISSUES_MAX}`;

export interface Invariant { check: string; sql: string; detail: (r: Row) => string }

/** Each query returns the rows that break its invariant. */
export const INVARIANTS: Invariant[] = [
  { check: 'leased items hold a token and expiry', sql: `SELECT id FROM items WHERE status = 'leased' AND (lease_token IS NULL OR lease_expires_at IS NULL) ${L}`, detail: (r) => `item ${String(r.id)}` },
  { check: 'executions within max_attempts', sql: `SELECT id, attempt, max_attempts FROM items WHERE attempt > max_attempts ${L}`, detail: (r) => `item ${String(r.id)}: attempt ${String(r.attempt)} of ${String(r.max_attempts)}` },
  { check: 'done items have exactly their result', sql: `SELECT i.id FROM items i LEFT JOIN results r ON r.idem_key = i.idem_key WHERE i.status = 'done' AND r.idem_key IS NULL ${L}`, detail: (r) => `item ${String(r.id)} is done without a result` },
  { check: 'results belong to done items', sql: `SELECT r.idem_key FROM results r JOIN items i ON i.idem_key = r.idem_key WHERE i.status != 'done' ${L}`, detail: (r) => `result ${String(r.idem_key)}` },
  { check: 'one running attempt per leased item', sql: `SELECT item_id, count(*) AS n FROM attempts WHERE outcome = 'running' GROUP BY item_id HAVING count(*) > 1 ${L}`, detail: (r) => `item ${String(r.item_id)} has ${String(r.n)} running attempts` },
  { check: 'attempt rows match attempt counters', sql: `SELECT i.id FROM items i JOIN attempts a ON a.item_id = i.id GROUP BY i.id HAVING max(a.attempt) != max(i.attempt) ${L}`, detail: (r) => `item ${String(r.id)}` },
  { check: 'dead items say why', sql: `SELECT id FROM items WHERE status = 'dead' AND last_error IS NULL ${L}`, detail: (r) => `item ${String(r.id)}` },
];

/**
 * Every blob digest the ledger names, once each, with one place that names it (`ledger check` reports a
 * missing or corrupt blob by where it is used, and counts the store's other blobs as orphans).
 */
export const BLOB_REFS_SQL = `SELECT ref, min(what) AS what FROM (
    SELECT output_ref AS ref, 'result ' || idem_key AS what FROM results
    UNION ALL SELECT ref, 'trajectory ' || rollout_id || '/' || sample_id FROM trajectories
    UNION ALL SELECT input_ref, 'input of ' || idem_key FROM items
    UNION ALL SELECT input_ref, 'input of inference ' || idem_key FROM inference_requests
    UNION ALL SELECT output_ref, 'output of inference ' || idem_key FROM inference_requests WHERE output_ref IS NOT NULL
  ) AS refs GROUP BY ref ORDER BY ref`;
