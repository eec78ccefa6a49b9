/**
 * The fixed 160-byte trailer that makes a .smolmachine seekable: read the last 160 bytes, then the
 * manifest at the offset it names, without touching the (possibly gigabytes of) entries.
 *
 *   0  magic "SMOLMACH"   8  format version u32le   12 flags u32le (bit 0: signed)
 *  16  manifest offset u64le   24 manifest length u64le   32 manifest SHA-256   64 artifact digest (layout.ts)
 *  96  ed25519 signature (64 bytes, zero if unsigned)
 *
 * The signature covers bytes 0..96, so it binds the digest, and through it every other byte of the file.
 * The manifest's own hash sits here too so that a damaged manifest is named as such before it is parsed.
 */
import { ArtifactError } from '../errors/index.js';
import { FORMAT_VERSION } from './manifest.js';

export const FOOTER_SIZE = 160;
export const FOOTER_SIGNED_SIZE = 96;
export const MAGIC = Buffer.from('SMOLMACH', 'ascii');
export const FLAG_SIGNED = 1;

export interface Footer {
  version: number;
  flags: number;
  manifestOffset: number;
  manifestLength: number;
  manifestSha256: Buffer;
  digest: Buffer;
  signature: Buffer;
}

export function encodeFooter(f: Omit<Footer, 'version'>): Buffer {
  const b = Buffer.alloc(FOOTER_SIZE);
  MAGIC.copy(b, 0);
  b.writeUInt32LE(FORMAT_VERSION, 8);
  b.writeUInt32LE(f.flags, 12);
  b.writeBigUInt64LE(BigInt(f.manifestOffset), 16);
  b.writeBigUInt64LE(BigInt(f.manifestLength), 24);
  f.manifestSha256.copy(b, 32);
  f.digest.copy(b, 64);
  f.signature.copy(b, 96);
  return b;
}

export function decodeFooter(b: Buffer, fileSize: number, where: string): Footer {
  if (fileSize < FOOTER_SIZE + 1024 || !b.subarray(0, 8).equals(MAGIC)) {
    throw new ArtifactError('not a .smolmachine artifact, or truncated: no footer magic at the end of the file', { where });
  }
  const version = b.readUInt32LE(8);
  if (version !== FORMAT_VERSION) {
    throw new ArtifactError(`unsupported artifact format version ${version} (this smol reads version ${FORMAT_VERSION})`, { where, hint: 'Upgrade smol, or repack the machine with this version.' });
  }
  const flags = b.readUInt32LE(12);
  if ((flags & ~FLAG_SIGNED) !== 0) throw new ArtifactError(`footer has unknown flags 0x${flags.toString(16)}`, { where });
  const manifestOffset = Number(b.readBigUInt64LE(16));
  const manifestLength = Number(b.readBigUInt64LE(24));
  if (manifestOffset !== 512 || manifestLength < 2 || manifestOffset + manifestLength > fileSize - FOOTER_SIZE) {
    throw new ArtifactError(`footer names an impossible manifest range ${manifestOffset}+${manifestLength}`, { where });
  }
  const signature = Buffer.from(b.subarray(96, 160));
  if (!(flags & FLAG_SIGNED) && signature.some((x) => x !== 0)) {
    throw new ArtifactError('footer carries signature bytes but is not flagged as signed', { where });
  }
  return { version, flags, manifestOffset, manifestLength, manifestSha256: Buffer.from(b.subarray(32, 64)), digest: Buffer.from(b.subarray(64, 96)), signature };
}
