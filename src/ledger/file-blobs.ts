/**
 * The file blob store (a SQLite ledger's default): the bytes live at <dir>/<aa>/<rest>. Writes go to a temp
 * file and are renamed, so a reader never sees a partial blob and a crash leaves at most an orphaned temp
 * file. With `durable` (power-loss durability, SMOL_LEDGER_SYNC=full) the file and its directory are fsynced
 * before put() returns; otherwise a blob survives the death of the writing process, which is what the ledger
 * promises by default. Blobs up to INLINE_MAX_BYTES go to rows of <dir>/small.db instead (small-blobs.ts),
 * unless `inline` is off; fileOf() gives any blob a file path when a program needs one. Local disk answers
 * synchronously, so the methods do too (the BlobStore interface lets callers await either store).
 */
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { IntegrityError } from './errors.js';
import { blobMaxBytes, digestOf, isDigest, overCapOnRead, tooLarge } from './blob-common.js';
import type { BlobStore } from './blobs.js';
import { BLOB_CHUNK_BYTES } from './limits.js';
import { INLINE_MAX_BYTES, SmallBlobs } from './small-blobs.js';
import { mapFsError } from '../errors/index.js';

const SHARD_RE = /^[0-9a-f]{2}$/;
const REST_RE = /^[0-9a-f]{62}$/;

export class FileBlobStore implements BlobStore {
  readonly kind = 'files' as const;
  private smallStore: SmallBlobs | null = null;
  /** Shard directories known to exist, so a put costs one write and one rename. */
  private readonly shards = new Set<string>();
  private readonly maxBytes: number;

  constructor(readonly dir: string, private readonly durable = false, private readonly o: { inline?: boolean; maxBytes?: number } = {}) {
    fs.mkdirSync(dir, { recursive: true });
    this.maxBytes = o.maxBytes ?? blobMaxBytes();
  }

  get where(): string { return this.dir; }
  private get inline(): boolean { return this.o.inline !== false; }
  private small(): SmallBlobs {
    this.smallStore ??= new SmallBlobs(this.dir, this.durable);
    return this.smallStore;
  }
  private hasSmallDb(): boolean { return this.inline && (this.smallStore !== null || fs.existsSync(path.join(this.dir, 'small.db'))); }
  /** The row for a small blob; a store that never held one is not created just to look (`ledger check`). */
  private smallRow(digest: string): Buffer | null {
    return this.hasSmallDb() ? this.small().get(digest) : null;
  }

  /** Where the blob's file is (or would be); small blobs may have none, see fileOf(). */
  pathOf(digest: string): string {
    if (!isDigest(digest)) throw new IntegrityError(`not a blob digest: ${digest}`, { where: 'blob reference' });
    const hex = digest.slice(7);
    return path.join(this.dir, hex.slice(0, 2), hex.slice(2));
  }

  has(digest: string): boolean {
    return fs.existsSync(this.pathOf(digest)) || this.smallRow(digest) !== null;
  }

  missing(digests: string[]): string[] {
    return digests.filter((d) => !this.has(d));
  }

  /** A file holding the blob, written from its row for a small blob (a stage reads its input from a file). */
  fileOf(digest: string): string {
    const p = this.pathOf(digest);
    if (fs.existsSync(p)) return p;
    const row = this.smallRow(digest);
    if (!row) throw new IntegrityError(`blob ${digest} is missing`, { where: this.dir });
    if (digestOf(row) !== digest) throw new IntegrityError(`blob ${digest} is corrupt (content hash differs)`, { where: path.join(this.dir, 'small.db') });
    this.writeFile(digest, row);
    return p;
  }

  /** Stores many blobs; the small ones share one commit. */
  putMany(items: (Buffer | string)[]): string[] {
    const rows: { digest: string; data: Buffer }[] = [];
    const digests = items.map((d) => {
      const data = typeof d === 'string' ? Buffer.from(d) : d;
      if (!this.inline || data.length > INLINE_MAX_BYTES) return this.put(data);
      const digest = digestOf(data);
      rows.push({ digest, data });
      return digest;
    });
    if (rows.length) this.small().putMany(rows);
    return digests;
  }

  put(data: Buffer | string): string {
    const size = Buffer.byteLength(data);
    if (size > this.maxBytes) throw tooLarge(`a ${size}-byte blob`, this.maxBytes);
    if (this.inline && size <= INLINE_MAX_BYTES) return this.putMany([data])[0];
    const digest = digestOf(data);
    if (fs.existsSync(this.pathOf(digest))) return digest;
    this.writeFile(digest, data);
    return digest;
  }

