/**
 * Reads a .smolmachine's structure strictly: the footer, the manifest, and one tar header per entry,
 * decoded by node-tar's Header. Only the exact layout the packer writes is accepted (regular files,
 * fixed names, sizes that agree with the manifest, the end-of-archive blocks, then the footer), so
 * links, escaping paths and extra members are refused before any byte is extracted.
 */
import { createHash } from 'node:crypto';
import type { FileHandle } from 'node:fs/promises';
import { Header } from 'tar';
import { ArtifactError } from '../errors/index.js';
import { decodeFooter, FOOTER_SIZE, type Footer } from './footer.js';
import { decodeManifest, MAX_MANIFEST_BYTES, type ArtifactEntry, type ArtifactManifest } from './manifest.js';

export const BLOCK = 512;
export const MANIFEST_MEMBER = 'manifest.json';
export const pad512 = (n: number): number => Math.ceil(n / BLOCK) * BLOCK;
export const storedName = (e: ArtifactEntry): string => `${e.name}.zst`;

export interface Member { entry: ArtifactEntry; dataOffset: number; size: number }
export interface Layout {
  fileSize: number;
  footer: Footer;
  footerOffset: number;
  manifestBytes: Buffer;
  manifest: ArtifactManifest;
  members: Member[];
}

export async function readAt(fh: FileHandle, offset: number, length: number): Promise<Buffer> {
  const b = Buffer.alloc(length);
  let done = 0;
  while (done < length) {
    const { bytesRead } = await fh.read(b, done, length - done, offset + done);
    if (bytesRead === 0) break;
    done += bytesRead;
  }
  return done === length ? b : b.subarray(0, done);
}

/** Footer and manifest only: what inspect needs, O(1) in the artifact's size. */
export async function readHead(fh: FileHandle, where: string): Promise<Pick<Layout, 'fileSize' | 'footer' | 'footerOffset' | 'manifestBytes' | 'manifest'>> {
  const fileSize = (await fh.stat()).size;
  const footerOffset = fileSize - FOOTER_SIZE;
  const footer = decodeFooter(await readAt(fh, Math.max(0, footerOffset), FOOTER_SIZE), fileSize, where);
  if (footer.manifestLength > MAX_MANIFEST_BYTES) throw new ArtifactError(`manifest of ${footer.manifestLength} bytes exceeds the ${MAX_MANIFEST_BYTES}-byte limit`, { where });
  const manifestBytes = await readAt(fh, footer.manifestOffset, footer.manifestLength);
  if (!createHash('sha256').update(manifestBytes).digest().equals(footer.manifestSha256)) {
    throw new ArtifactError('manifest.json does not match the SHA-256 recorded in the footer (altered or corrupt)', { where: `${where}: manifest.json` });
  }
  return { fileSize, footer, footerOffset, manifestBytes, manifest: decodeManifest(manifestBytes, `${where}: manifest.json`) };
}

/** node-tar's Header throws a plain Error on a number field it cannot decode (a bad base-256 lead byte). */
function decodeHeader(block: Buffer, off: number, where: string): Header {
  try {
    return new Header(block);
  } catch (err) {
    throw new ArtifactError(`tar header at offset ${off} has a field that cannot be decoded: ${(err as Error).message}`, { where, cause: err });
  }
}

/** Names the problem with a member precisely: the hostile-archive cases get their own words. */
function checkMember(h: Header, expectName: string | null, expectSize: number, where: string): void {
  const name = h.path ?? '';
  if (!h.cksumValid) throw new ArtifactError(`tar header checksum mismatch at member ${JSON.stringify(name)} (expected ${expectName})`, { where });
  if (name.startsWith('/')) throw new ArtifactError(`member ${JSON.stringify(name)} has an absolute path`, { where });
  if (name.split(/[\\/]/).includes('..')) throw new ArtifactError(`member ${JSON.stringify(name)} escapes the target with '..'`, { where });
  if (h.type === 'SymbolicLink' || h.type === 'Link') {
    throw new ArtifactError(`member ${JSON.stringify(name)} is a ${h.type === 'Link' ? 'hard link' : 'symlink'} to ${JSON.stringify(h.linkpath)}; links are not allowed`, { where });
  }
  if (h.type !== 'File' && h.type !== 'OldFile') throw new ArtifactError(`member ${JSON.stringify(name)} has type ${h.type}; only regular files are allowed`, { where });
  if (name !== expectName) {
    throw new ArtifactError(`unexpected member ${JSON.stringify(name)} ${expectName === null ? 'after the last manifest entry' : `where the manifest lists ${expectName}`}`, { where });
  }
  if (h.size !== expectSize) throw new ArtifactError(`member ${name} declares ${h.size} bytes but the manifest says ${expectSize}`, { where: `${where}: ${name}` });
}

