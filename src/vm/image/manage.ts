/**
 * Listing and removing what the image cache holds: built bases (images/<id>/, every source kind),
 * pulled references and their blobs. A base that a machine still uses is never removed: one of this $SMOL_HOME,
 * or of another home that shares the assets dir (homes.ts).
 */
import { existsSync } from 'node:fs';
import { lstat, readFile, readdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { ConflictError, NotFoundError } from '../../errors/index.js';
import { parseImageReference, sweepDeadTemps } from '../../registry/index.js';
import { assetsHome, dataPaths, smolHome } from '../../util/paths.js';
import { openMachineDb } from '../store/db.js';
import { MachineStore } from '../store/machines.js';
import type { ImageKind } from './base-cache.js';
import { blobsOf, listRefs, readRef, removeRef, storePaths, type RefRecord } from './store.js';
import { machinesOfOtherHomes } from './homes.js';
import { defaultImageId } from './resolve.js';
import { sweepStaleTemps } from './tmp.js';

export interface ImageEntry {
  /** The reference for pulled images; the source path (or `default`) otherwise. */
  ref: string;
  kind: ImageKind;
  id: string;
  /** Pulled images: the platform manifest's digest. */
  digest?: string;
  platform?: string;
  /** Bytes on disk: the base plus, for pulls, the blobs it needs. */
  size: number;
  built: boolean;
  usedBy: string[];
  createdAt?: string;
}

interface Base { id: string; kind: ImageKind; source: string; dir: string; size: number; createdAt: string }

async function diskBytes(p: string): Promise<number> {
  const st = await lstat(p).catch(() => null);
  if (!st) return 0;
  if (!st.isDirectory()) return st.blocks * 512;
  let n = 0;
  for (const c of await readdir(p).catch(() => [] as string[])) n += await diskBytes(path.join(p, c));
  return n;
}

async function listBases(assets: string): Promise<Base[]> {
  const dir = storePaths(assets).images;
  const out: Base[] = [];
  for (const name of (await readdir(dir).catch(() => [] as string[])).sort()) {
    const meta = await readFile(path.join(dir, name, 'image.json'), 'utf8').catch(() => null);
    if (!meta) continue; // blobs/, refs/, initramfs/, temp builds
    const m = JSON.parse(meta) as { id: string; kind: ImageKind; source: string };
    const st = await stat(path.join(dir, name, 'image.json'));
    out.push({ id: name, kind: m.kind, source: m.source, dir: path.join(dir, name), size: await diskBytes(path.join(dir, name)), createdAt: st.mtime.toISOString() });
  }
  return out;
}

/**
 * image id → machines whose disks sit on it: this $SMOL_HOME's by name, then those of other homes that share
 * the assets dir (homes.ts).
 */
export function machinesByImage(home = smolHome(), assets = assetsHome()): Map<string, string[]> {
  const map = machinesOfOtherHomes(assets, home);
  const file = dataPaths(home).machineDb;
  if (!existsSync(file)) return map;
  const db = openMachineDb(file);
  try {
    for (const m of new MachineStore(db).list()) if (m.imageId) map.set(m.imageId, [m.name, ...(map.get(m.imageId) ?? [])]);
  } finally {
    db.close();
  }
  return map;
}

export interface ImageScope { assets?: string; home?: string }
const scope = (o: ImageScope) => ({ assets: o.assets ?? assetsHome(), home: o.home ?? smolHome() });

export async function listImages(o: ImageScope = {}): Promise<ImageEntry[]> {
  const { assets, home } = scope(o);
  const used = machinesByImage(home, assets);
  const bases = new Map((await listBases(assets)).map((b) => [b.id, b]));
  const out: ImageEntry[] = [];
  for (const r of await listRefs(assets)) {
    const b = bases.get(r.imageId);
    const blobBytes = await blobsBytes(assets, blobsOf(r));
    out.push({ ref: r.ref, kind: 'registry', id: r.imageId, digest: r.manifestDigest, platform: r.platform, size: blobBytes + (b?.size ?? 0), built: !!b, usedBy: used.get(r.imageId) ?? [], createdAt: r.pulledAt });
  }
  const pulledIds = new Set(out.map((e) => e.id));
  for (const b of bases.values()) {
    if (pulledIds.has(b.id)) continue;
    out.push({ ref: b.source, kind: b.kind, id: b.id, size: b.size, built: true, usedBy: used.get(b.id) ?? [], createdAt: b.createdAt });
  }
  return out;
}

async function blobsBytes(assets: string, digests: string[]): Promise<number> {
  let n = 0;
  for (const d of new Set(digests)) n += await diskBytes(path.join(storePaths(assets).blobs, d.slice(7)));
  return n;
}

export interface RemoveResult { removed: string[]; bytes: number }

/** Refuses (unless forced) to remove images that machines sit on, naming them. */
function refuseIfUsed(ids: string[], ref: string, used: Map<string, string[]>, force?: boolean): void {
  const users = ids.flatMap((id) => used.get(id) ?? []);
  if (!users.length || force) return;
  const foreign = users.some((u) => u.includes(' (of '));
  throw new ConflictError(`image ${ref} is used by machine${users.length > 1 ? 's' : ''} ${users.join(', ')}`, {
    where: ref, hint: foreign ? 'Remove those machines first: SMOL_HOME=HOME smol machine rm ID, for the home named beside each.' : 'Remove those machines first (smol machine rm NAME).',
  });
}

async function removeBases(bases: Base[], ref: string, used: Map<string, string[]>, force?: boolean): Promise<RemoveResult> {
  refuseIfUsed(bases.map((b) => b.id), ref, used, force);
  const result: RemoveResult = { removed: [], bytes: 0 };
  for (const b of bases) {
    await rm(b.dir, { recursive: true, force: true });
    result.removed.push(b.id);
    result.bytes += b.size;
  }
  return result;
}

/** `smol image rm`: a pulled reference (its base and the blobs nothing else needs), a base by id, or by its source. */
export async function removeImage(refOrId: string, o: ImageScope & { force?: boolean } = {}): Promise<RemoveResult> {
  const { assets, home } = scope(o);
  const used = machinesByImage(home, assets);
  const bases = await listBases(assets);
  const byId = bases.find((b) => b.id === refOrId);
  // what `image ls` shows as the ref of a built image (`--image DIR`, a docker or OCI archive): its source,
  // as given or relative to here; a tree edited since has one base per version, all listed under it
  const bySource = byId ? [] : bases.filter((b) => b.kind !== 'registry' && (b.source === refOrId || b.source === path.resolve(refOrId)));
  if (bySource.length) return removeBases(bySource, refOrId, used, o.force);
  let rec: RefRecord | null = null;
  if (!byId) {
    let canonical: string;
    try { canonical = parseImageReference(refOrId).canonical; } catch { canonical = refOrId; }
    rec = await readRef(assets, canonical);
    if (!rec) throw new NotFoundError(`no cached image ${JSON.stringify(refOrId)}`, { where: refOrId, hint: 'List cached images with: smol image ls' });
  }
  const id = byId?.id ?? rec!.imageId;
  refuseIfUsed([id], refOrId, used, o.force);
  const result: RemoveResult = { removed: [], bytes: 0 };
  const refs = await listRefs(assets);
  const dropRefs = rec ? [rec] : refs.filter((r) => r.imageId === id);
  for (const r of dropRefs) { await removeRef(assets, r.ref); result.removed.push(r.ref); }
  const remaining = refs.filter((r) => !dropRefs.some((d) => d.ref === r.ref));
  const base = bases.find((b) => b.id === id);
  if (base && !remaining.some((r) => r.imageId === id)) {
    result.bytes += base.size;
    await rm(base.dir, { recursive: true, force: true });
    result.removed.push(id);
  }
  const r2 = await collectBlobs(assets, remaining, false, new Set(dropRefs.flatMap(blobsOf).map((d) => d.slice(7))));
  result.bytes += r2.bytes;
  result.removed.push(...r2.removed);
  return result;
}

/** Deletes blobs no remaining reference needs (of `only`, when given). */
async function collectBlobs(assets: string, keep: RefRecord[], dryRun: boolean, only?: Set<string>): Promise<RemoveResult & { sizes: number[] }> {
  const needed = new Set(keep.flatMap(blobsOf).map((d) => d.slice(7)));
  const dir = storePaths(assets).blobs;
  const out = { removed: [] as string[], bytes: 0, sizes: [] as number[] };
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    if (name.startsWith('.') || needed.has(name) || (only && !only.has(name))) continue;
    const n = await diskBytes(path.join(dir, name));
    out.bytes += n;
    out.sizes.push(n);
    out.removed.push(`sha256:${name}`);
    if (!dryRun) await rm(path.join(dir, name), { force: true });
  }
  return out;
}

