/**
 * packArtifact: files in, one .smolmachine out. The output is an uncompressed, deterministic tar
 * (node-tar, portable headers, mtime 0, uid/gid 0, fixed member order) whose members are the manifest
 * first and then each entry compressed on its own with zstd, followed by the 128-byte footer.
 * Per-entry compression (not a zstd-compressed tar) is what lets verify run at hash speed without
 * decompressing and lets one entry be read or extracted without the others (see docs/artifact.md).
 */
import { createHash, createPublicKey } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { chmod, mkdtemp, open, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import * as tar from 'tar';
import { ArtifactError, NotFoundError, ValidationError, mapFsError } from '../errors/index.js';
import { commitFile, tempSibling, writeFileAtomic } from './atomic.js';
import { flattenDisk } from './disk.js';
import { encodeFooter, FLAG_SIGNED, FOOTER_SIGNED_SIZE } from './footer.js';
import { BLOCK, frameDigest, MANIFEST_MEMBER, pad512, storedName, type Member } from './layout.js';
import { contentDigest, encodeManifest, FORMAT_VERSION, hostArch, resumeStateSchema, type ArtifactEntry, type ArtifactManifest, type EntryKind } from './manifest.js';
import { loadPrivateKey, signatureInfo, signBytes } from './sign.js';
import { smolVersion } from './version.js';
import { compressFile } from './zstd.js';

export const packInputSchema = z.object({
  disk: z.string().min(1).optional(),
  kernel: z.string().min(1),
  initrd: z.string().min(1),
  /** Warm state from a paused machine: its RAM file and its device-state migration stream. */
  memory: z.object({ ram: z.string().min(1), deviceState: z.string().min(1), resume: resumeStateSchema.omit({ memoryBytes: true }) }).strict().optional(),
  out: z.string().min(1),
  createdAt: z.union([z.date(), z.string().datetime()]).optional(),
  signKey: z.string().min(1).optional(),
  arch: z.enum(['x86_64', 'aarch64']).optional(),
  kernelIdentity: z.string().min(1).optional(),
  kernelCmdline: z.string().optional(),
  imageIdentity: z.string().min(1).optional(),
  cpus: z.number().int().min(1).max(256).default(1),
  memoryMiB: z.number().int().min(16).default(256),
  entrypoint: z.array(z.string()).optional(),
  env: z.record(z.string(), z.string()).optional(),
  workdir: z.string().optional(),
  compressionLevel: z.number().int().min(1).max(19).default(3),
  force: z.boolean().default(false),
}).strict();
export type PackInput = z.input<typeof packInputSchema>;

export interface PackProgress { phase: 'flatten' | 'compress' | 'write' | 'sign' | 'done'; entry?: string; bytes?: number }
export interface PackResult { out: string; manifest: ArtifactManifest; size: number; digest: string; signed: boolean }

interface Planned { kind: EntryKind; name: string; source: string; format: ArtifactEntry['format']; flatten?: boolean }

async function fileDigest(file: string): Promise<{ sha256: string; size: number }> {
  const h = createHash('sha256');
  let size = 0;
  for await (const chunk of createReadStream(file, { highWaterMark: 4 << 20 }) as AsyncIterable<Buffer>) {
    h.update(chunk);
    size += chunk.length;
  }
  return { sha256: h.digest('hex'), size };
}

async function kernelFormat(file: string): Promise<'elf' | 'bzimage'> {
  const fh = await open(file, 'r');
  try {
    const b = Buffer.alloc(0x206);
    await fh.read(b, 0, b.length, 0);
    if (b.subarray(0, 4).equals(Buffer.from([0x7f, 0x45, 0x4c, 0x46]))) return 'elf';
    if (b.subarray(0x202, 0x206).toString('latin1') === 'HdrS') return 'bzimage';
  } finally {
    await fh.close();
  }
  throw new ArtifactError(`kernel ${file} is neither an ELF vmlinux nor a bzImage`, { where: file });
}

async function mustExist(file: string, what: string): Promise<void> {
  const s = await stat(file).catch(() => null);
  if (!s?.isFile()) throw new NotFoundError(`${what} ${file} does not exist or is not a regular file`, { where: file });
}

export async function packArtifact(input: PackInput, onProgress: (p: PackProgress) => void = () => undefined): Promise<PackResult> {
  const o = packInputSchema.parse(input);
  const plan: Planned[] = [];
  if (o.disk) plan.push({ kind: 'disk', name: 'disk.qcow2', source: o.disk, format: 'qcow2', flatten: true });
  plan.push({ kind: 'kernel', name: 'kernel', source: o.kernel, format: await kernelFormatChecked(o.kernel) });
  plan.push({ kind: 'initrd', name: 'initrd', source: o.initrd, format: 'cpio' });
  if (o.memory) {
    plan.push({ kind: 'memory', name: 'memory.ram', source: o.memory.ram, format: 'qemu-ram' });
    plan.push({ kind: 'device-state', name: 'device-state', source: o.memory.deviceState, format: 'qemu-migration' });
  }
  for (const p of plan) await mustExist(p.source, p.kind);
  if (o.memory) {
    // QEMU maps the RAM file as the guest's memory: its size is the machine's memory size, exactly
    const ramBytes = (await stat(o.memory.ram)).size;
    if (ramBytes !== o.memoryMiB * 2 ** 20) {
      throw new ValidationError('memory state does not match the machine size', [{ path: 'memoryMiB', message: `the RAM file holds ${ramBytes} bytes, but the machine is declared with ${o.memoryMiB} MiB (${o.memoryMiB * 2 ** 20} bytes)` }], { where: o.memory.ram });
    }
  }
  const key = o.signKey ? await loadPrivateKey(o.signKey) : undefined;

  const out = path.resolve(o.out);
  if (!(await stat(path.dirname(out)).catch(() => null))?.isDirectory()) {
    throw new NotFoundError(`output directory ${path.dirname(out)} does not exist`, { where: out });
  }
  const stage = await mkdtemp(path.join(path.dirname(out), `.${path.basename(out)}.stage-`)).catch((err) => { throw mapFsError(err, `creating a staging directory next to ${out}`); });
  const tmpOut = tempSibling(out);
  try {
    const entries: ArtifactEntry[] = [];
    for (const p of plan) entries.push(await stageEntry(p, stage, o.compressionLevel, onProgress));
    const createdAt = o.createdAt === undefined ? new Date() : new Date(o.createdAt);
    const manifest: ArtifactManifest = {
      formatVersion: FORMAT_VERSION,
      smolVersion: smolVersion(),
      createdAt: createdAt.toISOString(),
      guest: { platform: 'linux', arch: o.arch ?? (hostArch() as 'x86_64') },
      kernel: { identity: o.kernelIdentity ?? `sha256:${entries.find((e) => e.kind === 'kernel')!.sha256}`, cmdline: o.kernelCmdline },
      image: { identity: o.imageIdentity ?? `sha256:${(entries.find((e) => e.kind === 'disk') ?? entries.find((e) => e.kind === 'initrd'))!.sha256}` },
      resources: { cpus: o.cpus, memoryMiB: o.memoryMiB },
      entrypoint: o.entrypoint,
      env: o.env,
      workdir: o.workdir,
      resume: o.memory ? { ...o.memory.resume, memoryBytes: entries.find((e) => e.kind === 'memory')!.size } : undefined,
      entries,
      contentDigest: contentDigest(entries),
      signature: key ? signatureInfo(createPublicKey(key)) : undefined,
    };
    const manifestBytes = encodeManifest(manifest);
    await writeFileAtomic(path.join(stage, MANIFEST_MEMBER), manifestBytes);
    const members = [MANIFEST_MEMBER, ...entries.map(storedName)];
    // modes come from the filesystem, so pin them: the bytes must not depend on the umask
    for (const m of members) await chmod(path.join(stage, m), 0o644);
    onProgress({ phase: 'write' });
    await tar.c({ file: tmpOut, cwd: stage, portable: true, mtime: new Date(0), noDirRecurse: true, strict: true }, members);

    const fh = await open(tmpOut, 'r+');
    try {
      let off = BLOCK + pad512(manifestBytes.length);
      const layout: Member[] = entries.map((entry) => {
        const m = { entry, dataOffset: off + BLOCK, size: entry.stored.size };
        off = m.dataOffset + pad512(m.size);
        return m;
      });
      const tarSize = (await fh.stat()).size;
      if (tarSize !== off + 2 * BLOCK) throw new ArtifactError(`internal: tar is ${tarSize} bytes, expected ${off + 2 * BLOCK}`);
      const digest = await frameDigest(fh, layout, tarSize, entries.map((e) => Buffer.from(e.stored.sha256, 'hex')));
      const manifestSha256 = createHash('sha256').update(manifestBytes).digest();
      const fields = { flags: key ? FLAG_SIGNED : 0, manifestOffset: BLOCK, manifestLength: manifestBytes.length, manifestSha256, digest };
      const unsigned = encodeFooter({ ...fields, signature: Buffer.alloc(64) });
      if (key) onProgress({ phase: 'sign' });
      const signature = key ? signBytes(key, unsigned.subarray(0, FOOTER_SIGNED_SIZE)) : Buffer.alloc(64);
      const footer = encodeFooter({ ...fields, signature });
      await fh.write(footer, 0, footer.length, tarSize);
      await fh.sync();
      await commitFile(tmpOut, out, !o.force);
      onProgress({ phase: 'done', bytes: tarSize + footer.length });
      return { out, manifest, size: tarSize + footer.length, digest: digest.toString('hex'), signed: !!key };
    } finally {
      await fh.close();
    }
  } catch (err) {
    throw mapFsError(err, `packing ${out}`);
  } finally {
    await rm(tmpOut, { force: true });
    await rm(stage, { recursive: true, force: true });
  }
}

async function kernelFormatChecked(file: string): Promise<'elf' | 'bzimage'> {
  await mustExist(file, 'kernel');
  return kernelFormat(file);
}

async function stageEntry(p: Planned, stage: string, level: number, onProgress: (p: PackProgress) => void): Promise<ArtifactEntry> {
  let source = p.source;
  let virtualSize: number | undefined;
  if (p.flatten) {
    onProgress({ phase: 'flatten', entry: p.name });
    source = path.join(stage, p.name);
    virtualSize = (await flattenDisk(p.source, source)).virtualSize;
  }
  onProgress({ phase: 'compress', entry: p.name });
  const storedPath = path.join(stage, `${p.name}.zst`);
  const [raw] = await Promise.all([fileDigest(source), compressFile(source, storedPath, level)]);
  const stored = await fileDigest(storedPath);
  if (p.flatten) await rm(source, { force: true });
  onProgress({ phase: 'compress', entry: p.name, bytes: stored.size });
  return {
    name: p.name, kind: p.kind, format: p.format, size: raw.size, sha256: raw.sha256, virtualSize,
    stored: { compression: 'zstd', size: stored.size, sha256: stored.sha256 },
  };
}
