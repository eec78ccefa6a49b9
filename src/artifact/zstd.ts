/**
 * zstd through Debian's `zstd` binary (Node 20 has none built in). Compression always runs with
 * worker threads (-T0): zstd's multi-threaded output is identical for any worker count ≥ 1, so packed
 * bytes do not depend on the host's core count (single-threaded mode would differ).
 */
import { createReadStream } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import { Transform } from 'node:stream';
import type { Hash } from 'node:crypto';
import { run, spawn } from '../util/exec.js';
import { ArtifactError } from '../errors/index.js';

export async function compressFile(input: string, output: string, level = 3): Promise<void> {
  await run('zstd', ['-q', '-f', '--no-progress', '-T0', `-${level}`, input, '-o', output]);
}

const SPARSE_BLOCK = 4096;
const ZERO = Buffer.alloc(SPARSE_BLOCK);

/** Where decompressed bytes go, in order. */
export interface ChunkSink { write(chunk: Buffer): Promise<void> }

/** Writes a stream at increasing offsets, leaving 4 KiB blocks of zeros as holes (disk images and RAM are mostly zeros). */
export class SparseWriter implements ChunkSink {
  pos = 0;
  constructor(private readonly fh: FileHandle) {}
  async write(chunk: Buffer): Promise<void> {
    let i = 0;
    while (i < chunk.length) {
      // runs start and end on absolute 4 KiB boundaries so holes line up with filesystem blocks
      let j = i;
      let zero = true;
      const runStart = i;
      while (j < chunk.length) {
        const next = Math.min(chunk.length, j + (SPARSE_BLOCK - ((this.pos + j) % SPARSE_BLOCK)));
        const isZero = next - j === SPARSE_BLOCK ? chunk.subarray(j, next).equals(ZERO) : isAllZero(chunk, j, next);
        if (j === runStart) zero = isZero;
        else if (isZero !== zero) break;
        j = next;
      }
      if (!zero) await this.fh.write(chunk, runStart, j - runStart, this.pos + runStart);
      i = j;
    }
    this.pos += chunk.length;
  }
  async finish(): Promise<void> {
    await this.fh.truncate(this.pos);
  }
}
function isAllZero(b: Buffer, from: number, to: number): boolean {
  for (let k = from; k < to; k++) if (b[k] !== 0) return false;
  return true;
}

export interface DecompressOptions {
  file: string;
  start: number;
  length: number;
  /** The entry's declared decompressed size: output beyond it is a lie (or a bomb) and aborts at once. */
  maxBytes: number;
  /** Hashes the compressed bytes as they are fed to zstd (what was decompressed is what was hashed). */
  storedHash?: Hash;
  rawHash: Hash;
  out: ChunkSink;
  what: string;
  onBytes?: (n: number) => void;
}

/** Streams one stored entry through `zstd -d`, hashing both sides and refusing output past maxBytes. */
export async function decompressRange(o: DecompressOptions): Promise<number> {
  const { child } = await spawn('zstd', ['-d', '-c', '-q', '--no-progress'], { stdio: ['pipe', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => { stderr += d.toString(); });
  const tap = new Transform({
    transform(chunk: Buffer, _enc, cb) { o.storedHash?.update(chunk); o.onBytes?.(chunk.length); cb(null, chunk); },
  });
  const feed = pipeline(createReadStream(o.file, { start: o.start, end: o.start + o.length - 1, highWaterMark: 1 << 20 }), tap, child.stdin!)
    .catch((err: NodeJS.ErrnoException) => { if (err.code !== 'EPIPE' && err.code !== 'ERR_STREAM_PREMATURE_CLOSE') throw err; });
  let total = 0;
  try {
    for await (const chunk of child.stdout! as AsyncIterable<Buffer>) {
      total += chunk.length;
      if (total > o.maxBytes) {
        throw new ArtifactError(`entry ${o.what} decompresses past its declared size of ${o.maxBytes} bytes (a lying size or a decompression bomb)`, { where: o.what });
      }
      o.rawHash.update(chunk);
      await o.out.write(chunk);
    }
    await feed;
    const r = await child;
    if (r.exitCode !== 0) throw new ArtifactError(`entry ${o.what} is not valid zstd data: ${stderr.trim().split('\n').pop() ?? `exit ${r.exitCode}`}`, { where: o.what });
  } catch (err) {
    child.kill('SIGKILL');
    await Promise.allSettled([child, feed]);
    throw err;
  }
  return total;
}
