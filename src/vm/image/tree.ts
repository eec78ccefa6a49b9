/**
 * The busybox userland shared by the default initramfs and the default disk: Debian's static busybox plus
 * one symlink per applet, a minimal /etc, and the directories the init script mounts onto.
 */
import { chmod, copyFile, mkdir, symlink, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../util/exec.js';

export const BUSYBOX = '/bin/busybox';

export async function busyboxApplets(busybox = BUSYBOX): Promise<string[]> {
  const r = await run(busybox, ['--list-full']);
  return r.stdout.split('\n').map((l) => l.trim()).filter((l) => l && !l.includes('..')).sort();
}

/** Populate `dir` (which must exist) with busybox, its applet links and a minimal /etc. */
export async function writeBusyboxTree(dir: string, busybox = BUSYBOX): Promise<void> {
  for (const d of ['bin', 'sbin', 'usr/bin', 'usr/sbin', 'etc', 'proc', 'sys', 'dev', 'tmp', 'run', 'root', 'var/tmp', 'mnt']) {
    await mkdir(path.join(dir, d), { recursive: true });
  }
  await chmod(path.join(dir, 'tmp'), 0o1777);
  await copyFile(busybox, path.join(dir, 'bin/busybox'));
  await chmod(path.join(dir, 'bin/busybox'), 0o755);
  for (const applet of await busyboxApplets(busybox)) {
    if (applet === 'bin/busybox') continue;
    const target = path.relative(path.dirname(path.join(dir, applet)), path.join(dir, 'bin/busybox'));
    await symlink(target, path.join(dir, applet)).catch((e: NodeJS.ErrnoException) => { if (e.code !== 'EEXIST') throw e; });
  }
  await writeFile(path.join(dir, 'etc/passwd'), 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n');
  await writeFile(path.join(dir, 'etc/group'), 'root:x:0:\nnogroup:x:65534:\n');
  await writeFile(path.join(dir, 'etc/hostname'), 'smol\n');
  // no etc/hosts: the init writes one naming the machine's hostname, and the agent keeps it current
}
