/** Ledger-specific error classes, all from the one hierarchy in src/errors (exit codes documented there). */
import { ExitCode, LedgerError, type ErrorDetail } from '../errors/index.js';

/** The ledger stayed locked past the retry budget; retrying later may work. */
export class LedgerBusyError extends LedgerError {
  constructor(message: string, detail: ErrorDetail = {}) { super(message, detail, ExitCode.tempFail); }
}

/** A blob or ledger row failed an integrity check. */
export class IntegrityError extends LedgerError {
  constructor(message: string, detail: ErrorDetail = {}) { super(message, detail, ExitCode.integrity); }
}

/** The ledger file was written by a newer smol (its migration number is ahead of ours). */
export class LedgerVersionError extends LedgerError {
  constructor(message: string, detail: ErrorDetail = {}) { super(message, detail, ExitCode.conflict); }
}

/** The ledger's file or directory cannot be created or written there (read-only, not a directory, no permission). */
export class LedgerLocationError extends LedgerError {
  constructor(message: string, detail: ErrorDetail = {}) { super(message, detail, ExitCode.noSpace); }
}
