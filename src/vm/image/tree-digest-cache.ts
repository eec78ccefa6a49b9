/**
 * `--image DIR` needs the tree's content digest (the cache key of its base disk) on every run, and
 * hashing a 331 MB rootfs took 4.8 s. The digest is kept against a stat fingerprint of the tree
 * (every entry's path, inode, type and mode, owner, size, mtime and ctime; tree-fingerprint.ts): a
 * listing costs tens of milliseconds, and a changed file changes its ctime, which nobody can set back.
 *
 * Even that listing is CPU a run would wait for, so a run may take the cached digest on trust and list the
 * tree while its machine boots (`speculativeTreeDigest`), or from the CLI's launch (cli/prefetch.ts); the
 * run checks the answer before the user's command starts.
 */
import { readFile, rename, writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { treeDigest } from './digest.js';
import { sweepStaleTemps } from './tmp.js';
import { earlyFingerprint, treeFingerprint } from './tree-fingerprint.js';

const KEEP = 64;
interface Entry { stat: string; content: string; usedAt: number }
/** The listing the CLI started at launch (cli/prefetch.ts), as good as one made now, else a new one. */
const listing = (abs: string) => earlyFingerprint(abs) ?? treeFingerprint(abs);

async function readCache(cacheFile: string): Promise<Record<string, Entry>> {
  return readFile(cacheFile, 'utf8').then((t) => JSON.parse(t) as Record<string, Entry>).catch(() => ({}));
}

/** The content digest of `dir`, from `cacheFile` when the tree's stat fingerprint has not changed. */
export async function cachedTreeDigest(dir: string, cacheFile: string): Promise<string> {
  const abs = path.resolve(dir);
  const stat = await listing(abs);
  const all = await readCache(cacheFile);
  const hit = all[abs];
  if (stat && hit && hit.stat === stat) return hit.content;
  // an unlistable tree is hashed (which names what it cannot read) and never cached
  const content = await treeDigest(abs);
  // A tree that changed while it was hashed must not be cached under the fingerprint of before.
  if (!stat || (await treeFingerprint(abs)) !== stat) return content;
  all[abs] = { stat, content, usedAt: Date.now() };
  const kept = Object.entries(all).sort((a, b) => b[1].usedAt - a[1].usedAt).slice(0, KEEP);
  await mkdir(path.dirname(cacheFile), { recursive: true });
  // a writer killed with -9 before its rename leaves its temp file: swept once stale
  await sweepStaleTemps(path.dirname(cacheFile));
  const tmp = path.join(path.dirname(cacheFile), `.tmp-${path.basename(cacheFile)}.${process.pid}`);
  await writeFile(tmp, JSON.stringify(Object.fromEntries(kept)));
  await rename(tmp, cacheFile);
  return content;
}

export interface SpeculativeDigest {
  /** The digest the tree had when it was last hashed. */
  content: string;
  /** Lists the tree (in a subprocess): true only if its stat fingerprint is unchanged. Never rejects. */
  confirm(): Promise<boolean>;
}

/**
 * The digest `dir` had when it was last hashed, at once, or null when the tree was never hashed. Whoever
 * uses `content` must await `confirm()` before anything the user can observe depends on it, and start over
 * with `cachedTreeDigest` when it answers false.
 */
export async function speculativeTreeDigest(dir: string, cacheFile: string): Promise<SpeculativeDigest | null> {
  const abs = path.resolve(dir);
  const hit = (await readCache(cacheFile))[abs];
  if (!hit) return null;
  return { content: hit.content, confirm: () => listing(abs).then((fp) => fp === hit.stat) };
}
