/**
 * The entries of a fatbin container (what nvcc embeds and cudart hands to cuLibraryLoadData): a
 * 16-byte header, then entries of kind PTX or ELF (cubin), each a header and its payload, for one
 * SM architecture. nvcc compresses PTX payloads by default (CUDA 13: zstd), SASS only with
 * -compress-all.
 */
import { GpuError } from '../../../errors/index.js';
import { filterSync } from '../../../util/exec.js';
import { LAYOUT_FAILED } from './types.js';

export const FATBIN_MAGIC = 0xba55ed50;
const KIND = { ptx: 1, elf: 2 } as const;
// Entry flags: 0x2000 marks an LZ4 payload (older toolkits), 0x8000 a zstd one (CUDA 13's nvcc).
const FLAG_LZ4 = 0x2000, FLAG_ZSTD = 0x8000;

export interface FatbinEntry {
  kind: 'ptx' | 'elf' | 'other';
  /** SM architecture, e.g. 90 for sm_90 / compute_90. */
  arch: number;
  /** Compression codec of the payload, or null when it is stored as is. */
  compression: 'lz4' | 'zstd' | null;
  /** The payload as stored (compressed bytes when `compression` is set). */
  data: Buffer;
  /** Where the entry's header starts in the container (its flags are at +0x28). */
  headerAt: number;
}

const bad = (why: string) => new GpuError(`${LAYOUT_FAILED}malformed fatbin: ${why}`);

/** A cubin or PTX is a few MiB at most: a payload that inflates past this is refused, not read. */
const MAX_INFLATED = 256 << 20;

/**
 * An entry's payload as the driver would see it. zstd payloads (CUDA 13's default for PTX) are standard zstd
 * frames: Debian's `zstd`, which `smol setup` installs, inflates them (Node 20 has no zstd). LZ4 payloads
 * (older toolkits) are raw blocks that no installed tool reads: refused with the reason.
 */
export function entryPayload(e: FatbinEntry, what: string): Buffer {
  if (!e.compression) return e.data;
  if (e.compression === 'lz4') throw new GpuError(`${LAYOUT_FAILED}${what} is compressed (lz4), which the daemon does not read`);
  try {
    return filterSync('zstd', ['-d', '-c', '-q'], e.data, { maxBytes: MAX_INFLATED });
  } catch (err) {
    throw new GpuError(`${LAYOUT_FAILED}${what} (zstd) does not decompress: ${(err as Error).message}`);
  }
}

/** Lists a fatbin's entries. Throws GpuError when the container's own sizes do not add up. */
export function fatbinEntries(buf: Buffer): FatbinEntry[] {
  if (buf.length < 16 || buf.readUInt32LE(0) !== FATBIN_MAGIC) throw bad('no fatbin header');
  const start = buf.readUInt16LE(6), end = start + Number(buf.readBigUInt64LE(8));
  if (end > buf.length) throw bad('container larger than the image');
  const out: FatbinEntry[] = [];
  for (let p = start; p < end;) {
    if (p + 64 > end) throw bad(`entry header at ${p} is cut short`);
    const kind = buf.readUInt16LE(p), headerSize = buf.readUInt32LE(p + 4);
    const stored = Number(buf.readBigUInt64LE(p + 8)); // payload bytes reserved, padded to 8
    const compressedSize = buf.readUInt32LE(p + 0x10);
    const arch = buf.readUInt32LE(p + 0x1c), flags = Number(buf.readBigUInt64LE(p + 0x28));
    if (headerSize < 64 || p + headerSize + stored > end) throw bad(`entry at ${p} extends past the container`);
    const compression = flags & FLAG_ZSTD ? 'zstd' : flags & FLAG_LZ4 ? 'lz4' : null;
    const length = compression && compressedSize > 0 && compressedSize <= stored ? compressedSize : stored;
    out.push({
      kind: kind === KIND.ptx ? 'ptx' : kind === KIND.elf ? 'elf' : 'other',
      arch, compression, data: buf.subarray(p + headerSize, p + headerSize + length), headerAt: p,
    });
    p += headerSize + stored;
  }
  return out;
}
