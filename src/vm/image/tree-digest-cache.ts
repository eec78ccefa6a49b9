/**
 * `--image DIR` needs the tree's content digest (the cache key of its base disk) on every run, and
 * hashing a 331 MB rootfs took 4.8 s. The digest is kept against a stat fingerprint of the tree
 * (every entry's path, inode, type and mode, owner, size, mtime and ctime): walking the tree with
 * lstat costs milliseconds, and a changed file changes its ctime, which nobody can set back.
 */
import { createHash } from 'node:crypto';
import { lstatSync, readdirSync } from 'node:fs';
import { readFile, rename, writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { treeDigest } from './digest.js';

const KEEP = 64;
interface Entry { stat: string; content: string; usedAt: number }

/** Synchronous on purpose: lstatSync is ~10x cheaper per entry than the promise form, and a CLI waits anyway. */
export function statFingerprint(dir: string): string {
  const h = createHash('sha256');
  const walk = (rel: string): void => {
    const names = readdirSync(path.join(dir, rel)).sort();
    for (const n of names) {
      const r = rel ? `${rel}/${n}` : n;
      // plain numbers: bigint stats cost twice as much, and mtimeMs/ctimeMs keep sub-microsecond precision
      const st = lstatSync(path.join(dir, r));
      h.update(`${r}\0${st.ino}\0${st.mode}\0${st.uid}:${st.gid}\0${st.size}\0${st.mtimeMs}\0${st.ctimeMs}\n`);
      if (st.isDirectory()) walk(r);
    }
  };
  const top = lstatSync(dir);
  h.update(`${top.dev}\0${top.ino}\0${top.mode}\0${top.ctimeMs}\n`);
  walk('');
  return h.digest('hex');
}

/** The content digest of `dir`, from `cacheFile` when the tree's stat fingerprint has not changed. */
export async function cachedTreeDigest(dir: string, cacheFile: string): Promise<string> {
  const abs = path.resolve(dir);
  const stat = statFingerprint(abs);
  const all = await readFile(cacheFile, 'utf8').then((t) => JSON.parse(t) as Record<string, Entry>).catch(() => ({} as Record<string, Entry>));
  const hit = all[abs];
  if (hit && hit.stat === stat) return hit.content;
  const content = await treeDigest(abs);
  // A tree that changed while it was hashed must not be cached under the fingerprint of before.
  if (statFingerprint(abs) !== stat) return content;
  all[abs] = { stat, content, usedAt: Date.now() };
  const kept = Object.entries(all).sort((a, b) => b[1].usedAt - a[1].usedAt).slice(0, KEEP);
  await mkdir(path.dirname(cacheFile), { recursive: true });
  const tmp = `${cacheFile}.${process.pid}.tmp`;
  await writeFile(tmp, JSON.stringify(Object.fromEntries(kept)));
  await rename(tmp, cacheFile);
  return content;
}
