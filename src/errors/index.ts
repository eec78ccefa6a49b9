/**
 * One error hierarchy for all of smol. Every error carries a documented exit code (docs/exit-codes.md);
 * the CLI maps errors to codes in one place (src/cli/handle-error.ts).
 *
 * Guest commands' own exit codes pass through `smol run`/`exec` unchanged, so smol's own failures use
 * the sysexits range (64–78) plus a few above it, which ordinary programs rarely return.
 */
export const ExitCode = {
  ok: 0,
  failure: 1,
  usage: 64, // bad flags or arguments
  invalidInput: 65, // a Smolfile, manifest or request that fails validation
  notFound: 66, // a machine, image, file or artifact that does not exist
  conflict: 67, // name collision, wrong state (exec into a stopped machine), locked
  prerequisite: 69, // QEMU, kernel, image or another prerequisite missing
  internal: 70, // a bug in smol
  bootFailed: 71, // the guest did not become ready
  guestChannel: 72, // the host<->guest channel broke (QEMU died, malformed frames)
  noSpace: 73, // disk full or a file could not be created
  gpu: 74, // CUDA/NVML remoting failure
  tempFail: 75, // transient: lease lost, ledger busy, overload; retrying may work
  integrity: 76, // checksum, signature or format check failed
  timeout: 124, // --timeout elapsed
  interrupted: 130, // Ctrl-C
  brokenPipe: 141, // the reader of smol's output went away (as a shell reports SIGPIPE)
  terminated: 143, // SIGTERM the command did not act on
} as const;
export type ExitCodeValue = (typeof ExitCode)[keyof typeof ExitCode];

export interface ErrorDetail {
  /** Where the problem is: a field path, a file:line, a machine name. */
  where?: string;
  /** How to fix it, as a sentence the user can act on. */
  hint?: string;
  cause?: unknown;
}

export class SmolError extends Error {
  readonly exitCode: ExitCodeValue;
  readonly where?: string;
  readonly hint?: string;
  constructor(message: string, exitCode: ExitCodeValue = ExitCode.failure, detail: ErrorDetail = {}) {
    super(message, detail.cause === undefined ? undefined : { cause: detail.cause });
    this.name = new.target.name;
    this.exitCode = exitCode;
    this.where = detail.where;
    this.hint = detail.hint;
  }

  /** The same error (class, code, where, cause) with one more line of hint. */
  withHint(more: string): this {
    const e = Object.create(Object.getPrototypeOf(this) as object) as this;
    Object.assign(e, this, { hint: this.hint ? `${this.hint}\n      ${more}` : more });
    Object.defineProperties(e, { message: { value: this.message }, stack: { value: this.stack } });
    if (this.cause !== undefined) Object.defineProperty(e, 'cause', { value: this.cause });
    return e;
  }
}

/** The user asked for something that cannot work as asked (wrangler's UserError). */
export class UserError extends SmolError {
  constructor(message: string, detail: ErrorDetail = {}, code: ExitCodeValue = ExitCode.usage) {
    super(message, code, detail);
  }
}

export interface Issue { path: string; message: string }

/** Input that failed schema validation; carries one entry per offending field. */
export class ValidationError extends SmolError {
  readonly issues: Issue[];
  constructor(message: string, issues: Issue[], detail: ErrorDetail = {}) {
    super(message, ExitCode.invalidInput, detail);
    this.issues = issues;
  }
}

export class NotFoundError extends SmolError {
  constructor(message: string, detail: ErrorDetail = {}) { super(message, ExitCode.notFound, detail); }
}
export class ConflictError extends SmolError {
  constructor(message: string, detail: ErrorDetail = {}) { super(message, ExitCode.conflict, detail); }
}
export class PrerequisiteError extends SmolError {
  constructor(message: string, detail: ErrorDetail = {}) { super(message, ExitCode.prerequisite, detail); }
}
export class BootError extends SmolError {
  constructor(message: string, detail: ErrorDetail = {}) { super(message, ExitCode.bootFailed, detail); }
}
export class GuestChannelError extends SmolError {
  constructor(message: string, detail: ErrorDetail = {}) { super(message, ExitCode.guestChannel, detail); }
}
export class NoSpaceError extends SmolError {
  constructor(message: string, detail: ErrorDetail = {}) { super(message, ExitCode.noSpace, detail); }
}
export class ForkError extends SmolError {
  constructor(message: string, detail: ErrorDetail = {}, code: ExitCodeValue = ExitCode.failure) { super(message, code, detail); }
}
export class SnapshotRestoreError extends SmolError {
  constructor(message: string, detail: ErrorDetail = {}, code: ExitCodeValue = ExitCode.failure) { super(message, code, detail); }
}
export class ArtifactError extends SmolError {
  constructor(message: string, detail: ErrorDetail = {}, code: ExitCodeValue = ExitCode.integrity) { super(message, code, detail); }
}
export class GpuError extends SmolError {
  constructor(message: string, detail: ErrorDetail = {}) { super(message, ExitCode.gpu, detail); }
}
/** A CUDA driver call, or the daemon's check in its place, gave a CUresult other than CUDA_SUCCESS; the
 *  session answers the guest's call with `cuResult` as its status. */
export class CudaError extends GpuError {
  readonly op: string;
  readonly cuResult: number;
  constructor(op: string, cuResult: number, detail: ErrorDetail = {}) {
    super(`${op} failed: CUresult ${cuResult}`, detail);
    this.op = op;
    this.cuResult = cuResult;
  }
}
export class LedgerError extends SmolError {
  constructor(message: string, detail: ErrorDetail = {}, code: ExitCodeValue = ExitCode.failure) { super(message, code, detail); }
}
export class TimeoutError extends SmolError {
  constructor(message: string, detail: ErrorDetail = {}) { super(message, ExitCode.timeout, detail); }
}

/** Node's ENOSPC/EDQUOT and SQLite's FULL become NoSpaceError so every caller reports a full disk the same way. */
export function mapFsError(err: unknown, what: string): unknown {
  if (err instanceof NoSpaceError) return err;
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code === 'ENOSPC' || code === 'EDQUOT' || code === 'SQLITE_FULL') {
    return new NoSpaceError(`${what} failed: no space left on device`, { cause: err, hint: 'Free space in the smol data directory ($SMOL_HOME) and retry.' });
  }
  return err;
}

/** smol was told to stop (a second Ctrl-C, or SIGTERM) and did, after cleaning up what it started. */
export class InterruptedError extends SmolError {
  constructor(message: string, code: typeof ExitCode.interrupted | typeof ExitCode.terminated | typeof ExitCode.brokenPipe = ExitCode.interrupted) { super(message, code); }
}
