/** Maps an ERROR frame (guest errno + message) to the smol error hierarchy. */
import { ConflictError, NoSpaceError, NotFoundError, SmolError } from '../../errors/index.js';

const ENOENT = 2;
const EEXIST = 17;
const ENOTDIR = 20;
const EISDIR = 21;
const ENOSPC = 28;
const EDQUOT = 122;

export function guestError(code: number, message: string): SmolError {
  const detail = { where: 'guest' };
  if (code === ENOENT || code === ENOTDIR) return new NotFoundError(message, detail);
  if (code === ENOSPC || code === EDQUOT) return new NoSpaceError(message, detail);
  if (code === EEXIST || code === EISDIR) return new ConflictError(message, detail);
  return new SmolError(message, undefined, detail);
}

/** Marks a promise as handled so an unawaited rejection never crashes the host; callers still see it. */
export function quiet<T>(p: Promise<T>): Promise<T> {
  p.catch(() => undefined);
  return p;
}
