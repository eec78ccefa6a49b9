/** A fresh tree from a guest, merged into a host directory that already exists (#31.1). */
import { chmod, lstat, readdir, rename, unlink } from 'node:fs/promises';
import path from 'node:path';
import { ConflictError } from '../errors/index.js';

/**
 * Moves the fresh tree `from` into the existing directory `to`. Nothing in `to` is followed: a symlink or
 * file where the copy has a directory is replaced by it, and a host directory where the copy has a file
 * stops the merge before anything moved (as cp(1) refuses to overwrite a directory).
 */
export async function mergeInto(from: string, to: string): Promise<void> {
  const conflicts: string[] = [];
  await findConflicts(from, to, conflicts);
  if (conflicts.length) {
    throw new ConflictError(`cp failed: ${conflicts.slice(0, 3).join(', ')}${conflicts.length > 3 ? ` and ${conflicts.length - 3} more` : ''} ${conflicts.length === 1 ? 'is a directory' : 'are directories'} on the host but not in the guest; nothing was copied`, {
      hint: 'Remove them, or copy to a new path.',
    });
  }
  await moveInto(from, to);
}

async function findConflicts(from: string, to: string, out: string[]): Promise<void> {
  for (const name of await readdir(from)) {
    const d = await lstat(path.join(to, name)).catch(() => null);
    if (!d?.isDirectory()) continue;
    if ((await lstat(path.join(from, name))).isDirectory()) await findConflicts(path.join(from, name), path.join(to, name), out);
    else out.push(path.join(to, name));
  }
}

async function moveInto(from: string, to: string): Promise<void> {
  const mode = (await lstat(from)).mode & 0o7777;
  await chmod(from, 0o700); // ours, emptied below: a read-only mode from the guest must not stop the moves
  for (const name of await readdir(from)) {
    const src = path.join(from, name), dst = path.join(to, name);
    const s = await lstat(src);
    const d = await lstat(dst).catch(() => null);
    if (s.isDirectory() && d?.isDirectory()) {
      await moveInto(src, dst);
      continue;
    }
    if (d && s.isDirectory()) await unlink(dst);
    await rename(src, dst);
  }
  await chmod(to, mode);
}
