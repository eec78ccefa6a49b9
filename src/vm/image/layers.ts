/**
 * Applying image layers (OCI image-spec "layer" and docker save) onto a rootfs directory, with node-tar.
 * Whiteouts: `.wh.NAME` deletes NAME from lower layers; `.wh..wh..opq` empties its directory of lower-layer
 * content. Both apply to lower layers only, so each layer is read twice: once to apply its whiteouts, once
 * to extract. Nothing may land outside the rootfs: `..` paths and writes through symlinks are refused.
 */
import { lstat, mkdir, readdir, rm, symlink } from 'node:fs/promises';
import path from 'node:path';
import * as tar from 'tar';
import { ValidationError, mapFsError } from '../../errors/index.js';

const WHITEOUT = '.wh.';
const OPAQUE = '.wh..wh..opq';

/** A layer path as a list of safe components, or null when it would leave the root. */
export function safeComponents(p: string): string[] | null {
  const parts = p.replace(/\\/g, '/').split('/').filter((x) => x !== '' && x !== '.');
  if (parts.some((x) => x === '..')) return null;
  return parts;
}

/** True when no existing component of `parts` (below root) is a symlink: deleting or writing there stays inside. */
async function noSymlinkOnPath(root: string, parts: string[]): Promise<boolean> {
  let cur = root;
  for (const p of parts) {
    cur = path.join(cur, p);
    const st = await lstat(cur).catch(() => null);
    if (!st) return true;
    if (st.isSymbolicLink()) return false;
  }
  return true;
}

export interface LayerStats { files: number; whiteouts: number; opaque: number; skippedDevices: number }

export async function applyLayer(root: string, layerFile: string, label = path.basename(layerFile)): Promise<LayerStats> {
  const stats: LayerStats = { files: 0, whiteouts: 0, opaque: 0, skippedDevices: 0 };
  const bad: string[] = [];
  const whiteouts: string[][] = [];
  const opaques: string[][] = [];
  await tar.t({
    file: layerFile,
    onReadEntry: (e) => {
      const parts = safeComponents(e.path);
      if (!parts) { bad.push(`${e.path}: path leaves the root`); return; }
      const base = parts[parts.length - 1] ?? '';
      if (base === OPAQUE) opaques.push(parts.slice(0, -1));
      else if (base.startsWith(WHITEOUT)) whiteouts.push([...parts.slice(0, -1), base.slice(WHITEOUT.length)]);
    },
  });
  if (bad.length) throw escapeError(label, bad);
  for (const dir of opaques) {
    if (!(await noSymlinkOnPath(root, dir))) throw escapeError(label, [`${dir.join('/')}/${OPAQUE}: through a symlink`]);
    const abs = path.join(root, ...dir);
    for (const child of await readdir(abs).catch(() => [] as string[])) await rm(path.join(abs, child), { recursive: true, force: true });
    stats.opaque++;
  }
  for (const parts of whiteouts) {
    if (!parts[parts.length - 1] || !(await noSymlinkOnPath(root, parts.slice(0, -1)))) throw escapeError(label, [`${parts.join('/')}: whiteout through a symlink or of the root`]);
    await rm(path.join(root, ...parts), { recursive: true, force: true });
    stats.whiteouts++;
  }
  // node-tar would rewrite absolute symlink targets as relative ones, changing their meaning inside the
  // image, so symlinks are made here after the layer's files; their targets are never followed by us.
  const links: { parts: string[]; target: string }[] = [];
  await tar.x({
    file: layerFile,
    cwd: root,
    preserveOwner: process.getuid?.() === 0,
    chmod: true,
    processUmask: 0,
    onwarn: (code, message, data) => {
      if (code === 'TAR_ENTRY_INFO') return;
      bad.push(`${String((data as { path?: string }).path ?? (data as { entry?: { path?: string } }).entry?.path ?? '')}: ${message}`);
    },
    filter: (p, e) => {
      const entry = e as tar.ReadEntry;
      const parts = safeComponents(p);
      const base = parts?.[parts.length - 1] ?? '';
      if (!parts || base.startsWith(WHITEOUT)) return false;
      if (entry.type === 'SymbolicLink') { links.push({ parts, target: String(entry.linkpath) }); return false; }
      if (entry.type === 'CharacterDevice' || entry.type === 'BlockDevice' || entry.type === 'FIFO') { stats.skippedDevices++; return false; }
      stats.files++;
      return true;
    },
  }).catch((e) => { throw mapFsError(e, `extracting layer ${label}`); });
  if (bad.length) throw escapeError(label, bad);
  for (const l of links) {
    if (l.parts.length === 0 || !(await noSymlinkOnPath(root, l.parts.slice(0, -1)))) throw escapeError(label, [`${l.parts.join('/')}: symlink through a symlink`]);
    const dest = path.join(root, ...l.parts);
    await mkdir(path.dirname(dest), { recursive: true });
    const st = await lstat(dest).catch(() => null);
    if (st) await rm(dest, { recursive: !st.isSymbolicLink() && st.isDirectory(), force: true });
    await symlink(l.target, dest);
    stats.files++;
  }
  return stats;
}

function escapeError(label: string, problems: string[]): ValidationError {
  return new ValidationError(`image layer ${label} is unsafe or malformed`, problems.slice(0, 20).map((m) => ({ path: label, message: m })), {
    hint: 'smol refuses layers whose entries would be written outside the image root.',
  });
}
