/**
 * Applying image layers (OCI image-spec "layer" and docker save) onto a rootfs directory, with node-tar.
 * Whiteouts: `.wh.NAME` deletes NAME from lower layers; `.wh..wh..opq` empties its directory of lower-layer
 * content. Both apply to lower layers only, so each layer is read twice: once to check it and apply its
 * whiteouts, once to extract. Nothing may land outside the rootfs: `..` paths, whiteouts of `.` or `..`,
 * and writes or links through symlinks are refused (65), and an image may write only so much (UnpackBudget).
 */
import { createReadStream } from 'node:fs';
import { lstat, mkdir, readdir, rm, symlink } from 'node:fs/promises';
import path from 'node:path';
import * as tar from 'tar';
import { UserError, ValidationError, mapFsError } from '../../errors/index.js';
import { IMAGE_MAX_FILES, IMAGE_MAX_GIB } from '../limits.js';

const WHITEOUT = '.wh.';
const OPAQUE = '.wh..wh..opq';
/** `.wh..wh.*` names other than OPAQUE are aufs bookkeeping (hard-link stores): skipped, as containerd does. */
const WHITEOUT_META = '.wh..wh.';

/** A layer path as a list of safe components, or null when it would leave the root. */
export function safeComponents(p: string): string[] | null {
  const parts = p.replace(/\\/g, '/').split('/').filter((x) => x !== '' && x !== '.');
  if (parts.some((x) => x === '..')) return null;
  return parts;
}

/** The name a `.wh.NAME` entry hides, or null when NAME names no entry of its directory (``, `.`, `..`). */
function whiteoutTarget(base: string): string | null {
  const name = base.slice(WHITEOUT.length);
  return name === '' || name === '.' || name === '..' ? null : name;
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

/**
 * What the layers of one image may still write, shared by its layers and spent as each is checked: a
 * gzip layer of a few MB can declare terabytes of zeros or millions of empty files.
 */
export interface UnpackBudget { bytes: number; entries: number }

function positiveInt(env: NodeJS.ProcessEnv, name: string, dflt: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return dflt;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 1) throw new UserError(`${name} must be a whole number of at least 1, got "${raw}"`, { where: name, hint: `Unset it for the default (${dflt}).` });
  return n;
}

/** A fresh budget for one image: SMOL_IMAGE_MAX_GIB of file content and SMOL_IMAGE_MAX_FILES entries (defaults in vm/limits.ts). */
export function unpackBudget(env: NodeJS.ProcessEnv = process.env): UnpackBudget {
  return { bytes: positiveInt(env, 'SMOL_IMAGE_MAX_GIB', IMAGE_MAX_GIB) * 2 ** 30, entries: positiveInt(env, 'SMOL_IMAGE_MAX_FILES', IMAGE_MAX_FILES) };
}

/**
 * Reads every header of a layer without writing anything; `onEntry` returns a reason to stop (the file is
 * then closed at once, so a bomb costs no more than the budget's worth of decompression).
 */
function scanLayer(file: string, onEntry: (e: tar.ReadEntry) => string | null): Promise<string | null> {
  return new Promise((resolve, reject) => {
    let stopped = false;
    const src = createReadStream(file);
    const parser = new tar.Parser({
      onReadEntry: (e) => {
        e.resume();
        if (stopped) return;
        const why = onEntry(e);
        if (why) { stopped = true; src.destroy(); resolve(why); }
      },
    });
    src.on('error', reject);
    parser.on('end', () => resolve(null));
    src.pipe(parser);
  });
}

export interface LayerStats { files: number; whiteouts: number; opaque: number; skippedDevices: number }

export async function applyLayer(root: string, layerFile: string, label = path.basename(layerFile), budget: UnpackBudget = unpackBudget()): Promise<LayerStats> {
  const stats: LayerStats = { files: 0, whiteouts: 0, opaque: 0, skippedDevices: 0 };
  const bad: string[] = [];
  const whiteouts: string[][] = [];
  const opaques: string[][] = [];
  const over = await scanLayer(layerFile, (e) => {
    budget.entries--;
    budget.bytes -= Math.max(0, e.size ?? 0);
    if (budget.entries < 0) return 'more entries than SMOL_IMAGE_MAX_FILES allows an image';
    if (budget.bytes < 0) return `more file content than SMOL_IMAGE_MAX_GIB allows an image (at ${e.path}, ${e.size} bytes)`;
    const parts = safeComponents(e.path);
    if (!parts) { bad.push(`${e.path}: path leaves the root`); return null; }
    if (e.type === 'Link' && !safeComponents(String(e.linkpath))) { bad.push(`${e.path}: hard link to ${String(e.linkpath)}, outside the root`); return null; }
    const base = parts[parts.length - 1] ?? '';
    if (base === OPAQUE) opaques.push(parts.slice(0, -1));
    else if (base.startsWith(WHITEOUT_META)) return null;
    else if (base.startsWith(WHITEOUT)) {
      const target = whiteoutTarget(base);
      if (target === null) bad.push(`${e.path}: a whiteout must name a file in its directory, not ${JSON.stringify(base.slice(WHITEOUT.length))}`);
      else whiteouts.push([...parts.slice(0, -1), target]);
    }
    return null;
  }).catch((e: unknown) => { throw layerReadError(e, `reading layer ${label}`, label); });
  if (over) {
    throw new ValidationError(`image layer ${label} is too large: ${over}`, [{ path: label, message: over }], {
      hint: 'smol stops unpacking an image past its limits; raise SMOL_IMAGE_MAX_GIB or SMOL_IMAGE_MAX_FILES (docs/images.md) only for an image you trust.',
    });
  }
  if (bad.length) throw escapeError(label, bad);
  for (const dir of opaques) {
    if (!(await noSymlinkOnPath(root, dir))) throw escapeError(label, [`${dir.join('/')}/${OPAQUE}: through a symlink`]);
    const abs = path.join(root, ...dir);
    for (const child of await readdir(abs).catch(() => [] as string[])) await rm(path.join(abs, child), { recursive: true, force: true });
    stats.opaque++;
  }
  for (const parts of whiteouts) {
    if (!(await noSymlinkOnPath(root, parts.slice(0, -1)))) throw escapeError(label, [`${parts.join('/')}: whiteout through a symlink`]);
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
  }).catch((e: unknown) => { throw layerReadError(e, `extracting layer ${label}`, label); });
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

/** node-tar rejects a malformed archive with a plain Error coded TAR_*: the layer's fault (65), not smol's (70). */
function layerReadError(e: unknown, what: string, label: string): unknown {
  const code = (e as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && code.startsWith('TAR_')) {
    return new ValidationError(`image layer ${label} is not a valid tar archive: ${(e as Error).message}`, [{ path: label, message: `${code}: ${(e as Error).message}` }], {
      hint: 'The image or registry sent a corrupt layer; pull or export it again.',
    });
  }
  return mapFsError(e, what);
}

function escapeError(label: string, problems: string[]): ValidationError {
  return new ValidationError(`image layer ${label} is unsafe or malformed`, problems.slice(0, 20).map((m) => ({ path: label, message: m })), {
    hint: 'smol refuses layers whose entries would be written outside the image root.',
  });
}
