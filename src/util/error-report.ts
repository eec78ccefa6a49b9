/**
 * What the CLI (cli/handle-error.ts) and the HTTP API (api/errors.ts) both say about a failure: the same error
 * class, message, where, hint, exit code and issues, from one place.
 */
import fs from 'node:fs';
import { ZodError } from 'zod';
import { mapFsError, SmolError, ValidationError, type Issue } from '../errors/index.js';
import { smolHome } from './paths.js';

/** A full disk anywhere (SQLite included) is exit 73, not a bug; a bare ZodError is invalid input per field. */
export function normalizeError(err: unknown): unknown {
  err = mapFsError(fullDiskIoError(err) ?? err, 'writing smol\'s data');
  if (err instanceof ZodError) {
    return new ValidationError('invalid options', err.issues.map((i) => ({ path: i.path.join('.') || '(root)', message: i.message })));
  }
  return err;
}

export interface ErrorReport { type: string; message: string; where?: string; hint?: string; exitCode: number; issues?: Issue[] }

export function errorReport(err: SmolError): ErrorReport {
  const issues = err instanceof ValidationError ? err.issues : undefined;
  return { type: err.name, message: err.message, where: err.where, hint: err.hint, exitCode: err.exitCode, issues };
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
