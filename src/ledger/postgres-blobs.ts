/**
 * The PostgreSQL blob store (a PostgreSQL ledger's default): a blob is a `blobs` row (digest, size, chunk
 * count) and `blob_chunks` rows of at most BLOB_CHUNK_BYTES, written in one transaction, so a blob is there
 * whole or not at all, and every host that reaches the ledger reaches it. Writers hold one chunk per round
 * trip and readers one chunk at a time (a binary COPY, src/ledger/pg-copy.ts), never a whole trajectory; the
 * size cap is checked as the bytes stream, and every read is hashed against its digest before it counts. A
 * chunk longer than a chunk is damage: only its first BLOB_CHUNK_BYTES + 1 bytes ever cross the wire.
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { pipeline } from 'node:stream/promises';
import type pg from 'pg';
import { to as copyTo } from 'pg-copy-streams';
import { blobMaxBytes, cacheBlobFile, collect, digestOf, isDigest, overCapOnRead, tooLarge } from './blob-common.js';
import type { BlobStore } from './blobs.js';
import { IntegrityError } from './errors.js';
import { inTransaction } from './pg-tx.js';
import { BLOB_CHUNK_BYTES, PG_BLOB_LOOKUP_BATCH } from './limits.js';
import { copyTuples, int4Of, int8Of } from './pg-copy.js';

/** Splits a buffer into chunk-sized views (no copies). */
function* chunksOf(data: Buffer): Iterable<Buffer> {
  for (let at = 0; at < data.length; at += BLOB_CHUNK_BYTES) yield data.subarray(at, at + BLOB_CHUNK_BYTES);
}

/** Re-cuts a stream's pieces so no stored chunk is longer than BLOB_CHUNK_BYTES. */
async function* bounded(source: AsyncIterable<Buffer> | Iterable<Buffer>): AsyncIterable<Buffer> {
  for await (const piece of source) yield* chunksOf(piece);
}

export interface PostgresBlobStoreOptions {
  /** For messages: the ledger URL without its password. */
  where: string;
  /** Where fileOf() streams blobs for programs that read a file (content-addressed, so reused across attempts). */
  cacheDir: string;
  maxBytes?: number;
}

export class PostgresBlobStore implements BlobStore {
  readonly kind = 'postgres' as const;
  readonly where: string;
  private readonly maxBytes: number;

  constructor(private readonly pool: pg.Pool, private readonly o: PostgresBlobStoreOptions) {
    this.where = o.where;
    this.maxBytes = o.maxBytes ?? blobMaxBytes();
  }

  private check(digest: string): void {
    if (!isDigest(digest)) throw new IntegrityError(`not a blob digest: ${digest}`, { where: 'blob reference' });
  }

  private missingError(digest: string): IntegrityError {
    return new IntegrityError(`blob ${digest} is missing`, {
      where: `blobs in ${this.where}`,
      hint: 'If this ledger\'s blobs were written to files by an older smol (or with $SMOL_BLOBS), move them in with `smol ledger migrate-blobs --from DIR`.',
    });
  }

  async put(data: Buffer | string): Promise<string> {
    const buf = typeof data === 'string' ? Buffer.from(data) : data;
    if (buf.length > this.maxBytes) throw tooLarge(`a ${buf.length}-byte blob`, this.maxBytes);
    const digest = digestOf(buf);
    await this.store(digest, chunksOf(buf));
    return digest;
  }

