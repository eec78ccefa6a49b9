/**
 * Content-addressed storage for large payloads (prompts, outputs, traces, trajectories). The ledger stores
 * only the digest; the bytes live at blobs/<aa>/<rest>. Writes go to a temp file and are renamed, so a
 * reader never sees a partial blob and a crash leaves at most an orphaned temp file. With `durable` (power-
 * loss durability, SMOL_LEDGER_SYNC=full) the file and its directory are fsynced before put() returns;
 * otherwise a blob survives the death of the writing process, which is what the ledger promises by default.
 * Blobs up to INLINE_MAX_BYTES go to rows of blobs/small.db instead (small-blobs.ts), unless `inline` is off;
 * fileOf() gives any blob a file path when a program needs one.
 */
import { createHash, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { IntegrityError } from './errors.js';
import { INLINE_MAX_BYTES, SmallBlobs } from './small-blobs.js';
import { mapFsError } from '../errors/index.js';

const DIGEST_RE = /^sha256:[0-9a-f]{64}$/;

export function digestOf(data: Buffer | string): string {
  return 'sha256:' + createHash('sha256').update(data).digest('hex');
}

export function isDigest(s: string): boolean {
  return DIGEST_RE.test(s);
}

export class BlobStore {
  private smallStore: SmallBlobs | null = null;

  constructor(readonly dir: string, private readonly durable = false, private readonly o: { inline?: boolean } = {}) {
    fs.mkdirSync(dir, { recursive: true });
  }

  private get inline(): boolean { return this.o.inline !== false; }
  private small(): SmallBlobs {
    this.smallStore ??= new SmallBlobs(this.dir, this.durable);
    return this.smallStore;
  }
  /** The row for a small blob; a store that never held one is not created just to look (`ledger check`). */
  private smallRow(digest: string): Buffer | null {
    if (!this.inline || (!this.smallStore && !fs.existsSync(path.join(this.dir, 'small.db')))) return null;
    return this.small().get(digest);
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

  close(): void {
    this.smallStore?.close();
    this.smallStore = null;
  }

  /** Shard directories known to exist, so a put costs one write and one rename. */
  private readonly shards = new Set<string>();

  put(data: Buffer | string): string {
    if (this.inline && Buffer.byteLength(data) <= INLINE_MAX_BYTES) return this.putMany([data])[0];
    const digest = digestOf(data);
    if (fs.existsSync(this.pathOf(digest))) return digest;
    this.writeFile(digest, data);
    return digest;
  }

  private writeFile(digest: string, data: Buffer | string): void {
    const dest = this.pathOf(digest);
    try {
      const shard = path.dirname(dest);
      if (!this.shards.has(shard)) {
        fs.mkdirSync(shard, { recursive: true });
        this.shards.add(shard);
      }
      const tmp = `${dest}.${randomBytes(6).toString('hex')}.tmp`;
      if (this.durable) {
        const fd = fs.openSync(tmp, 'w');
        try {
          fs.writeSync(fd, typeof data === 'string' ? Buffer.from(data) : data);
          fs.fsyncSync(fd);
        } finally {
          fs.closeSync(fd);
        }
      } else {
        fs.writeFileSync(tmp, data);
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

  /** Reads and verifies a blob; a digest mismatch means on-disk corruption. */
  get(digest: string): Buffer {
    let data: Buffer;
    try {
      data = fs.readFileSync(this.pathOf(digest));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      const row = this.smallRow(digest);
      if (!row) throw new IntegrityError(`blob ${digest} is missing`, { where: this.dir });
      data = row;
    }
    if (digestOf(data) !== digest) throw new IntegrityError(`blob ${digest} is corrupt (content hash differs)`, { where: this.pathOf(digest) });
    return data;
  }

  getText(digest: string): string {
    return this.get(digest).toString('utf8');
  }
}
