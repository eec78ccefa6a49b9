/** Reads files out of a built qcow2 ext4 base with e2fsprogs' debugfs (no mount, no VM). */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { run } from '../../src/util/exec.js';

export async function withRawBase<T>(qcow2: string, fn: (read: (p: string) => Promise<string | null>) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'smol-ext4-read-'));
  const raw = path.join(dir, 'disk.raw');
  try {
    await run('qemu-img', ['convert', '-q', '-f', 'qcow2', '-O', 'raw', qcow2, raw]);
    return await fn(async (p) => {
      const st = await run('/sbin/debugfs', ['-R', `stat ${p}`, raw], { allowFailure: true });
      if (/not found by ext2_lookup/.test(st.stderr)) return null;
      return (await run('/sbin/debugfs', ['-R', `cat ${p}`, raw])).stdout;
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
