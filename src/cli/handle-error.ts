/** The one place where errors become messages and exit codes (shadcn's handleError). */
import { chalkStderr as chalk } from 'chalk';
import { ExitCode, SmolError, ValidationError } from '../errors/index.js';
import { errorReport, normalizeError } from '../util/error-report.js';
import { terminalSafe as safe } from '../util/terminal-safe.js';

export function handleError(err: unknown, json = false): number {
  err = normalizeError(err); // shared with the HTTP API (api/errors.ts)
  if (err instanceof SmolError) {
    // as a shell is silent about a command SIGPIPE ended, and stderr may be the closed pipe
    if (err.exitCode === ExitCode.brokenPipe && !json) return err.exitCode;
    if (json) {
      process.stderr.write(JSON.stringify({ error: errorReport(err) }) + '\n');
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
