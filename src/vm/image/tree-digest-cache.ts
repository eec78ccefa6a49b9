/**
 * `--image DIR` needs the tree's content digest (the cache key of its base disk) on every run, and
 * hashing a 331 MB rootfs took 4.8 s. The digest is kept against a stat fingerprint of the tree
 * (every entry's path, inode, type and mode, owner, size, mtime and ctime): walking the tree with
 * lstat costs milliseconds, and a changed file changes its ctime, which nobody can set back.
 *
 * Even that walk was 110–300 ms of a ~900 ms `smol run` on a Debian rootfs (11k entries), so a run may
 * take the cached digest on trust and walk the tree on another thread while its machine boots
 * (`speculativeTreeDigest`); the run checks the answer before the user's command starts.
 */
import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import { readFile, rename, writeFile, mkdir } from 'node:fs/promises';
import path from 'node:path';
import { treeDigest } from './digest.js';

const KEEP = 64;
interface Entry { stat: string; content: string; usedAt: number }

/**
 * CommonJS source, so one walk serves both the caller's thread and a worker thread without a loader (the
 * same code runs under tsx and from dist/). Synchronous on purpose: lstatSync is ~10x cheaper per entry
 * than the promise form. Plain numbers: bigint stats cost twice as much, and mtimeMs/ctimeMs keep
 * sub-microsecond precision.
 */
const FINGERPRINT_SOURCE = `
const { createHash } = require('node:crypto');
const { lstatSync, readdirSync } = require('node:fs');
const path = require('node:path');
function fingerprint(dir) {
  const h = createHash('sha256');
  const walk = (rel) => {
    const names = readdirSync(path.join(dir, rel)).sort();
    for (const n of names) {
      const r = rel ? rel + '/' + n : n;
      const st = lstatSync(path.join(dir, r));
      h.update(r + '\\0' + st.ino + '\\0' + st.mode + '\\0' + st.uid + ':' + st.gid + '\\0' + st.size + '\\0' + st.mtimeMs + '\\0' + st.ctimeMs + '\\n');
      if (st.isDirectory()) walk(r);
    }
  };
  const top = lstatSync(dir);
  h.update(top.dev + '\\0' + top.ino + '\\0' + top.mode + '\\0' + top.ctimeMs + '\\n');
  walk('');
  return h.digest('hex');
}
`;

// our own constant source, evaluated once here and once in each worker: one walk, not two copies of it
const local = new Function('require', `${FINGERPRINT_SOURCE}\nreturn fingerprint;`)(createRequire(import.meta.url)) as (dir: string) => string;

export function statFingerprint(dir: string): string {
  return local(dir);
}

/** The same fingerprint, computed on a worker thread; never rejects (a walk that fails answers null). */
export function statFingerprintOffThread(dir: string): Promise<string | null> {
  return new Promise((resolve) => {
    const w = new Worker(`${FINGERPRINT_SOURCE}
const { parentPort, workerData } = require('node:worker_threads');
let out = null;
try { out = fingerprint(workerData.dir); } catch {}
parentPort.postMessage(out);`, { eval: true, workerData: { dir }, execArgv: [], stdout: false, stderr: false });
    w.unref(); // never what keeps a finished command alive
    w.once('message', (fp: string | null) => { resolve(fp); void w.terminate(); });
    w.once('error', () => resolve(null));
    w.once('exit', () => resolve(null));
  });
}

async function readCache(cacheFile: string): Promise<Record<string, Entry>> {
  return readFile(cacheFile, 'utf8').then((t) => JSON.parse(t) as Record<string, Entry>).catch(() => ({}));
}

/** The content digest of `dir`, from `cacheFile` when the tree's stat fingerprint has not changed. */
export async function cachedTreeDigest(dir: string, cacheFile: string): Promise<string> {
  const abs = path.resolve(dir);
  const stat = statFingerprint(abs);
  const all = await readCache(cacheFile);
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

export interface SpeculativeDigest {
  /** The digest the tree had when it was last hashed. */
  content: string;
  /** Starts the check off this thread: true only if the tree's stat fingerprint is unchanged. Never rejects. */
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
  return { content: hit.content, confirm: () => statFingerprintOffThread(abs).then((fp) => fp === hit.stat) };
}
