/**
 * Small blobs (prompts, completions, short stage outputs) kept as rows of one SQLite file in the blob
 * directory rather than one file each. Creating a file cost 100–500 µs of system time on this shared disk,
 * and the gateway stores two per request: in a profile at ~500 req/s over half its time went to
 * writeFileSync. A row costs a fraction of that, and a batch of them shares one commit. Content-addressed
 * like the files (digest → bytes, verified on read), WAL with the ledger's synchronous level, so a row is
 * as durable as a file written by put(). Same host only (WAL needs shared memory): a PostgreSQL ledger,
 * whose workers may share the blob directory across hosts, keeps every blob a file.
 */
import path from 'node:path';
import Database from 'better-sqlite3';
import { SQLITE_BUSY_BUDGET_MS, WAL_SIZE_LIMIT_BYTES } from './limits.js';
import { TxRunner } from './sqlite-tx.js';

/** Larger blobs stay files: their write cost is the bytes, not the file creation. */
export const INLINE_MAX_BYTES = 4096;

export class SmallBlobs {
  private readonly db: Database.Database;
  private readonly tx: TxRunner;
  private readonly ins: Database.Statement;
  private readonly sel: Database.Statement;
  private readonly all: Database.Statement;

  constructor(dir: string, durable: boolean) {
    this.db = new Database(path.join(dir, 'small.db'), { timeout: 0 });
    this.tx = new TxRunner(this.db, Number(process.env.SMOL_LEDGER_BUSY_MS ?? SQLITE_BUSY_BUDGET_MS));
    this.tx.retry('opening the small-blob store', () => {
      this.db.pragma('journal_mode = WAL');
      this.db.pragma(`synchronous = ${durable ? 'full' : 'normal'}`);
      this.db.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
    });
    this.tx.write('creating the small-blob store', () => this.db.exec('CREATE TABLE IF NOT EXISTS blobs (digest TEXT PRIMARY KEY, data BLOB NOT NULL) STRICT, WITHOUT ROWID'));
    this.ins = this.db.prepare('INSERT OR IGNORE INTO blobs (digest, data) VALUES (?, ?)');
    this.sel = this.db.prepare('SELECT data FROM blobs WHERE digest = ?').pluck();
    this.all = this.db.prepare('SELECT digest FROM blobs ORDER BY digest').pluck();
  }

  /** Stores every (digest, bytes) pair in one commit. */
  putMany(rows: { digest: string; data: Buffer }[]): void {
    if (rows.length === 0) return;
    this.tx.write('storing blobs', () => {
      for (const r of rows) this.ins.run(r.digest, r.data);
    });
  }

  get(digest: string): Buffer | null {
    return (this.tx.retry('reading a blob', () => this.sel.get(digest)) as Buffer | undefined) ?? null;
  }

  /** Every digest held (`ledger check --blobs` orphans, `migrate-blobs`). */
  digests(): string[] {
    return this.tx.retry('listing blobs', () => this.all.all()) as string[];
  }

  close(): void {
    if (this.db.open) this.db.close();
  }
}
