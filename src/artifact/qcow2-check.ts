/**
 * Whether a qcow2 image stands alone: no backing file and no external data file, the two header fields
 * through which QEMU opens another file (any host file the header names) when it opens the image. The
 * header is read here rather than by `qemu-img info`, so an untrusted image never reaches QEMU's block
 * layer to be judged. The rules follow QEMU 7.2's qcow2_do_open: all it reads to decide what else to open
 * (header, header extensions, backing file name) lies in the first cluster, at most 2 MiB.
 */
import type { FileHandle } from 'node:fs/promises';

const MAGIC = 0x514649fb; // "QFI\xfb"
const MAX_CLUSTER_BITS = 21;
const MAX_BACKING_NAME = 1023;
/** Enough leading bytes of any qcow2 for qcow2Hazard: the largest first cluster plus a backing file name. */
export const QCOW2_HEAD_BYTES = (1 << MAX_CLUSTER_BITS) + MAX_BACKING_NAME + 1;
const EXT_END = 0;
const EXT_DATA_FILE = 0x44415441; // "DATA": the external data file's name
const INCOMPAT_DATA_FILE = 1n << 2n;
/** dirty, corrupt, external data file, compression type, extended L2: the bits QEMU 7.2 knows. */
const INCOMPAT_KNOWN = 0b11111n;

export interface Qcow2Facts { version: number; clusterBits: number; virtualSize: number }

/**
 * What makes `head` (an image's first QCOW2_HEAD_BYTES, or all of a shorter one) unsafe to hand to QEMU,
 * as the end of a sentence about the image; null when it is a qcow2 that opens no other file.
 */
export function qcow2Hazard(head: Buffer): string | null {
  return inspectQcow2(head).hazard;
}

export function inspectQcow2(head: Buffer): { hazard: string | null; facts?: Qcow2Facts } {
  const bad = (hazard: string) => ({ hazard });
  if (head.length < 72 || head.readUInt32BE(0) !== MAGIC) return bad('is not a qcow2 image');
  const version = head.readUInt32BE(4);
  if (version !== 2 && version !== 3) return bad(`is a qcow2 image of version ${version} (QEMU opens versions 2 and 3)`);
  const clusterBits = head.readUInt32BE(20);
  if (clusterBits < 9 || clusterBits > MAX_CLUSTER_BITS) return bad(`has a qcow2 cluster size of 2^${clusterBits} bytes (QEMU opens 2^9 to 2^21)`);
  const cluster = 1 << clusterBits;
  const backingOffset = head.readBigUInt64BE(8);
  const backingSize = head.readUInt32BE(16);
  // any backing reference is refused, even one QEMU would reject as malformed: no smol-packed disk has one
  if (backingOffset !== 0n || backingSize !== 0) return bad(`names the backing file ${backingName(head, backingOffset, backingSize)}`);
  let headerLength = 72;
  let needsDataFile = false;
  if (version === 3) {
    if (head.length < 104) return bad('is a truncated qcow2 image (its version 3 header is cut short)');
    const incompat = head.readBigUInt64BE(72);
    if (incompat & ~INCOMPAT_KNOWN) return bad(`uses qcow2 incompatible features 0x${incompat.toString(16)} that QEMU 7.2 does not know`);
    needsDataFile = (incompat & INCOMPAT_DATA_FILE) !== 0n;
    headerLength = head.readUInt32BE(100);
    if (headerLength < 104 || headerLength > cluster) return bad(`has a qcow2 header length of ${headerLength} bytes (104 to the cluster size ${cluster})`);
  }
  // header extensions run from the header's end to the first end-marker, within the first cluster
  const end = Math.min(cluster, head.length);
  for (let off = headerLength; off + 8 <= end;) {
    const type = head.readUInt32BE(off);
    const len = head.readUInt32BE(off + 4);
    if (type === EXT_END) break;
    const dataEnd = off + 8 + len;
    if (dataEnd > end) return bad(`has a qcow2 header extension 0x${type.toString(16)} of ${len} bytes that runs past the first cluster`);
    if (type === EXT_DATA_FILE) return bad(`names the external data file ${JSON.stringify(head.toString('utf8', off + 8, dataEnd))}`);
    off = dataEnd + ((8 - (len % 8)) % 8);
  }
  if (needsDataFile) return bad('needs an external data file (qcow2 incompatible feature bit 2)');
  return { hazard: null, facts: { version, clusterBits, virtualSize: Number(head.readBigUInt64BE(24)) } };
}

function backingName(head: Buffer, offset: bigint, size: number): string {
  const at = Number(offset);
  if (size > 0 && size <= MAX_BACKING_NAME && at + size <= head.length) return JSON.stringify(head.toString('utf8', at, at + size));
  return `of ${size} bytes at offset ${offset}`;
}

/** The leading bytes qcow2Hazard needs from an image file: the first cluster, as its header states it. */
export async function readQcow2Head(fh: FileHandle): Promise<Buffer> {
  const first = Buffer.alloc(512);
  const { bytesRead } = await fh.read(first, 0, first.length, 0);
  const bits = bytesRead >= 24 ? first.readUInt32BE(20) : 0;
  const want = bits >= 9 && bits <= MAX_CLUSTER_BITS ? (1 << bits) + MAX_BACKING_NAME + 1 : first.length;
  if (want <= bytesRead) return first.subarray(0, bytesRead);
  const head = Buffer.alloc(want);
  let done = 0;
  while (done < want) {
    const r = await fh.read(head, done, want - done, done);
    if (r.bytesRead === 0) break;
    done += r.bytesRead;
  }
  return head.subarray(0, done);
}
