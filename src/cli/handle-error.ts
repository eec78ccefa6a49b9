/** The one place where errors become messages and exit codes (shadcn's handleError). */
import fs from 'node:fs';
import { chalkStderr as chalk } from 'chalk';
import { ZodError } from 'zod';
import { ExitCode, SmolError, ValidationError, mapFsError } from '../errors/index.js';
import { smolHome } from '../util/paths.js';
import { terminalSafe as safe } from '../util/terminal-safe.js';

export function handleError(err: unknown, json = false): number {
  err = mapFsError(fullDiskIoError(err) ?? err, 'writing smol\'s data'); // a full disk anywhere (SQLite included) is exit 73, not a bug
  if (err instanceof ZodError) {
    err = new ValidationError('invalid options', err.issues.map((i) => ({ path: i.path.join('.') || '(root)', message: i.message })));
  }
  if (err instanceof SmolError) {
    // as a shell is silent about a command SIGPIPE ended, and stderr may be the closed pipe
    if (err.exitCode === ExitCode.brokenPipe && !json) return err.exitCode;
    if (json) {
      const issues = err instanceof ValidationError ? err.issues : undefined;
      process.stderr.write(JSON.stringify({ error: { type: err.name, message: err.message, where: err.where, hint: err.hint, exitCode: err.exitCode, issues } }) + '\n');
      return err.exitCode;
    }
    // messages and hints carry guest text (a console tail, an agent's ERROR frame, a guest tar's stderr):
    // its escape sequences must not reach the terminal (util/terminal-safe.ts)
    const where = err.where ? chalk.dim(` (${safe(err.where)})`) : '';
    process.stderr.write(`${chalk.red('error:')} ${safe(err.message)}${where}\n`);
    if (err instanceof ValidationError) {
      for (const i of err.issues) process.stderr.write(`  ${chalk.yellow(safe(i.path))}: ${safe(i.message)}\n`);
    }
    if (err.hint) process.stderr.write(`${chalk.cyan('hint:')} ${safe(err.hint)}\n`);
    if (process.env.SMOL_DEBUG && err.cause) process.stderr.write(`${safe(String((err.cause as Error).stack ?? err.cause))}\n`);
    return err.exitCode;
  }
  const e = err as Error;
  process.stderr.write(`${chalk.red('internal error:')} ${safe(e?.stack ?? String(err))}\n`);
  process.stderr.write('This is a bug in smol; please report it with the command you ran.\n');
  return ExitCode.internal;
}

/** SQLite reports some writes on a full disk only as SQLITE_IOERR; the data dir's free space tells them apart. */
function fullDiskIoError(err: unknown): NodeJS.ErrnoException | null {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !code.startsWith('SQLITE_IOERR')) return null;
  try {
    const st = fs.statfsSync(smolHome());
    return st.bavail * st.bsize < 1024 * 1024 ? Object.assign(new Error((err as Error).message), { code: 'ENOSPC' }) : null;
  } catch {
    return null;
  }
}
