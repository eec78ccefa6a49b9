/**
 * Deterministic newc archives with Debian's GNU cpio: entries sorted, every mtime fixed, owners root,
 * inode/device numbers normalised (--reproducible), so the same tree always gives the same bytes.
 */
import { lstat, lutimes, readdir } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../util/exec.js';

/** Every path under `dir`, relative, sorted bytewise, directories before their contents. */
export async function listTree(dir: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (rel: string) => {
    const names = (await readdir(path.join(dir, rel))).sort();
    for (const n of names) {
      const r = rel ? `${rel}/${n}` : n;
      out.push(r);
      if ((await lstat(path.join(dir, r))).isDirectory()) await walk(r);
    }
  };
  await walk('');
  return out;
}

export const FIXED_MTIME = new Date(0);

export async function writeCpio(dir: string, outFile: string): Promise<void> {
  const entries = await listTree(dir);
  for (const e of [...entries].reverse()) await lutimes(path.join(dir, e), FIXED_MTIME, FIXED_MTIME);
  await lutimes(dir, FIXED_MTIME, FIXED_MTIME);
  await run('cpio', ['--quiet', '-o', '-H', 'newc', '--reproducible', '-R', '0:0', '-O', outFile], {
    cwd: dir,
    input: ['.', ...entries.map((e) => `./${e}`)].join('\n') + '\n',
  });
}
