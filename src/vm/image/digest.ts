/** Content digests used as cache keys for built images. */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { lstat, readlink } from 'node:fs/promises';
import path from 'node:path';
import { listTree } from './cpio.js';

export async function fileDigest(file: string): Promise<string> {
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
    else if (st.isFile()) h.update(`${await fileDigest(p)}\0`);
  }
  return h.digest('hex');
}

export function digestOf(...parts: string[]): string {
  const h = createHash('sha256');
  for (const p of parts) h.update(`${p.length}:${p}`);
  return h.digest('hex');
}