  /** Small blobs (the common case: prompts, completions) share one transaction and two multi-row INSERTs. */
  async putMany(items: (Buffer | string)[]): Promise<string[]> {
    const bufs = items.map((d) => (typeof d === 'string' ? Buffer.from(d) : d));
    const digests = bufs.map((b) => digestOf(b));
    const byDigest = new Map<string, Buffer>();
    bufs.forEach((b, i) => {
      if (b.length > this.maxBytes) throw tooLarge(`a ${b.length}-byte blob`, this.maxBytes);
      if (b.length > BLOB_CHUNK_BYTES) return; // large ones go one by one below, each its own transaction
      byDigest.set(digests[i], b);
    });
    if (byDigest.size) {
      // sorted, so two writers of overlapping batches take the digests' row locks in the same order (no deadlock)
      const ds = [...byDigest.keys()].sort();
      const sizes = ds.map((d) => byDigest.get(d)!.length);
      await this.tx(async (c) => {
        const fresh = (await c.query(
          `INSERT INTO blobs (digest, size, chunks, created_at) SELECT d, s, CASE WHEN s = 0 THEN 0 ELSE 1 END, smol_now_ms()
           FROM unnest($1::text[], $2::bigint[]) WITH ORDINALITY AS t(d, s, o) ORDER BY o ON CONFLICT DO NOTHING RETURNING digest`, [ds, sizes])).rows.map((r: { digest: string }) => r.digest);
        const rows = fresh.filter((d) => byDigest.get(d)!.length > 0);
        if (rows.length) await c.query('INSERT INTO blob_chunks (digest, seq, data) SELECT d, 0, b FROM unnest($1::text[], $2::bytea[]) AS t(d, b)', [rows, rows.map((d) => byDigest.get(d)!)]);
      });
    }
    for (let i = 0; i < bufs.length; i++) if (bufs[i].length > BLOB_CHUNK_BYTES) await this.store(digests[i], chunksOf(bufs[i]));
    return digests;
  }

  /** Hashes the file in a first streamed pass, then streams it into a transaction, checking the hash again. */
  async putFile(file: string): Promise<string> {
    const size = (await fs.promises.stat(file)).size;
    if (size > this.maxBytes) throw tooLarge(file, this.maxBytes);
    const h = createHash('sha256');
    await pipeline(fs.createReadStream(file, { highWaterMark: BLOB_CHUNK_BYTES }), h);
    const digest = 'sha256:' + h.digest('hex');
    await this.store(digest, fs.createReadStream(file, { highWaterMark: BLOB_CHUNK_BYTES }));
    return digest;
  }

  /**
   * Writes `digest` from `source` in one transaction: the `blobs` row first (a concurrent writer of the same
   * digest waits on it, then finds it there and writes nothing), then each chunk, then the size and count.
   * Bytes that do not hash to `digest` (a corrupt source in migrate-blobs), or too many of them, roll it
   * all back. Returns false when the blob was already there.
   */
  async store(digest: string, source: AsyncIterable<Buffer> | Iterable<Buffer>): Promise<boolean> {
    this.check(digest);
    return this.tx(async (c) => {
      const claimed = await c.query('INSERT INTO blobs (digest, size, chunks, created_at) VALUES ($1, 0, 0, smol_now_ms()) ON CONFLICT DO NOTHING', [digest]);
      if (claimed.rowCount === 0) return false;
      const h = createHash('sha256');
      let size = 0;
      let seq = 0;
      for await (const chunk of bounded(source)) {
        size += chunk.length;
        if (size > this.maxBytes) throw tooLarge(`blob ${digest}`, this.maxBytes);
        h.update(chunk);
        await c.query('INSERT INTO blob_chunks (digest, seq, data) VALUES ($1, $2, $3)', [digest, seq++, chunk]);
      }
      if ('sha256:' + h.digest('hex') !== digest) throw new IntegrityError(`the bytes offered as blob ${digest} hash to something else; nothing was stored`, { where: this.where });
      await c.query('UPDATE blobs SET size = $2, chunks = $3 WHERE digest = $1', [digest, size, seq]);
      return true;
    });
  }

  /** Not retried: a put may be consuming a stream. */
  private tx<T>(fn: (c: pg.PoolClient) => Promise<T>): Promise<T> {
    return inTransaction(this.pool, fn);
  }

