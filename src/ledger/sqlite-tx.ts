/**
 * Write transactions for the SQLite ledger. Every write starts with BEGIN IMMEDIATE: a deferred transaction
 * that later upgrades to a writer ignores busy_timeout and fails with SQLITE_BUSY at once. SQLite's own busy
 * handler sleeps on a fixed ladder (1, 2, 5 … 100 ms), which is where the 1.3 s claim latencies measured
 * here came from; so busy_timeout is 0 and this module retries with short jittered sleeps instead. Once a
 * process has met the lock busy, its writers also queue for it in a cross-process FIFO (sqlite-lock.ts),
 * because polling alone is unfair: a waiter can miss every short gap between other processes' transactions.
 */
import type Database from 'better-sqlite3';
import { LedgerBusyError } from './errors.js';
import { SQLITE_CONTENDED_MS, SQLITE_TURN_TIMEOUT_MS } from './limits.js';
import { WriteQueue } from './sqlite-lock.js';

const sleepCell = new Int32Array(new SharedArrayBuffer(4));

/** Blocks the thread for `ms` (fractions allowed); the ledger API is synchronous under the hood. */
export function sleepSync(ms: number): void {
  Atomics.wait(sleepCell, 0, 0, ms);
}

export function isBusy(err: unknown): boolean {
  const code = (err as { code?: string } | undefined)?.code;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED' || code === 'SQLITE_BUSY_SNAPSHOT' || code === 'SQLITE_BUSY_RECOVERY';
}

export interface TxRunnerOptions {
  /** 'fifo' (default for files): queue for the write lock across processes once it is contended; 'poll': only retry. */
  lockQueue?: 'fifo' | 'poll';
}

export class TxRunner {
  private readonly begin: Database.Statement;
  private readonly commit: Database.Statement;
  private readonly rollback: Database.Statement;
  private queue: WriteQueue | null = null;
  private queueFailed: boolean;
  private contendedUntil = 0;
  /** How many times a caller waited for the write lock (visible in benchmarks). */
  busyWaits = 0;
  /** How many write transactions ran in a turn from the cross-process queue. */
  turns = 0;

  constructor(private readonly db: Database.Database, private readonly budgetMs: number, opts: TxRunnerOptions = {}) {
    this.begin = db.prepare('BEGIN IMMEDIATE');
    this.commit = db.prepare('COMMIT');
    this.rollback = db.prepare('ROLLBACK');
    this.queueFailed = opts.lockQueue === 'poll' || db.memory || process.platform !== 'linux';
  }

  /** Retries `fn` while SQLite reports the database busy, within the budget; never lets SQLITE_BUSY out. */
  retry<T>(what: string, fn: () => T): T {
    const start = performance.now();
    for (let n = 0; ; n++) {
      try {
        return fn();
      } catch (err) {
        if (!isBusy(err)) throw err;
        this.busy(what, err, start);
        sleepSync(backoff(n));
      }
    }
  }

  private busy(what: string, err: unknown, start: number): void {
    this.busyWaits++;
    const waited = performance.now() - start;
    if (waited > this.budgetMs) {
      throw new LedgerBusyError(`${what} failed: ledger stayed locked for ${Math.round(waited)} ms`, { cause: err, hint: 'Another process holds the write lock; retry, or raise SMOL_LEDGER_BUSY_MS.' });
    }
  }

  /** Runs once, before the next write transaction (the ledger starts its checkpointer there). */
  beforeFirstWrite: (() => void) | null = null;
  /** Runs before every write transaction. */
  beforeWrite: (() => void) | null = null;

  /** Runs the once-per-process preparation of writes now (also done by the first write). */
  prepareWrites(): void {
    const f = this.beforeFirstWrite;
    this.beforeFirstWrite = null;
    f?.();
    this.startQueue();
  }

  write<T>(what: string, fn: () => T): T {
    if (this.beforeFirstWrite) this.prepareWrites();
    this.beforeWrite?.();
    const turn = this.beginWrite(what);
    try {
      let result: T;
      try {
        result = fn();
      } catch (err) {
        if (this.db.inTransaction) this.rollback.run();
        throw err;
      }
      this.retry(what, () => this.commit.run());
      return result;
    } finally {
      if (turn) this.queue?.release();
    }
  }

  /** BEGIN IMMEDIATE, in turn when the lock is contended; returns whether this process holds a turn to release. */
  private beginWrite(what: string): boolean {
    let asked = this.contended();
    let turn = asked && this.takeTurn();
    const start = performance.now();
    for (let n = 0; ; n++) {
      try {
        this.begin.run();
        return turn;
      } catch (err) {
        if (!isBusy(err)) { if (turn) this.queue?.release(); throw err; }
        this.contendedUntil = Date.now() + SQLITE_CONTENDED_MS;
        if (!asked) {
          asked = true;
          turn = this.takeTurn();
          if (turn) continue;
        }
        try {
          this.busy(what, err, start);
        } catch (e) {
          if (turn) this.queue?.release();
          throw e;
        }
        sleepSync(turn ? turnPoll(n) : backoff(n));
      }
    }
  }

  /** Whether this process or, as the queue's server tells, another has met the lock busy lately. */
  private contended(): boolean {
    return Date.now() <= Math.max(this.contendedUntil, (this.queue?.crowdedAt ?? 0) + SQLITE_CONTENDED_MS);
  }

  private takeTurn(): boolean {
    const q = this.startQueue();
    if (!q?.acquire(SQLITE_TURN_TIMEOUT_MS)) return false;
    this.turns++;
    return true;
  }

  /** Starts the queue's thread ahead of need: it takes a few ms to join, and polling meanwhile is unfair. */
  startQueue(): WriteQueue | null {
    if (this.queue || this.queueFailed) return this.queue;
    try {
      this.queue = new WriteQueue(this.db.name);
    } catch {
      this.queueFailed = true; // no threads here: polling alone
    }
    return this.queue;
  }

  async close(): Promise<void> {
    const q = this.queue;
    this.queue = null;
    this.queueFailed = true;
    await q?.stop();
  }
}

/**
 * In turn, the lock's holder is the turn ahead, already in its transaction (or a writer outside the queue),
 * and this writer is next: 100 µs polls, backing off to 1 ms when that transaction is a long one.
 */
function turnPoll(n: number): number {
  return (0.5 + Math.random()) * Math.min(1, 0.1 * 2 ** Math.floor(n / 8));
}

/** 100 µs doubling to 4 ms, jittered so waiters do not wake in lockstep or spin the holder off the CPU. */
function backoff(n: number): number {
  return (0.5 + Math.random()) * Math.min(4, 0.1 * 2 ** Math.min(n, 6));
}
