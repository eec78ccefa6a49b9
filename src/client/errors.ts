/**
 * The API's one error shape (docs/api.md, Errors) as exceptions: `SmolApiError` carries the server's code,
 * message, hint and the exit code the CLI would have given, and each code has its own subclass so callers can
 * `catch (e) { if (e instanceof NotFoundError) ... }`. Failures before an answer (no server on the socket, a
 * stream cut short) are `SmolConnectionError` and `SmolProtocolError`, never a bare TypeError from fetch.
 */
import type { components } from './schema.js';

export type ErrorBody = components['schemas']['Error']['error'];
export type Issue = NonNullable<ErrorBody['issues']>[number];

export class SmolApiError extends Error {
  readonly code: string;
  readonly hint: string | undefined;
  readonly where: string | undefined;
  readonly exitCode: number;
  readonly issues: Issue[];
  constructor(readonly status: number, body: ErrorBody) {
    super(body.message);
    this.name = new.target.name;
    this.code = body.code;
    this.hint = body.hint;
    this.where = body.where;
    this.exitCode = body.exitCode;
    this.issues = body.issues ?? [];
  }
}

export class InvalidInputError extends SmolApiError {}
export class UserError extends SmolApiError {}
export class UnauthorizedError extends SmolApiError {}
export class NotFoundError extends SmolApiError {}
export class MethodNotAllowedError extends SmolApiError {}
export class ConflictError extends SmolApiError {}
export class PayloadTooLargeError extends SmolApiError {}
export class TimeoutError extends SmolApiError {}
export class GuestChannelError extends SmolApiError {}
export class BootFailedError extends SmolApiError {}
export class PrerequisiteError extends SmolApiError {}
export class InternalError extends SmolApiError {}

const byCode: Record<string, new (status: number, body: ErrorBody) => SmolApiError> = {
  invalid_input: InvalidInputError,
  user_error: UserError,
  unauthorized: UnauthorizedError,
  not_found: NotFoundError,
  method_not_allowed: MethodNotAllowedError,
  conflict: ConflictError,
  payload_too_large: PayloadTooLargeError,
  timeout: TimeoutError,
  guest_channel: GuestChannelError,
  boot_failed: BootFailedError,
  prerequisite: PrerequisiteError,
  internal: InternalError,
};

/** The server could not be reached (no socket, refused, TLS failure): nothing was asked of it. */
export class SmolConnectionError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'SmolConnectionError';
  }
}

/** The server answered something that is not the API (a proxy's page, a cut stream, an oversized event). */
export class SmolProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SmolProtocolError';
  }
}

const isErrorBody = (v: unknown): v is { error: ErrorBody } => {
  const e = (v as { error?: Partial<ErrorBody> } | null)?.error;
  return !!e && typeof e.code === 'string' && typeof e.message === 'string' && typeof e.exitCode === 'number';
};

/**
 * The exception for a non-2xx answer. A body that is not the error shape (a proxy in between) still becomes a
 * SmolApiError with its status, so callers have one type to catch.
 */
export function apiError(status: number, body: unknown): SmolApiError {
  if (isErrorBody(body)) return new (byCode[body.error.code] ?? SmolApiError)(status, body.error);
  const text = typeof body === 'string' ? body.slice(0, 200) : JSON.stringify(body)?.slice(0, 200);
  return new SmolApiError(status, {
    code: status === 401 ? 'unauthorized' : 'http_error', exitCode: 1,
    message: `the server answered HTTP ${status} without smol's error shape${text ? `: ${text}` : ''}`,
    hint: 'Is the URL a smol serve (GET /v1/health answers {"ok":true})?',
  });
}
