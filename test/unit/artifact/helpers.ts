/**
 * Fixtures for artifact tests: small real inputs (an ELF-headed kernel, an initramfs, a qcow2 chain
 * written with qemu-io) and a crafter that assembles hostile artifacts from raw tar headers (node-tar's
 * Header) with a correct footer, so each test trips exactly the check it targets.
 */
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Header } from 'tar';
import { run } from '../../../src/util/exec.js';
import { contentDigest, encodeManifest, type ArtifactManifest } from '../../../src/artifact/manifest.js';
import { encodeFooter, FOOTER_SIZE } from '../../../src/artifact/footer.js';
import { compressFile } from '../../../src/artifact/zstd.js';

export async function tempDir(prefix = 'smol-artifact-'): Promise<{ dir: string; cleanup: () => Promise<void> }> {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  return { dir, cleanup: () => rm(dir, { recursive: true, force: true }) };
}

export interface Inputs { kernel: string; initrd: string; disk?: string }

/** kernel: ELF magic + bytes; initrd: bytes; disk (optional): qcow2 base with data + overlay with more. */
export async function makeInputs(dir: string, opts: { disk?: boolean; kernelBytes?: number } = {}): Promise<Inputs> {
  const kernel = path.join(dir, 'vmlinux');
  await writeFile(kernel, Buffer.concat([Buffer.from([0x7f, 0x45, 0x4c, 0x46]), randomBytes(opts.kernelBytes ?? 20_000), Buffer.alloc(30_000)]));
  const initrd = path.join(dir, 'initrd.cpio');
  await writeFile(initrd, Buffer.concat([Buffer.from('070701'), randomBytes(5_000)]));
  if (!opts.disk) return { kernel, initrd };
  const base = path.join(dir, 'base.qcow2');
  const disk = path.join(dir, 'overlay.qcow2');
  await run('qemu-img', ['create', '-q', '-f', 'qcow2', base, '64M']);
  await run('qemu-io', ['-c', 'write -P 0x5a 0 1M', '-c', 'write -P 0x11 8M 512k', base]);
  await run('qemu-img', ['create', '-q', '-f', 'qcow2', '-F', 'qcow2', '-b', base, disk]);
  await run('qemu-io', ['-c', 'write -P 0xab 512k 1M', '-c', 'write -z 8M 64k', disk]);
  return { kernel, initrd, disk };
}

export const sha256 = (b: Buffer): Buffer => createHash('sha256').update(b).digest();

export interface CraftMember { name: string; type?: 'File' | 'SymbolicLink' | 'Link' | 'Directory'; data?: Buffer; linkpath?: string; headerSize?: number }

/** A tar (node-tar headers) of the manifest and members, then a correct unsigned footer per the format spec. */
export function craftArtifact(manifest: unknown, members: CraftMember[], opts: { rawManifest?: Buffer } = {}): Buffer {
  const manifestBytes = opts.rawManifest ?? encodeManifest(manifest as ArtifactManifest);
  const parts: Buffer[] = [];
  const frame = createHash('sha256');
  const push = (b: Buffer, asData: boolean) => {
    parts.push(b);
    frame.update(asData ? sha256(b) : b);
  };
  const all: CraftMember[] = [{ name: 'manifest.json', data: manifestBytes }, ...members];
  for (const [i, m] of all.entries()) {
    const data = m.data ?? Buffer.alloc(0);
    const h = new Header({ path: m.name, type: m.type ?? 'File', size: m.headerSize ?? (m.type && m.type !== 'File' ? 0 : data.length), mode: 0o644, mtime: new Date(0), linkpath: m.linkpath });
    h.encode();
    push(h.block!, false);
    if (data.length) {
      push(data, i > 0);
      push(Buffer.alloc((512 - (data.length % 512)) % 512), false);
    }
  }
  push(Buffer.alloc(1024), false);
  const footer = encodeFooter({ flags: 0, manifestOffset: 512, manifestLength: manifestBytes.length, manifestSha256: sha256(manifestBytes), digest: frame.digest(), signature: Buffer.alloc(64) });
  return Buffer.concat([...parts, footer]);
}

/** The stored members of a real artifact, by tar member name, for reuse in crafted ones. */
export async function storedMembers(file: string, manifest: ArtifactManifest): Promise<Map<string, Buffer>> {
  const b = await readFile(file);
  const out = new Map<string, Buffer>();
  const manifestLength = Number(b.readBigUInt64LE(b.length - FOOTER_SIZE + 24));
  let off = 512 + Math.ceil(manifestLength / 512) * 512;
  for (const e of manifest.entries) {
    out.set(`${e.name}.zst`, b.subarray(off + 512, off + 512 + e.stored.size));
    off += 512 + Math.ceil(e.stored.size / 512) * 512;
  }
  return out;
}

export function withDigest(m: ArtifactManifest): ArtifactManifest {
  return { ...m, contentDigest: contentDigest(m.entries) };
}

/** Everything in dir except the names given: extraction must leave no temp dirs or partial files behind. */
export async function leftovers(dir: string, except: string[] = []): Promise<string[]> {
  return (await readdir(dir)).filter((n) => !except.includes(n));
}

/**
 * The bytes of an artifact like `manifest`'s whose disk entry is `diskBytes` exactly as given: an attacker's
 * packer that skips flattening (a qcow2 with a backing or data file survives). The other entries are reused.
 */
export async function craftWithDisk(dir: string, manifest: ArtifactManifest, stored: Map<string, Buffer>, diskBytes: Buffer): Promise<{ bytes: Buffer; manifest: ArtifactManifest }> {
  const raw = path.join(await mkdtemp(path.join(dir, 'disk-')), 'disk.qcow2');
  await writeFile(raw, diskBytes);
  await compressFile(raw, `${raw}.zst`);
  const zst = await readFile(`${raw}.zst`);
  const disk = {
    name: 'disk.qcow2', kind: 'disk' as const, format: 'qcow2' as const, size: diskBytes.length, sha256: sha256(diskBytes).toString('hex'),
    stored: { compression: 'zstd' as const, size: zst.length, sha256: sha256(zst).toString('hex') },
  };
  const m = withDigest({ ...manifest, entries: [disk, ...manifest.entries.filter((e) => e.kind !== 'disk')] });
  const members = m.entries.map((e) => ({ name: `${e.name}.zst`, data: e.kind === 'disk' ? zst : stored.get(`${e.name}.zst`)! }));
  return { bytes: craftArtifact(m, members), manifest: m };
}
