/**
 * Whether output to a stream gets colour: FORCE_COLOR wins (as chalk reads it), then NO_COLOR
 * (no-color.org: any non-empty value), then only a terminal that is not TERM=dumb. chalk alone
 * ignores NO_COLOR, and cli-table3 styles its header even into a pipe.
 */
import chalk, { chalkStderr } from 'chalk';

type Level = 0 | 1 | 2 | 3;

export function colorLevel(stream: { isTTY?: boolean }, env: NodeJS.ProcessEnv = process.env, detected: Level = 1): Level {
  const force = env.FORCE_COLOR;
  if (force !== undefined) {
    if (force === '' || force === 'true') return Math.max(1, detected) as Level;
    if (force === 'false') return 0;
    const n = Number.parseInt(force, 10);
    if (Number.isFinite(n)) return Math.max(0, Math.min(n, 3)) as Level;
  }
  if (env.NO_COLOR) return 0;
  if (!stream.isTTY || env.TERM === 'dumb') return 0;
  return Math.max(1, detected) as Level;
}

/** Sets chalk's stdout and stderr instances from the rules above; call once before any output. */
export function applyColorPolicy(): void {
  chalk.level = colorLevel(process.stdout, process.env, chalk.level as Level);
  chalkStderr.level = colorLevel(process.stderr, process.env, chalkStderr.level as Level);
}

/** For renderers that colour on their own (cli-table3). */
export const stdoutHasColor = (): boolean => chalk.level > 0;

/**
 * Whether stderr can show a spinner: a terminal that reports its width. One that says 0 columns (a serial
 * console, `docker exec -t` before its size is set) sent ora's line clearing into an endless loop.
 */
export function spinnerTerminal(stream: { isTTY?: boolean; columns?: number } = process.stderr): boolean {
  return !!stream.isTTY && (stream.columns ?? 0) > 0;
}
