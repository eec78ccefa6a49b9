/**
 * A minimal glibc guest root: the busybox userland plus the shared libraries that the given host programs
 * need (found with ldd), and the programs under /opt/bin. Enough to run the nvcc/gcc-built CUDA test
 * programs in a microVM without Debian's whole userland.
 */
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { writeBusyboxTree } from '../../src/vm/image/tree.js';

export async function buildGlibcRootfs(dir: string, programs: string[], extraFiles: string[] = []): Promise<void> {
  fs.mkdirSync(dir, { recursive: true });
  await writeBusyboxTree(dir);
  const libs = new Set<string>();
  for (const p of programs) {
    const out = execFileSync('ldd', [p], { encoding: 'utf8' });
    for (const m of out.matchAll(/(\/\S+\.so[.\d]*)/g)) libs.add(m[1]);
  }
  for (const lib of libs) {
    const dest = path.join(dir, lib);
    fs.mkdirSync(path.dirname(dest), { recursive: true });
    fs.copyFileSync(fs.realpathSync(lib), dest);
  }
  fs.mkdirSync(path.join(dir, 'opt/bin'), { recursive: true });
  for (const f of [...programs, ...extraFiles]) fs.copyFileSync(f, path.join(dir, 'opt/bin', path.basename(f)));
  for (const f of programs) fs.chmodSync(path.join(dir, 'opt/bin', path.basename(f)), 0o755);
}
