/**
 * TEST ONLY: SMOL_FORK_FAULT=die:POINT kills this smol with SIGKILL at POINT (`before-pause`, `in-pause`,
 * `after-restore:N`), so tests can check what a fork killed half-way leaves for the next `ls` to sweep.
 */
export function dieAt(point: string): void {
  if (process.env.SMOL_FORK_FAULT === `die:${point}`) process.kill(process.pid, 'SIGKILL');
}