  /**
   * One binary COPY brings the blob's row and then its chunks in order (raw bytes, not pg's hex text): one
   * round trip for a small blob, one chunk in the heap at a time for a large one. The reader holds a pool
   * connection until it finishes; one left mid-stream is closed, not returned to the pool mid-COPY.
   */
  async *read(digest: string): AsyncIterable<Buffer> {
    this.check(digest);
    const where = `blob_chunks in ${this.where}`;
    const corrupt = (what: string) => new IntegrityError(`blob ${digest} is corrupt (${what})`, { where });
    // COPY takes no parameters: the digest passed check() (hex only) and the numbers are ours. The join sends no
    // chunk of a blob over the cap; substring bounds what one row can send, octet_length reveals an overlong one.
    const sql = `COPY (SELECT b.size, b.chunks, c.seq, substring(c.data FROM 1 FOR ${BLOB_CHUNK_BYTES + 1}), octet_length(c.data)
      FROM blobs b LEFT JOIN blob_chunks c ON c.digest = b.digest AND c.seq < b.chunks AND b.size <= ${this.maxBytes}
      WHERE b.digest = '${digest}' ORDER BY c.seq) TO STDOUT (FORMAT binary)`;
    let head: { size: number; chunks: number } | undefined;
    const h = createHash('sha256');
    let total = 0;
    let seq = 0;
    const c = await this.pool.connect();
    let finished = false;
    try {
      for await (const [sz, ch, s, data, n] of copyTuples(c.query(copyTo(sql)), { maxBytes: [8, 4, 4, BLOB_CHUNK_BYTES + 1, 4] }, where)) {
        if (!head) {
          head = { size: int8Of(sz, 'a blob size', where), chunks: int4Of(ch, 'a chunk count', where) };
          if (head.size > this.maxBytes) throw overCapOnRead(digest, where, this.maxBytes);
        }
        if (s === null) continue; // the row without chunks (an empty blob, or all of them missing)
        if (int4Of(s, 'a chunk number', where) !== seq) throw corrupt(`chunk ${seq} is missing`);
        const len = int4Of(n, `chunk ${seq}'s length`, where);
        if (len > BLOB_CHUNK_BYTES) throw corrupt(`chunk ${seq} is ${len} bytes, over the ${BLOB_CHUNK_BYTES}-byte chunk size`);
        if (!data) throw corrupt(`chunk ${seq} is NULL`);
        total += data.length;
        if (total > this.maxBytes) throw overCapOnRead(digest, where, this.maxBytes);
        if (total > head.size) throw corrupt(`more bytes than its recorded ${head.size}`);
        h.update(data);
        seq++;
        yield data;
      }
      finished = true;
    } finally {
      c.release(!finished);
    }
    if (!head) throw this.missingError(digest);
    if (seq < head.chunks) throw corrupt(`chunk ${seq} of ${head.chunks} is missing`);
    if (total !== head.size || 'sha256:' + h.digest('hex') !== digest) throw corrupt('content hash differs');
  }

  get(digest: string): Promise<Buffer> { return collect(this.read(digest)); }
  async getText(digest: string): Promise<string> { return (await this.get(digest)).toString('utf8'); }

  async has(digest: string): Promise<boolean> {
    this.check(digest);
    return (await this.pool.query('SELECT 1 FROM blobs WHERE digest = $1', [digest])).rowCount! > 0;
  }

  async missing(digests: string[]): Promise<string[]> {
    const out: string[] = [];
    for (let i = 0; i < digests.length; i += PG_BLOB_LOOKUP_BATCH) {
      const batch = digests.slice(i, i + PG_BLOB_LOOKUP_BATCH);
      const { rows } = await this.pool.query('SELECT d FROM unnest($1::text[]) AS t(d) WHERE NOT EXISTS (SELECT 1 FROM blobs WHERE digest = t.d)', [batch]);
      out.push(...rows.map((r: { d: string }) => r.d));
    }
    return out;
  }

  /** Streams the blob to a temp file and renames it into the cache only once the digest has checked out. */
  async fileOf(digest: string): Promise<string> {
    this.check(digest);
    return cacheBlobFile(this.o.cacheDir, digest, this.read(digest));
  }

  async *list(): AsyncIterable<string> {
    for (let after = '';;) {
      const { rows } = await this.pool.query('SELECT digest FROM blobs WHERE digest > $1 ORDER BY digest LIMIT $2', [after, PG_BLOB_LOOKUP_BATCH]);
      for (const r of rows as { digest: string }[]) yield r.digest;
      if (rows.length < PG_BLOB_LOOKUP_BATCH) return;
      after = (rows[rows.length - 1] as { digest: string }).digest;
    }
  }

  /** The pool is the ledger's, which closes it. */
  close(): void {}
}
