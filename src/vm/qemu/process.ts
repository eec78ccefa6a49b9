/** Liveness of detached VMM processes, by pid, robust to zombies and recycled pids. */
import { readFileSync } from 'node:fs';

/** 'R', 'S', 'Z', … from /proc/<pid>/stat, or null when there is no such process. */
export function procState(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) || null;
  } catch {
    return null;
  }
}

export function procCommand(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0')[0] ?? '';
  } catch {
    return '';
  }
}

/** A process that exists, is not a zombie and whose executable name contains `exeHint`. */
export function isRunning(pid: number, exeHint: string): boolean {
  if (!Number.isInteger(pid) || pid <= 1) return false;
  const s = procState(pid);
  if (s === null || s === 'Z' || s === 'X') return false;
  return procCommand(pid).includes(exeHint);
}

/**
 * Polls from 1 ms, doubling to 20: a killed QEMU or virtiofsd is usually gone within a few milliseconds, and
 * a flat 20 ms poll made every `smol run` wait ~10 ms longer per process it stopped.
 */
export async function waitGone(pid: number, exeHint: string, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (let delay = 1; isRunning(pid, exeHint); delay = Math.min(delay * 2, 20)) {
    if (Date.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, delay));
  }
  return true;
}