export interface PruneResult { dryRun: boolean; removed: { what: string; kind: string; bytes: number }[]; bytes: number }

/**
 * Removes what can go: bases of rootfs directories and tarballs that no machine uses (rebuilt from the
 * source on next use), bases of older default images, pulled images no reference points at any more,
 * blobs nothing needs, and temp files of killed pulls and builds. With `all`, also every pulled image
 * that no machine uses. Nothing a machine here still uses is touched.
 */
export async function pruneImages(o: ImageScope & { dryRun?: boolean; all?: boolean } = {}): Promise<PruneResult> {
  const { assets, home } = scope(o);
  const dryRun = !!o.dryRun;
  const used = machinesByImage(home, assets);
  const result: PruneResult = { dryRun, removed: [], bytes: 0 };
  const add = (what: string, kind: string, bytes: number) => { result.removed.push({ what, kind, bytes }); result.bytes += bytes; };
  let refs = await listRefs(assets);
  if (o.all) {
    for (const r of refs.filter((x) => !used.has(x.imageId))) {
      add(r.ref, 'reference', 0);
      if (!dryRun) await removeRef(assets, r.ref);
    }
    refs = refs.filter((x) => used.has(x.imageId));
  }
  const referenced = new Set(refs.map((r) => r.imageId));
  const currentDefault = await defaultImageId().catch(() => null);
  for (const b of await listBases(assets)) {
    if (used.has(b.id) || referenced.has(b.id)) continue;
    if (b.kind === 'default' && (b.id === currentDefault || currentDefault === null)) continue;
    add(b.id, `${b.kind} base (${b.source})`, b.size);
    if (!dryRun) await rm(b.dir, { recursive: true, force: true });
  }
  const blobs = await collectBlobs(assets, refs, dryRun);
  blobs.removed.forEach((d, i) => add(d, 'blob', blobs.sizes[i]));
  if (!dryRun) {
    await sweepDeadTemps(storePaths(assets).blobs);
    await sweepStaleTemps(storePaths(assets).images);
  }
  return result;
}
