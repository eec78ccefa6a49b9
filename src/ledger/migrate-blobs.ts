/**
 * `ledger migrate-blobs`: moves a file blob store (what every ledger used before blobs lived in PostgreSQL,
 * or a $SMOL_BLOBS directory) into a PostgreSQL ledger's blob tables, or into an S3 bucket (`--to s3://…`). Each blob is streamed from its file
 * into one transaction and re-hashed on the way, so it is committed whole or not at all: a kill mid-run
 * loses at most the blob in flight, and running again (idempotent) skips what is already there. A file
 * whose bytes do not match its name is not copied; it is reported, and the run exits non-zero once the
 * rest are done. The source is left as it was: remove it once `smol ledger check --blobs` is clean.
 */
import type { FileBlobStore } from './file-blobs.js';
import { PG_BLOB_LOOKUP_BATCH } from './limits.js';

/** What a destination offers (PostgresBlobStore, S3BlobStore): a batch existence check and a re-hashing streamed write. */
export interface BlobSink {
  readonly where: string;
  missing(digests: string[]): Promise<string[]>;
  /** Writes the blob from `source` if its bytes hash to `digest` (IntegrityError otherwise); false when it was there. */
  store(digest: string, source: AsyncIterable<Buffer>): Promise<boolean>;
}

export interface MigrateReport {
  from: string;
  to: string;
  /** Blobs found in the source. */
  scanned: number;
  /** Written into the destination by this run. */
  copied: number;
  /** Already there (an earlier run, or a writer since). */
  present: number;
  bytes: number;
  failed: { digest: string; error: string }[];
}

export async function migrateBlobs(from: FileBlobStore, to: BlobSink, onBlob?: (r: MigrateReport) => void): Promise<MigrateReport> {
  const report: MigrateReport = { from: from.where, to: to.where, scanned: 0, copied: 0, present: 0, bytes: 0, failed: [] };
  const flush = async (batch: string[]) => {
    const todo = new Set(await to.missing(batch));
    report.present += batch.length - todo.size;
    for (const d of todo) {
      let size = 0;
      async function* counted(): AsyncIterable<Buffer> {
        for await (const c of from.read(d)) { size += c.length; yield c; }
      }
      try {
        if (await to.store(d, counted())) {
          report.copied++;
          report.bytes += size;
        } else {
          report.present++;
        }
      } catch (err) {
        report.failed.push({ digest: d, error: (err as Error).message });
      }
      onBlob?.(report);
    }
  };
  let batch: string[] = [];
  const seen = new Set<string>();
  for await (const d of from.list()) {
    if (seen.has(d)) continue; // a digest both a file and a small.db row
    seen.add(d);
    report.scanned++;
    batch.push(d);
    if (batch.length >= PG_BLOB_LOOKUP_BATCH) { await flush(batch); batch = []; }
  }
  if (batch.length) await flush(batch);
  return report;
}
