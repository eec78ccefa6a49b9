/** Content digests used as cache keys for built images. */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { lstat, readlink, stat } from 'node:fs/promises';
import path from 'node:path';
import { listTree } from './cpio.js';

/**
 * Digests already taken in this process, by path, with the stat they were taken at: every run hashes the
 * busybox and agent binaries for the initramfs key, once for the boot snapshot's key and again at launch.
 */
const taken = new Map<string, { stamp: string; digest: string }>();
/** A file changed this recently may change again within its mtime's granularity (a jiffy on ext4) unseen. */
const SETTLED_NS = 2_000_000_000n;

export async function fileDigest(file: string): Promise<string> {
  const st = await stat(file, { bigint: true });
  const stamp = `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
  const seen = taken.get(file);
  if (seen?.stamp === stamp) return seen.digest;
  const digest = await contentDigest(file);
  if (BigInt(Date.now()) * 1_000_000n - st.ctimeNs > SETTLED_NS) taken.set(file, { stamp, digest });
  return digest;
}

async function contentDigest(file: string): Promise<string> {
  const h = createHash('sha256');
  for await (const chunk of createReadStream(file)) h.update(chunk as Buffer);
  return h.digest('hex');
}

/**
 * A digest of a directory tree: paths, types, modes, owners, link targets, and file contents. Contents are
 * hashed rather than mtimes so a touched-but-unchanged tree still hits the cache.
 */
export async function treeDigest(dir: string): Promise<string> {
  const h = createHash('sha256');
  for (const rel of await listTree(dir)) {
    const p = path.join(dir, rel);
    const st = await lstat(p);
    h.update(`${rel}\0${st.mode}\0${st.uid}:${st.gid}\0`);
    if (st.isSymbolicLink()) h.update(`->${await readlink(p)}\0`);
    // not fileDigest: a tree is hashed again only when its fingerprint changed (tree-digest-cache.ts), so
    // remembering each file's digest would only add a stat per file and thousands of entries
    else if (st.isFile()) h.update(`${await contentDigest(p)}\0`);
  }
  return h.digest('hex');
}

export function digestOf(...parts: string[]): string {
  const h = createHash('sha256');
  for (const p of parts) h.update(`${p.length}:${p}`);
  return h.digest('hex');
}
