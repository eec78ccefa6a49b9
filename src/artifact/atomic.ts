/** Atomic file and directory creation: write beside the target, then rename, so a crash (even kill -9) never leaves half a file at the target path. */
import { randomBytes } from 'node:crypto';
import { link, open, rename, rm, unlink } from 'node:fs/promises';
import path from 'node:path';
import { ConflictError, mapFsError } from '../errors/index.js';

export function tempSibling(target: string): string {
  return path.join(path.dirname(target), `.${path.basename(target)}.tmp-${process.pid}-${randomBytes(4).toString('hex')}`);
}

export async function writeFileAtomic(target: string, data: string | Buffer, opts: { mode?: number; exclusive?: boolean } = {}): Promise<void> {
  const tmp = tempSibling(target);
  try {
    const fh = await open(tmp, 'wx', opts.mode ?? 0o644);
    try {
      await fh.writeFile(data);
      await fh.sync();
    } finally {
      await fh.close();
    }
    await commitFile(tmp, target, opts.exclusive ?? false);
  } catch (err) {
    await rm(tmp, { force: true });
    throw mapFsError(err, `writing ${target}`);
  }
}

/** Moves a finished temp file into place; exclusive refuses to replace an existing target (link(2) fails with EEXIST). */
export async function commitFile(tmp: string, target: string, exclusive: boolean): Promise<void> {
  if (!exclusive) {
    await rename(tmp, target);
    return;
  }
  try {
    await link(tmp, target);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new ConflictError(`${target} already exists`, { where: target, hint: 'Choose another path or pass --force.' });
    throw err;
  } finally {
    await unlink(tmp).catch(() => undefined);
  }
}
