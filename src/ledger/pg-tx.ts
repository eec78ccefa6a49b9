/** A PostgreSQL transaction on a client of its own, shared by the ledger and its blob store. */
import type pg from 'pg';

const RETRYABLE = new Set(['40001', '40P01']); // serialization failure, deadlock

/**
 * BEGIN, fn, COMMIT on one pool client; ROLLBACK on any error. A serialization failure or deadlock runs fn
 * again, up to `retries` times: only for a fn that may run twice (not one that consumes a stream).
 */
export async function inTransaction<T>(pool: pg.Pool, fn: (c: pg.PoolClient) => Promise<T>, retries = 0): Promise<T> {
  for (let n = 0; ; n++) {
    const c = await pool.connect();
    try {
      await c.query('BEGIN');
      const r = await fn(c);
      await c.query('COMMIT');
      return r;
    } catch (err) {
      await c.query('ROLLBACK').catch(() => undefined);
      if (n < retries && RETRYABLE.has((err as { code?: string }).code ?? '')) continue;
      throw err;
    } finally {
      c.release();
    }
  }
}
