/** The one place where errors become messages and exit codes (shadcn's handleError). */
import chalk from 'chalk';
import { ZodError } from 'zod';
import { ExitCode, SmolError, ValidationError } from '../errors/index.js';

export function handleError(err: unknown, json = false): number {
  if (err instanceof ZodError) {
    err = new ValidationError('invalid options', err.issues.map((i) => ({ path: i.path.join('.') || '(root)', message: i.message })));
  }
  if (err instanceof SmolError) {
    if (json) {
      const issues = err instanceof ValidationError ? err.issues : undefined;
      process.stderr.write(JSON.stringify({ error: { type: err.name, message: err.message, where: err.where, hint: err.hint, exitCode: err.exitCode, issues } }) + '\n');
      return err.exitCode;
    }
    const where = err.where ? chalk.dim(` (${err.where})`) : '';
    process.stderr.write(`${chalk.red('error:')} ${err.message}${where}\n`);
    if (err instanceof ValidationError) {
      for (const i of err.issues) process.stderr.write(`  ${chalk.yellow(i.path)}: ${i.message}\n`);
    }
    if (err.hint) process.stderr.write(`${chalk.cyan('hint:')} ${err.hint}\n`);
    if (process.env.SMOL_DEBUG && err.cause) process.stderr.write(`${String((err.cause as Error).stack ?? err.cause)}\n`);
    return err.exitCode;
  }
  const e = err as Error;
  process.stderr.write(`${chalk.red('internal error:')} ${e?.stack ?? String(err)}\n`);
  process.stderr.write('This is a bug in smol; please report it with the command you ran.\n');
  return ExitCode.internal;
}
