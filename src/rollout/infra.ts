/**
 * Infrastructure failures: the worker could not do an item's work because something it depends on was out of
 * reach (the blob store, the ledger, the gateway), not because the item's stage failed. They are told apart
 * so that the worker can give the lease back at once without spending the item's attempt, back off, and stop
 * with a precise error when one cause repeats (issue #28: a worker with the wrong blob store used to let
 * every lease expire and exit 0).
 */
import { ExitCode, NoSpaceError, SmolError, type ExitCodeValue } from '../errors/index.js';

export type InfraArea = 'blob' | 'ledger' | 'gateway' | 'worker';

/** How each area reads in messages. */
export const AREA_NAMES: Record<InfraArea, string> = { blob: 'blob store', ledger: 'ledger', gateway: 'gateway', worker: 'worker host' };

/** Passwords never reach a message: postgres://user:secret@host → postgres://user:***@host. */
export function redactUrl(s: string): string {
  return s.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:/@]*):[^@/]*@/i, '$1:***@');
}

/** An error's message with its cause's, since fetch says only "fetch failed" and puts ECONNREFUSED in the cause. */
export function reasonOf(err: unknown): string {
  const e = err as { message?: unknown; cause?: { code?: unknown; message?: unknown } } | undefined;
  const msg = typeof e?.message === 'string' ? e.message : String(err);
  const c = e?.cause;
  const cause = typeof c?.message === 'string' ? c.message : typeof c?.code === 'string' ? c.code : '';
  return cause && !msg.includes(cause) ? `${msg} (${cause})` : msg;
}

export class InfraFailure extends SmolError {
  constructor(
    readonly area: InfraArea,
    /** What was being done: "reading input blob sha256:…", "claiming items", "POST http://…/v1/infer". */
    readonly op: string,
    where: string,
    readonly reason: string,
    code: ExitCodeValue,
    cause?: unknown,
  ) {
    super(`${op} failed: ${reason}`, code, { where, cause });
  }
}

/**
 * The exit code of a worker that gave up: a full disk is 73 wherever it happened; a blob store that cannot be
 * read or written is a misconfigured host (69, as a missing prerequisite), unless it said it was only out of
 * reach (an S3 endpoint, 75); a ledger or gateway out of reach may come back (75), unless the gateway refused
 * the worker's credentials (69).
 */
function codeFor(area: InfraArea, err: unknown): ExitCodeValue {
  if (err instanceof NoSpaceError) return ExitCode.noSpace;
  if (area === 'blob') return err instanceof SmolError && err.exitCode === ExitCode.tempFail ? ExitCode.tempFail : ExitCode.prerequisite;
  if (area === 'ledger' || area === 'gateway') return ExitCode.tempFail;
  return err instanceof SmolError ? err.exitCode : ExitCode.failure;
}

export function infraFailure(area: InfraArea, op: string, where: string, err: unknown, code?: ExitCodeValue): InfraFailure {
  if (err instanceof InfraFailure) return err;
  return new InfraFailure(area, op, where, reasonOf(err), code ?? codeFor(area, err), err);
}

/** Runs `fn`; whatever it throws becomes an InfraFailure of `area` (sync or async, so a store may be either). */
export async function guard<T>(area: InfraArea, op: string, where: string, fn: () => T | Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    throw infraFailure(area, op, where, err);
  }
}

/** Exponential backoff with "equal jitter": half the step fixed, half random, so the wait never collapses to 0. */
export function infraBackoff(inARow: number, baseMs: number, capMs: number, random = Math.random): number {
  const step = Math.min(capMs, baseMs * 2 ** Math.max(0, inARow - 1));
  return Math.round(step / 2 + random() * (step / 2));
}

/** What the worker throws once one cause failed `n` times in a row. */
export function gaveUp(f: InfraFailure, n: number): SmolError {
  const hint = {
    blob: 'Every worker host must reach the blob store the items were written to: the same PostgreSQL ledger\'s blobs, the same --blobs s3://BUCKET/PREFIX, or $SMOL_BLOBS on storage all hosts share (docs/ledger.md).',
    ledger: 'Check that the ledger is up and reachable from this host (--ledger, $SMOL_LEDGER); the worker can be restarted once it is.',
    gateway: 'Check that the gateway is up and reachable at --gateway from this host, and that it accepts this worker\'s token.',
    worker: 'Check this host\'s temporary directory and disk.',
  }[f.area];
  return new SmolError(`worker gave up after ${n} infrastructure failures in a row (${AREA_NAMES[f.area]}): ${f.message}`, f.exitCode, { where: f.where, hint, cause: f });
}
