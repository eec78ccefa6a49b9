/**
 * How long smol waits on a registry (and its token service and blob storage) before it gives up: a server
 * that accepts a connection and then says nothing, stops mid-headers, or never ends a body must fail the
 * pull, not hang it. Three phases, each with a default and an environment variable (seconds):
 *  - connect: TCP connect plus TLS handshake (SMOL_REGISTRY_CONNECT_TIMEOUT, 30 s);
 *  - response: from the request sent to the end of the response headers, and for small answers
 *    (manifests, tokens, upload replies) to the end of the body too (SMOL_REGISTRY_RESPONSE_TIMEOUT, 60 s);
 *  - idle: no bytes at all on the connection, mid-blob included (SMOL_REGISTRY_IDLE_TIMEOUT, 60 s).
 */
import { ExitCode, SmolError, UserError } from '../errors/index.js';

export interface Timeouts { connectMs: number; responseMs: number; idleMs: number }

export type Phase = 'connect' | 'response' | 'idle';

export const DEFAULT_TIMEOUTS: Timeouts = { connectMs: 30_000, responseMs: 60_000, idleMs: 60_000 };

export const TIMEOUT_ENV: Record<Phase, string> = {
  connect: 'SMOL_REGISTRY_CONNECT_TIMEOUT',
  response: 'SMOL_REGISTRY_RESPONSE_TIMEOUT',
  idle: 'SMOL_REGISTRY_IDLE_TIMEOUT',
};

function seconds(env: NodeJS.ProcessEnv, name: string, dfltMs: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return dfltMs;
  const s = Number(raw);
  if (!Number.isFinite(s) || s <= 0 || s > 86_400) throw new UserError(`${name} must be a number of seconds above 0 (at most 86400), got "${raw}"`, { where: name, hint: `Unset it for the default (${dfltMs / 1000} s).` });
  return Math.round(s * 1000);
}

export function registryTimeouts(env: NodeJS.ProcessEnv = process.env): Timeouts {
  return {
    connectMs: seconds(env, TIMEOUT_ENV.connect, DEFAULT_TIMEOUTS.connectMs),
    responseMs: seconds(env, TIMEOUT_ENV.response, DEFAULT_TIMEOUTS.responseMs),
    idleMs: seconds(env, TIMEOUT_ENV.idle, DEFAULT_TIMEOUTS.idleMs),
  };
}

const WHAT: Record<Phase, string> = {
  connect: 'did not complete the connection',
  response: 'did not answer',
  idle: 'sent nothing',
};

/** Where a request stopped, without the query (blob storage signs its URLs there). */
const shown = (u: URL) => `${u.origin}${u.pathname}`;

/** A server that went quiet in one phase of a request; the client says which registry and operation. */
export class StallError extends Error {
  constructor(readonly phase: Phase, readonly url: URL, readonly ms: number, readonly detail = '') {
    super(`${url.host} ${WHAT[phase]} within ${ms / 1000} s${detail}: ${shown(url)}`);
  }
}

/** The user's error for a stall: temporary (75), naming the operation, the registry, the URL and the knob to turn. */
export function stallError(err: StallError, what: string, registry: string): SmolError {
  const host = err.url.host === registry ? registry : `${err.url.host} (for ${registry})`;
  return new SmolError(`${what} failed: ${host} ${WHAT[err.phase]} within ${err.ms / 1000} s${err.detail}: ${shown(err.url)}`, ExitCode.tempFail, {
    cause: err, where: shown(err.url),
    hint: `Retry later; if the registry is only slow, raise ${TIMEOUT_ENV[err.phase]} (seconds, see docs/images.md).`,
  });
}
