/**
 * Write transactions for the SQLite ledger. Every write starts with BEGIN IMMEDIATE: a deferred transaction
 * that later upgrades to a writer ignores busy_timeout and fails with SQLITE_BUSY at once. SQLite's own busy
 * handler sleeps on a fixed ladder (1, 2, 5 … 100 ms), which is where the 1.3 s claim latencies measured
 * here came from; so busy_timeout is 0 and this module retries with short jittered sleeps instead.
 */
import type Database from 'better-sqlite3';
import { LedgerBusyError } from './errors.js';

const sleepCell = new Int32Array(new SharedArrayBuffer(4));

/** Blocks the thread for `ms` (fractions allowed); the ledger API is synchronous under the hood. */
export function sleepSync(ms: number): void {
  Atomics.wait(sleepCell, 0, 0, ms);
}

export function isBusy(err: unknown): boolean {
  const code = (err as { code?: string } | undefined)?.code;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED' || code === 'SQLITE_BUSY_SNAPSHOT' || code === 'SQLITE_BUSY_RECOVERY';
}

export class TxRunner {
  private readonly begin: Database.Statement;
  private readonly commit: Database.Statement;
  private readonly rollback: Database.Statement;
  /** How many times a caller waited for the write lock (visible in benchmarks). */
  busyWaits = 0;

  constructor(private readonly db: Database.Database, private readonly budgetMs: number) {
    this.begin = db.prepare('BEGIN IMMEDIATE');
    this.commit = db.prepare('COMMIT');
    this.rollback = db.prepare('ROLLBACK');
  }

  /** Retries `fn` while SQLite reports the database busy, within the budget; never lets SQLITE_BUSY out. */
  retry<T>(what: string, fn: () => T): T {
    const start = performance.now();
    for (let n = 0; ; n++) {
      try {
        return fn();
      } catch (err) {
        if (!isBusy(err)) throw err;
        this.busyWaits++;
        const waited = performance.now() - start;
        if (waited > this.budgetMs) {
          throw new LedgerBusyError(`${what} failed: ledger stayed locked for ${Math.round(waited)} ms`, { cause: err, hint: 'Another process holds the write lock; retry, or raise SMOL_LEDGER_BUSY_MS.' });
        }
        // 100 µs doubling to 4 ms, jittered so waiters do not wake in lockstep or spin the holder off the CPU
        sleepSync((0.5 + Math.random()) * Math.min(4, 0.1 * 2 ** Math.min(n, 6)));
      }
    }
  }

  /** Runs once, before the next write transaction (the ledger starts its checkpointer there). */
  beforeFirstWrite: (() => void) | null = null;
  /** Runs before every write transaction. */
  beforeWrite: (() => void) | null = null;

  write<T>(what: string, fn: () => T): T {
    if (this.beforeFirstWrite) {
      const f = this.beforeFirstWrite;
      this.beforeFirstWrite = null;
      f();
    }
    this.beforeWrite?.();
    this.retry(what, () => this.begin.run());
    let result: T;
    try {
      result = fn();
    } catch (err) {
      if (this.db.inTransaction) this.rollback.run();
      throw err;
    }
    this.retry(what, () => this.commit.run());
    return result;
  }
}