export async function readLayout(fh: FileHandle, where: string): Promise<Layout> {
  const head = await readHead(fh, where);
  const limit = head.footerOffset;
  const headerAt = async (off: number): Promise<Header> => {
    if (off + BLOCK > limit) throw new ArtifactError(`truncated: tar header at ${off} runs into the footer`, { where });
    return decodeHeader(await readAt(fh, off, BLOCK), off, where);
  };
  checkMember(await headerAt(0), MANIFEST_MEMBER, head.footer.manifestLength, where);
  let off = BLOCK + pad512(head.footer.manifestLength);
  const members: Member[] = [];
  for (const entry of head.manifest.entries) {
    checkMember(await headerAt(off), storedName(entry), entry.stored.size, where);
    const dataOffset = off + BLOCK;
    off = dataOffset + pad512(entry.stored.size);
    if (off > limit) throw new ArtifactError(`truncated: entry ${entry.name} runs past the end of the archive`, { where: `${where}: ${entry.name}` });
    members.push({ entry, dataOffset, size: entry.stored.size });
  }
  const tail = await readAt(fh, off, Math.max(0, Math.min(limit - off, 2 * BLOCK)));
  if (tail.length >= BLOCK && tail.subarray(0, BLOCK).some((x) => x !== 0)) checkMember(decodeHeader(tail.subarray(0, BLOCK), off, where), null, 0, where);
  if (off + 2 * BLOCK !== limit || tail.some((x) => x !== 0)) {
    throw new ArtifactError(`archive does not end where the footer begins (${limit - off} bytes between the last entry and the footer, expected ${2 * BLOCK} zero bytes)`, { where });
  }
  return { ...head, members };
}

/** SHA-256 of a byte range; the next read is in flight (libuv thread) while this chunk is hashed (main thread). */
export async function hashRange(fh: FileHandle, start: number, length: number, onChunk?: (n: number) => void): Promise<Buffer> {
  const h = createHash('sha256');
  const size = Math.min(4 << 20, Math.max(length, 1));
  const bufs = [Buffer.allocUnsafe(size), Buffer.allocUnsafe(size)];
  const end = start + length;
  const readAtPos = (buf: Buffer, pos: number) => fh.read(buf, 0, Math.min(size, end - pos), pos);
  let pos = start;
  let pending = pos < end ? readAtPos(bufs[0], pos) : null;
  for (let i = 0; pending; i++) {
    const { bytesRead, buffer } = await pending;
    if (bytesRead === 0) throw new ArtifactError(`truncated: file ends at ${pos}, inside a range that should reach ${end}`);
    pos += bytesRead;
    pending = pos < end ? readAtPos(bufs[(i + 1) % 2], pos) : null;
    h.update(buffer.subarray(0, bytesRead));
    onChunk?.(bytesRead);
  }
  return h.digest();
}

/**
 * The artifact digest: SHA-256 of every byte before the footer, with each entry's data region replaced
 * by that region's own SHA-256. Every byte is hashed exactly once (verify runs at hash speed), and an
 * entry's digest can be checked on its own (random access) while the whole stays bound together.
 */
export async function frameDigest(fh: FileHandle, members: readonly Member[], footerOffset: number, entryDigests: readonly Buffer[]): Promise<Buffer> {
  const h = createHash('sha256');
  let pos = 0;
  for (const [i, m] of members.entries()) {
    h.update(await readAt(fh, pos, m.dataOffset - pos));
    h.update(entryDigests[i]);
    pos = m.dataOffset + m.size;
  }
  h.update(await readAt(fh, pos, footerOffset - pos));
  return h.digest();
}
