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
  return finish(run('cp', ['--sparse=always', '--', src, dst]), src, dst);
}

/** A copy whose process is already started and waits for its cue. */
export interface ArmedCopy {
  /** Copies now; resolves with the bytes the copy occupies, as sparseCopy. */
  start(): Promise<number>;
  /** Lets the waiting process go without copying (a no-op once started). */
  cancel(): void;
}

/**
 * The same copy, with its process started ahead: a spawn from node forks node's whole address space, which
 * took 5-80 ms here (more under load), longer than the copy's own start, so a caller that copies inside a
 * pause arms the copy before it. A shell waits on its stdin, then becomes cp; end of input without the cue
 * makes it exit having copied nothing.
 */
export function armSparseCopy(src: string, dst: string): ArmedCopy {
  let cue: (line: string) => void = () => undefined;
  const input = new Promise<string>((resolve) => { cue = resolve; });
  const copied = run('sh', ['-c', 'read -r _ && exec cp --sparse=always -- "$1" "$2"', 'sh', src, dst], { input });
  copied.catch(() => undefined); // cancelled, or awaited by start()
  let started: Promise<number> | undefined;
  return {
    start: () => (started ??= (cue('go\n'), finish(copied, src, dst))),
    cancel: () => cue(''),
  };
}

async function finish(copied: Promise<unknown>, src: string, dst: string): Promise<number> {
  try {
    await copied;
    fs.chmodSync(dst, 0o600);
    return fs.statSync(dst).blocks * 512;
  } catch (err) {
    fs.rmSync(dst, { force: true });
    if (err instanceof SmolError) throw err;
    throw mapFsError(err, `copying the memory template ${src}`);
  }
}
