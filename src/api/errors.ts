/**
 * Errors as HTTP answers: the src/errors class becomes a status and a snake_case code, and the body carries the
 * same message, where, hint, exit code and issues the CLI prints (util/error-report.ts is shared with handleError).
 */
import { ExitCode, SmolError, type ErrorDetail, type ExitCodeValue } from '../errors/index.js';
import { errorReport, normalizeError } from '../util/error-report.js';
import type { ErrorBody } from './schemas/error.js';

/** A failure only HTTP has (a missing token, an oversized body, no such route), with its own status and code. */
export class ApiError extends SmolError {
  constructor(readonly status: number, readonly code: string, message: string, detail: ErrorDetail = {}, exitCode: ExitCodeValue = ExitCode.usage) {
    super(message, exitCode, detail);
  }
}

/** By exit code: the classes that share one (ForkError with a conflict, say) answer as that class does. */
const byExitCode: Partial<Record<ExitCodeValue, [number, string]>> = {
  [ExitCode.usage]: [400, 'user_error'],
  [ExitCode.invalidInput]: [400, 'invalid_input'],
  [ExitCode.notFound]: [404, 'not_found'],
  [ExitCode.conflict]: [409, 'conflict'],
  [ExitCode.prerequisite]: [503, 'prerequisite'],
  [ExitCode.internal]: [500, 'internal'],
  [ExitCode.bootFailed]: [500, 'boot_failed'],
  [ExitCode.guestChannel]: [502, 'guest_channel'],
  [ExitCode.noSpace]: [507, 'no_space'],
  [ExitCode.gpu]: [502, 'gpu'],
  [ExitCode.tempFail]: [503, 'unavailable'],
  [ExitCode.integrity]: [422, 'integrity'],
  [ExitCode.timeout]: [504, 'timeout'],
  [ExitCode.interrupted]: [503, 'interrupted'],
  [ExitCode.terminated]: [503, 'interrupted'],
  [ExitCode.failure]: [500, 'failed'],
};

export interface HttpError { status: number; body: ErrorBody }

export function httpError(raw: unknown): HttpError {
  const err = normalizeError(raw);
  if (!(err instanceof SmolError)) {
    return { status: 500, body: { error: { code: 'internal', message: `internal error: ${(err as Error)?.message ?? String(err)}`, hint: 'This is a bug in smol; please report it with the request you sent.', exitCode: ExitCode.internal } } };
  }
  const [status, code] = err instanceof ApiError ? [err.status, err.code] : byExitCode[err.exitCode] ?? [500, 'failed'];
  const r = errorReport(err);
  return { status, body: { error: { code, message: r.message, ...(r.hint ? { hint: r.hint } : {}), ...(r.where ? { where: r.where } : {}), exitCode: r.exitCode, ...(r.issues ? { issues: r.issues } : {}) } } };
}
