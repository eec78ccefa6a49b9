/**
 * A content-addressed extraction cache: `<cacheDir>/<artifact digest>/`. The first run extracts (and so
 * verifies every byte); concurrent runs wait on a lock file and then share the same directory; later
 * runs read only the footer (and the cached disk's qcow2 header). A cache hit trusts the cached, verified
 * copy: its manifest is returned, never the (possibly since altered) file's.
 */
import type { KeyObject } from 'node:crypto';
import { mkdir, open, readdir, readFile, rm, stat, unlink, utimes } from 'node:fs/promises';
import path from 'node:path';
import { ConflictError } from '../errors/index.js';
import { dataPaths } from '../util/paths.js';
import { FOOTER_SIGNED_SIZE } from './footer.js';
import { readAt, readHead } from './layout.js';
import { decodeManifest, type ArtifactManifest } from './manifest.js';
import { diskProblem } from './entry.js';
import { readQcow2Head } from './qcow2-check.js';
import { loadPublicKey } from './sign.js';
import { entryFiles, extractArtifact, type ExtractOptions, type ExtractResult } from './extract.js';
import { ArtifactError } from '../errors/index.js';
import { checkSignature, describeSignature, openArtifact } from './verify.js';

/** Where `smol machine create --from` and `smol pack run` keep extracted artifacts: `$SMOL_HOME/cache/artifacts`. */
export function defaultArtifactCache(home?: string): string {
  return path.join(dataPaths(home).cache, 'artifacts');
}

export interface EnsureResult extends ExtractResult { extracted: boolean }
export interface EnsureOptions extends ExtractOptions { lockTimeoutMs?: number }

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

async function hit(file: string, dir: string, trusted: KeyObject | undefined): Promise<EnsureResult | null> {
  if (!(await stat(dir).catch(() => null))?.isDirectory()) return null;
  const manifest = decodeManifest(await readFile(path.join(dir, 'manifest.json')), `${dir}/manifest.json`);
  const fh = await openArtifact(file);
  try {
    const head = await readHead(fh, file);
    const sig = checkSignature(await readAt(fh, head.footerOffset, FOOTER_SIGNED_SIZE), head.footer, manifest, trusted);
    if (!sig.ok) throw new ArtifactError(describeSignature(sig), { where: `${file}: signature` });
    await checkCachedDisk(dir, manifest);
    return { dir, manifest, digest: path.basename(dir), files: entryFiles(dir, manifest), extracted: false };
  } finally {
    await fh.close();
  }
}

/**
 * A smol from before the disk check extracted whatever disk it was given: each hit re-reads the cached
 * disk's header (one cluster), so a disk naming a host file is refused however it got into the cache.
 */
async function checkCachedDisk(dir: string, manifest: ArtifactManifest): Promise<void> {
  const disk = manifest.entries.find((e) => e.kind === 'disk');
  if (!disk) return;
  const file = path.join(dir, disk.name);
  const fh = await open(file, 'r');
  let problem: string | null;
  try {
    problem = diskProblem(disk, await readQcow2Head(fh));
  } finally {
    await fh.close();
  }
  if (problem) throw new ArtifactError(problem, { where: file, hint: `Do not run this artifact; remove its cached copy (rm -r ${dir}) and any machine made from it.` });
}

/** Holds `<key>.lock` (O_EXCL, with our pid) while `fn` runs; a lock whose holder died is taken over. */
async function withLock<T>(lock: string, timeoutMs: number, fn: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const fh = await open(lock, 'wx', 0o600);
      await fh.writeFile(String(process.pid));
      await fh.close();
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const pid = Number((await readFile(lock, 'utf8').catch(() => '')).trim());
      if (pid > 0 && !alive(pid)) {
        await unlink(lock).catch(() => undefined);
        continue;
      }
      if (Date.now() > deadline) throw new ConflictError(`timed out waiting for ${lock} (held by pid ${pid || 'unknown'})`, { where: lock });
      await sleep(50);
    }
  }
  try {
    return await fn();
  } finally {
    await unlink(lock).catch(() => undefined);
  }
}

export async function ensureExtracted(file: string, cacheDir: string, opts: EnsureOptions = {}): Promise<EnsureResult> {
  const trusted = typeof opts.publicKey === 'string' ? await loadPublicKey(opts.publicKey) : opts.publicKey;
  const fh = await openArtifact(file);
  let key: string;
  try {
    key = (await readHead(fh, file)).footer.digest.toString('hex');
  } finally {
    await fh.close();
  }
  const dir = path.join(path.resolve(cacheDir), key);
  const cached = await hit(file, dir, trusted);
  // the entry's mtime says it was just used: `smol pack prune` keeps it while its machine is being made
  if (cached) {
    await utimes(dir, new Date(), new Date()).catch(() => undefined);
    return cached;
  }
  await mkdir(path.dirname(dir), { recursive: true });
  return withLock(`${dir}.lock`, opts.lockTimeoutMs ?? 10 * 60_000, async () => {
    const again = await hit(file, dir, trusted);
    if (again) return again;
    // holding the lock, any temp dir for this digest is from an extraction that was killed: clear it
    const stale = `.${key}.tmp-`;
    for (const n of await readdir(path.dirname(dir))) if (n.startsWith(stale)) await rm(path.join(path.dirname(dir), n), { recursive: true, force: true });
    const r = await extractArtifact(file, dir, { ...opts, publicKey: trusted });
    if (r.digest !== key) throw new ArtifactError(`artifact ${file} changed while it was being extracted`, { where: file });
    return { ...r, extracted: true };
  });
}
