/**
 * The checks that extraction (`pack run`, `machine create --from`) and `pack verify` share, so that verify
 * refuses exactly what a run refuses: the caps on what an artifact may unpack to, and per entry its stored
 * bytes, what they decompress to (size and digest) and, for a disk, a qcow2 that opens no other file.
 */
import { createHash } from 'node:crypto';
import { open } from 'node:fs/promises';
import { ArtifactError } from '../errors/index.js';
import { hashRange, type Member } from './layout.js';
import type { ArtifactEntry, ArtifactManifest } from './manifest.js';
import { inspectQcow2, QCOW2_HEAD_BYTES } from './qcow2-check.js';
import { decompressRange, type ChunkSink } from './zstd.js';

export interface ExtractCaps {
  /** Most entries an artifact may hold. */
  maxEntries: number;
  /** Most decompressed bytes, all entries together. */
  maxTotalBytes: number;
}
export const defaultCaps: ExtractCaps = { maxEntries: 8, maxTotalBytes: 256 * 1024 ** 3 };

/** Refused before any byte is decompressed: declared sizes are what an honest artifact unpacks to. */
export function checkCaps(m: ArtifactManifest, caps: ExtractCaps, where: string): void {
  if (m.entries.length > caps.maxEntries) throw new ArtifactError(`artifact has ${m.entries.length} entries; the cap is ${caps.maxEntries}`, { where });
  const total = m.entries.reduce((s, e) => s + e.size, 0);
  if (total > caps.maxTotalBytes) {
    throw new ArtifactError(`artifact unpacks to ${total} bytes; the cap is ${caps.maxTotalBytes}`, { where, hint: 'Raise the cap only for artifacts you trust.' });
  }
}

/**
 * Why a disk entry whose content starts with `head` must not reach QEMU, or null. smol flattens every disk
 * it packs, so a disk with a backing or data file was made by another packer to read a host file.
 */
export function diskProblem(e: ArtifactEntry, head: Buffer): string | null {
  if (e.format !== 'qcow2') return `entry ${e.name} is a disk of format ${e.format}; disks are qcow2`;
  const q = inspectQcow2(head);
  if (q.hazard) {
    const why = /^names|^needs/.test(q.hazard) ? ': an artifact\'s disk must stand alone (smol flattens every disk it packs), or the guest would read that host file' : '';
    return `entry ${e.name} ${q.hazard}${why}`;
  }
  if (e.virtualSize !== undefined && q.facts!.virtualSize !== e.virtualSize) {
    return `entry ${e.name} declares a virtual size of ${e.virtualSize} bytes but its qcow2 header says ${q.facts!.virtualSize}`;
  }
  return null;
}

export interface EntryCheck {
  /** SHA-256 of the stored (compressed) bytes, as read. */
  stored: string;
  /** The first thing wrong with the entry, as a sentence naming it; null when it is sound. */
  problem: string | null;
}

/** Keeps a copy of the first `limit` bytes written through it. */
class HeadSink implements ChunkSink {
  private readonly parts: Buffer[] = [];
  private have = 0;
  constructor(private readonly limit: number, private readonly next?: ChunkSink) {}
  async write(chunk: Buffer): Promise<void> {
    if (this.have < this.limit) {
      const take = Buffer.from(chunk.subarray(0, this.limit - this.have));
      this.parts.push(take);
      this.have += take.length;
    }
    await this.next?.write(chunk);
  }
  bytes(): Buffer { return Buffer.concat(this.parts); }
}

const nullSink: ChunkSink = { write: async () => undefined };

/**
 * Decompresses one entry into `out` (verify passes none) and names the first thing wrong with it. The stored
 * bytes are hashed first, so damaged bytes never reach the zstd decoder and are named as damage. What is
 * written out is hashed again as it streams, so bytes changed after that first pass never land unchecked.
 */
export async function checkEntry(file: string, mem: Member, o: { out?: ChunkSink; onBytes?: (n: number) => void } = {}): Promise<EntryCheck> {
  const e = mem.entry;
  const corrupt = (actual: string) => `entry ${e.name} is corrupt: SHA-256 ${actual.slice(0, 16)}… but the manifest records ${e.stored.sha256.slice(0, 16)}…`;
  const before = await storedDigest(file, mem);
  if (before !== e.stored.sha256) return { stored: before, problem: corrupt(before) };
  const storedHash = o.out ? createHash('sha256') : undefined;
  const rawHash = createHash('sha256');
  const head = e.kind === 'disk' ? new HeadSink(QCOW2_HEAD_BYTES, o.out) : undefined;
  let written = 0;
  let failed: string | null = null;
  try {
    written = await decompressRange({ file, start: mem.dataOffset, length: mem.size, maxBytes: e.size, storedHash, rawHash, out: head ?? o.out ?? nullSink, what: e.name, onBytes: o.onBytes });
  } catch (err) {
    if (!(err instanceof ArtifactError)) throw err;
    failed = err.message;
  }
  if (failed !== null) return { stored: before, problem: failed };
  const stored = storedHash?.digest('hex') ?? before;
  let problem: string | null;
  if (stored !== e.stored.sha256) problem = corrupt(stored);
  else if (written !== e.size) problem = `entry ${e.name} declares ${e.size} bytes but decompresses to ${written}`;
  else if (rawHash.digest('hex') !== e.sha256) problem = `entry ${e.name} decompresses to content whose SHA-256 does not match the manifest`;
  else problem = head ? diskProblem(e, head.bytes()) : null;
  return { stored, problem };
}

async function storedDigest(file: string, mem: Member): Promise<string> {
  const fh = await open(file, 'r');
  try {
    return (await hashRange(fh, mem.dataOffset, mem.size)).toString('hex');
  } finally {
    await fh.close();
  }
}
