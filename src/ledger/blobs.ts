/**
 * The blob store: content-addressed storage for large payloads (prompts, outputs, traces, trajectories).
 * The ledger's rows hold only `sha256:` digests; the bytes live in a BlobStore chosen when the ledger opens
 * (open.ts): files under the home for a SQLite ledger (file-blobs.ts), rows of PostgreSQL for a PostgreSQL
 * ledger (postgres-blobs.ts), so every host that reaches the ledger reaches its blobs, or objects of an S3 bucket
 * named by --blobs / $SMOL_BLOBS=s3://bucket/prefix (s3-blobs.ts). A blob is written
 * (committed) before any row names it, and every read is verified against its digest.
 */
import { FileBlobStore } from './file-blobs.js';

export { digestOf, isDigest, blobMaxBytes, BlobTooLargeError } from './blob-common.js';
export { FileBlobStore };

/** The file store answers synchronously (local disk), PostgreSQL and S3 asynchronously: callers always await. */
export type Awaitable<T> = T | Promise<T>;

export interface BlobStore {
  readonly kind: 'files' | 'postgres' | 's3';
  /** Where the blobs are, for messages: a directory, the ledger URL without its password, or s3://bucket/prefix. */
  readonly where: string;
  /** Stores bytes and returns their digest; durable (committed) when it returns. Over the cap: BlobTooLargeError. */
  put(data: Buffer | string): Awaitable<string>;
  /** Stores many blobs, sharing one commit where the store can. */
  putMany(items: (Buffer | string)[]): Awaitable<string[]>;
  /** Stores a file's bytes, streamed: the file is never read whole into memory. */
  putFile(file: string): Awaitable<string>;
  /** The verified bytes (IntegrityError when missing, corrupt, or over the cap); the whole blob is in memory. */
  get(digest: string): Awaitable<Buffer>;
  getText(digest: string): Awaitable<string>;
  has(digest: string): Awaitable<boolean>;
  /** Those of `digests` the store does not hold. */
  missing(digests: string[]): Awaitable<string[]>;
  /** A local file holding the verified blob (a stage reads its input from a file); streamed there, chunk by chunk. */
  fileOf(digest: string): Awaitable<string>;
  /**
   * The blob's bytes in chunks, streamed. The digest is checked at the end: the iteration throws IntegrityError
   * there on a mismatch, so a consumer commits nothing it built from the chunks until the loop has finished.
   */
  read(digest: string): AsyncIterable<Buffer>;
  /** Every digest the store holds (orphan reports, migration). */
  list(): AsyncIterable<string>;
  close(): Awaitable<void>;
}

/**
 * The file store under its historical name: `new BlobStore(dir)` still makes one (tests and programs that
 * keep blobs in a directory). As a type, BlobStore is the interface above.
 */
export const BlobStore = FileBlobStore;
