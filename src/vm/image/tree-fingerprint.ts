/**
 * The stat fingerprint of a rootfs tree (tree-digest-cache.ts says what it is for): the SHA-256 of GNU
 * find's listing of every entry's path, device, inode, type and mode, owner, size, mtime and ctime.
 *
 * find, not a walk in JS: on a Debian rootfs (11k entries) find costs ~60 ms of CPU, where lstat from JS
 * cost ~250 ms and the same walk on a worker thread ~320 ms (a worker's start alone is ~120 ms). On a
 * 2-core host a run pays that CPU in wall time, whichever thread spends it (docs/images.md).
 * Light imports only, so the CLI can start a walk before its own modules load (cli/prefetch.ts).
 */
import { digestOfOutput } from '../../util/exec.js';

/**
 * Each field ends in NUL, which no file name contains, so the listing parses one way only. Times are
 * seconds with nanoseconds; -H follows a symlink given as the tree itself, as a walk from it would.
 */
const FORMAT = '%P\\0%D\\0%i\\0%y%m\\0%U:%G\\0%s\\0%T@\\0%C@\\0';

/** The tree's fingerprint, or null when it cannot be listed whole (missing, unreadable parts). */
export function treeFingerprint(abs: string): Promise<string | null> {
  return digestOfOutput('find', ['-H', abs, '-printf', FORMAT], { env: { LC_ALL: 'C' } });
}

const early = new Map<string, Promise<string | null>>();

/**
 * Starts fingerprinting `abs` now; the next earlyFingerprint(abs) takes the answer. Started as the CLI
 * launches, find runs while the CLI's modules load instead of beside QEMU's start.
 */
export function startEarlyFingerprint(abs: string): void {
  if (!early.has(abs)) early.set(abs, treeFingerprint(abs));
}

/** The fingerprint startEarlyFingerprint began for `abs` (used once), or undefined when none was started. */
export function earlyFingerprint(abs: string): Promise<string | null> | undefined {
  const p = early.get(abs);
  early.delete(abs);
  return p;
}
