/**
 * The console log's keeper (host/conlog): root in the guest owns its serial port and may write to it forever,
 * so QEMU never writes the log file itself. It writes into a pipe (fd 3, which the keeper hands it), and the
 * keeper, a tiny detached process that lives exactly as long as QEMU, writes console.log and rotates it to
 * console.log.1 at the cap: the disk holds at most twice the cap per machine. A C program rather than a Node
 * one because it starts on every boot's path (about a millisecond) and lives beside every machine (a few
 * hundred KiB).
 */
import fs from 'node:fs';
import path from 'node:path';
import { PrerequisiteError, ValidationError } from '../../errors/index.js';
import { buildPaths } from '../../util/paths.js';
import { waitGone } from './process.js';
import { CONSOLE_SETTLE_MS, DEFAULT_CONSOLE_MAX_BYTES, MIN_CONSOLE_MAX_BYTES } from '../limits.js';

export const CONSOLE_KEEPER = path.join(buildPaths.root, 'smol-conlog');
/** The fd QEMU finds the pipe on: its command line (args.ts) names it with -add-fd. */
export const CONSOLE_FD = 3;
export { DEFAULT_CONSOLE_MAX_BYTES };

/** SMOL_CONSOLE_MAX_BYTES, else 8 MiB. */
export function consoleMaxBytes(env: NodeJS.ProcessEnv = process.env): number {
  const raw = env.SMOL_CONSOLE_MAX_BYTES;
  if (raw === undefined || raw === '') return DEFAULT_CONSOLE_MAX_BYTES;
  const v = Number(raw);
  if (!/^\d+$/.test(raw) || !Number.isSafeInteger(v) || v < MIN_CONSOLE_MAX_BYTES) {
    throw new ValidationError(`SMOL_CONSOLE_MAX_BYTES must be a whole number of bytes ≥ ${MIN_CONSOLE_MAX_BYTES}, got "${raw}"`, [{ path: 'SMOL_CONSOLE_MAX_BYTES', message: `a byte count ≥ ${MIN_CONSOLE_MAX_BYTES}` }], { hint: 'Unset it for the default (8 MiB per file).' });
  }
  return v;
}

/** The keeper's pid, beside the log. */
export const keeperPidFile = (consoleLogPath: string): string => path.join(path.dirname(consoleLogPath), 'console.pid');

/**
 * The command that runs `command` (QEMU, or `ip netns exec … qemu`) with the keeper beside it: the keeper
 * starts, then `command` replaces the wrapper in place, so its exit status and stderr are the caller's as before.
 */
export function withConsoleKeeper(o: { consoleLogPath: string; append: boolean; maxBytes: number }, command: readonly string[]): [string, string[]] {
  if (!fs.existsSync(CONSOLE_KEEPER)) {
    throw new PrerequisiteError(`booting needs smol-conlog, and ${CONSOLE_KEEPER} does not exist`, { hint: 'Build it: npm run build (it needs gcc).' });
  }
  return [CONSOLE_KEEPER, [o.consoleLogPath, String(o.maxBytes), o.append ? '1' : '0', keeperPidFile(o.consoleLogPath), '--', ...command]];
}

/**
 * Once QEMU has exited, waits (at most `timeoutMs`) for its keeper to write the last bytes and go, so a
 * reader of the console's tail sees what the guest printed last (a panic, say).
 */
export async function consoleSettled(consoleLogPath: string, timeoutMs = CONSOLE_SETTLE_MS): Promise<void> {
  let pid = 0;
  try { pid = Number(fs.readFileSync(keeperPidFile(consoleLogPath), 'utf8').trim()); } catch { return; }
  if (Number.isInteger(pid) && pid > 1) await waitGone(pid, 'smol-conlog', timeoutMs);
}