  /** Hashes the file a chunk at a time, then copies it in under its digest (the copy is the kernel's). */
  putFile(file: string): string {
    const size = fs.statSync(file).size;
    if (size > this.maxBytes) throw tooLarge(file, this.maxBytes);
    const h = createHash('sha256');
    const buf = Buffer.allocUnsafe(BLOB_CHUNK_BYTES);
    const fd = fs.openSync(file, 'r');
    try {
      for (let n; (n = fs.readSync(fd, buf, 0, buf.length, null)) > 0;) h.update(buf.subarray(0, n));
    } finally {
      fs.closeSync(fd);
    }
    const digest = 'sha256:' + h.digest('hex');
    if (this.has(digest)) return digest;
    this.writeFile(digest, null, file);
    return digest;
  }

  /** Writes `data` (or copies `from`) to a temp file beside the destination and renames it into place. */
  private writeFile(digest: string, data: Buffer | string | null, from?: string): void {
    const dest = this.pathOf(digest);
    try {
      const shard = path.dirname(dest);
      if (!this.shards.has(shard)) {
        fs.mkdirSync(shard, { recursive: true });
        this.shards.add(shard);
      }
      const tmp = `${dest}.${randomBytes(6).toString('hex')}.tmp`;
      if (from !== undefined) {
        fs.copyFileSync(from, tmp);
        if (this.durable) { const fd = fs.openSync(tmp, 'r+'); try { fs.fsyncSync(fd); } finally { fs.closeSync(fd); } }
      } else if (this.durable) {
        const fd = fs.openSync(tmp, 'w');
        try {
          fs.writeSync(fd, typeof data === 'string' ? Buffer.from(data) : data!);
          fs.fsyncSync(fd);
        } finally {
          fs.closeSync(fd);
        }
      } else {
        fs.writeFileSync(tmp, data!);
      }
      fs.renameSync(tmp, dest);
      if (this.durable) {
        const dfd = fs.openSync(shard, 'r');
        try { fs.fsyncSync(dfd); } finally { fs.closeSync(dfd); }
      }
    } catch (err) {
      throw mapFsError(err, `storing blob ${digest}`);
    }
  }

  /** Reads and verifies a blob; a digest mismatch means on-disk corruption. The size is checked before reading. */
  get(digest: string): Buffer {
    let data: Buffer;
    const p = this.pathOf(digest);
    let fd: number;
    try {
      fd = fs.openSync(p, 'r');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw mapFsError(err, `reading blob ${digest}`);
      const row = this.smallRow(digest);
      if (!row) throw new IntegrityError(`blob ${digest} is missing`, { where: this.dir });
      if (digestOf(row) !== digest) throw new IntegrityError(`blob ${digest} is corrupt (content hash differs)`, { where: path.join(this.dir, 'small.db') });
      return row;
    }
    try {
      const size = fs.fstatSync(fd).size;
      if (size > this.maxBytes) throw overCapOnRead(digest, p, this.maxBytes);
      data = fs.readFileSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    if (digestOf(data) !== digest) throw new IntegrityError(`blob ${digest} is corrupt (content hash differs)`, { where: p });
    return data;
  }

  getText(digest: string): string {
    return this.get(digest).toString('utf8');
  }

  async *read(digest: string): AsyncIterable<Buffer> {
    const p = this.pathOf(digest);
    if (!fs.existsSync(p)) {
      yield this.get(digest); // a row of small.db, verified by get()
      return;
    }
    const h = createHash('sha256');
    let total = 0;
    for await (const chunk of fs.createReadStream(p, { highWaterMark: BLOB_CHUNK_BYTES }) as AsyncIterable<Buffer>) {
      total += chunk.length;
      if (total > this.maxBytes) throw overCapOnRead(digest, p, this.maxBytes);
      h.update(chunk);
      yield chunk;
    }
    if ('sha256:' + h.digest('hex') !== digest) throw new IntegrityError(`blob ${digest} is corrupt (content hash differs)`, { where: p });
  }

  /** Files first (shard by shard), then small.db's rows; temp files and anything not named like a blob are skipped. */
  async *list(): AsyncIterable<string> {
    for (const shard of fs.readdirSync(this.dir).filter((s) => SHARD_RE.test(s)).sort()) {
      for (const rest of fs.readdirSync(path.join(this.dir, shard)).filter((r) => REST_RE.test(r)).sort()) yield `sha256:${shard}${rest}`;
    }
    if (this.hasSmallDb()) yield* this.small().digests();
  }

  close(): void {
    this.smallStore?.close();
    this.smallStore = null;
  }
}
