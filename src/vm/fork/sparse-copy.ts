/**
 * Copies a memory file keeping its holes. Guest RAM that was never touched is a hole in the tmpfs file;
 * copying it as zeros would make every template cost the guest's full size in host memory, and be slower.
 * coreutils' cp finds the data with SEEK_DATA/SEEK_HOLE and skips zero blocks inside it: reading the whole
 * file from node (holes read back as zeros) took 2-5x as long, and this copy happens while a parent is paused.
 */
import fs from 'node:fs';
import { mapFsError, SmolError } from '../../errors/index.js';
import { run } from '../../util/exec.js';

/** Returns the bytes the copy occupies (its non-zero part). */
export async function sparseCopy(src: string, dst: string): Promise<number> {
  try {
    await run('cp', ['--sparse=always', '--', src, dst]);
    fs.chmodSync(dst, 0o600);
    return fs.statSync(dst).blocks * 512;
  } catch (err) {
    fs.rmSync(dst, { force: true });
    if (err instanceof SmolError) throw err;
    throw mapFsError(err, `copying the memory template ${src}`);
  }
}
