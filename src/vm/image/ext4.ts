/**
 * Root disks: an ext4 filesystem built from a directory with `mkfs.ext4 -d` (no mount, no root needed for
 * the build itself), converted to a read-only qcow2 base that every machine shares; each machine writes to
 * its own qcow2 overlay on top.
 */
import { createHash, randomBytes } from 'node:crypto';
import { chmod, copyFile, mkdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../util/exec.js';
import { convertRawToQcow2, createOverlayFile } from '../qemu/img.js';
import { sweepStaleTemps } from './tmp.js';
import { NotFoundError, mapFsError } from '../../errors/index.js';

const MiB = 1024 * 1024;

/** Room for the tree plus what a machine will write; the file is sparse, so unused space costs nothing. */
export function ext4SizeFor(treeBytes: number): number {
  return Math.max(1024 * MiB, Math.ceil((treeBytes * 1.5 + 256 * MiB) / MiB) * MiB);
}

export async function treeBytes(dir: string): Promise<number> {
  const r = await run('du', ['-sb', '--apparent-size', dir]);
  return Number(r.stdout.split(/\s/)[0]) || 0;
}

/** Build `outQcow2` from `srcDir`. Writes next to the target and renames, so readers never see a partial base. */
export async function buildExt4Qcow2(srcDir: string, outQcow2: string, opts: { sizeBytes?: number; label?: string } = {}): Promise<void> {
  const size = opts.sizeBytes ?? ext4SizeFor(await treeBytes(srcDir));
  const raw = `${outQcow2}.${process.pid}.raw`;
  const tmpQcow = `${outQcow2}.${process.pid}.tmp`;
  try {
    await run('mkfs.ext4', ['-q', '-F', '-d', srcDir, '-L', opts.label ?? 'smolroot', '-E', 'root_owner=0:0', raw, `${Math.floor(size / 1024)}k`]);
    await convertRawToQcow2(raw, tmpQcow);
    await chmod(tmpQcow, 0o444);
    await rename(tmpQcow, outQcow2);
  } catch (e) {
    throw mapFsError(e, `building disk image ${path.basename(outQcow2)}`);
  } finally {
    await rm(raw, { force: true });
    await rm(tmpQcow, { force: true });
  }
}

/** A per-machine copy-on-write overlay over a shared base (about 25 ms). `sizeBytes` may grow the disk. */
/**
 * A qcow2 overlay on `basePath`. With `templateDir`, the first overlay for a base (and size) is made by
 * qemu-img and kept there as a template, and later ones are copies of it: an empty overlay holds nothing
 * but its header (the absolute backing path, the size) and tables, and copying it takes well under a
 * millisecond where a qemu-img run costs ~40 ms on every `smol run --image` and `pack run`.
 */
export async function createOverlay(basePath: string, overlayPath: string, opts: { sizeBytes?: number; templateDir?: string } = {}): Promise<void> {
  const base = path.resolve(basePath);
  const st = await stat(base).catch(() => null);
  if (!st) throw new NotFoundError(`creating overlay failed: base image ${basePath} does not exist`);
  const make = (out: string) => createOverlayFile(base, out, { sizeBytes: opts.sizeBytes || undefined });
  if (!opts.templateDir) return make(overlayPath);
  const id = createHash('sha256').update(JSON.stringify([base, st.size, st.mtimeMs, st.ino, opts.sizeBytes ?? null])).digest('hex').slice(0, 32);
  const tpl = path.join(opts.templateDir, `${id}.qcow2`);
  if (!(await stat(tpl).catch(() => null))) {
    await mkdir(opts.templateDir, { recursive: true });
    // a maker killed with -9 between qemu-img and the rename leaves its temp file: swept once stale
    await sweepStaleTemps(opts.templateDir);
    // unique per call, not per process: `smol serve` makes machines concurrently in one process
    const tmp = path.join(opts.templateDir, `.tmp-${id}.${process.pid}.${randomBytes(4).toString('hex')}.qcow2`);
    await make(tmp);
    await rename(tmp, tpl); // concurrent creators write identical files: the last rename wins harmlessly
  }
  await copyFile(tpl, overlayPath).catch((e) => { throw mapFsError(e, `creating overlay ${overlayPath}`); });
}
