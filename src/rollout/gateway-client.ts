/**
 * Client side of the inference gateway API (v1), used by workers for GPU stages. node:http/https rather
 * than fetch: a worker on another host must trust a private CA (`--gateway-ca`), which Node 20's fetch can
 * only do through the undici package or NODE_EXTRA_CA_CERTS at process start.
 */
import http from 'node:http';
import https from 'node:https';
import { SmolError, ExitCode, PrerequisiteError, UserError, ValidationError, type ErrorDetail } from '../errors/index.js';

/** A bad file or value, named where it came from (a flag, FILE:LINE). */
const invalid = (message: string, d: ErrorDetail & { where: string }) => new ValidationError(message, [{ path: d.where, message }], d);
import { readCapped, sizeLabel } from '../util/read-capped.js';
import { readTokenFile, parseTokens } from './gateway/tokens.js';

export interface InferRequest {
  apiVersion: 'v1';
  requestId: string;
  rolloutId: string;
  idempotencyKey: string;
  model: { name: string; version: string };
  promptVersion: string;
  input: { ref: string; text: string };
  params: Record<string, unknown>;
  /** Absolute epoch ms; the gateway sheds the request once it passes. */
  deadline: number;
}

export interface InferResponse {
  apiVersion: 'v1';
  requestId: string;
  idempotencyKey: string;
  status: 'ok';
  replayed: boolean;
  output: { ref: string; text: string };
  timing: { queuedMs: number; upstreamMs: number; totalMs: number; batchSize: number };
  model: { name: string; version: string };
  environmentVersion: string;
}

/** Where the gateway is and how to talk to it: a bare URL, or with a bearer token and a CA to trust. */
export interface GatewayEndpoint {
  url: string;
  token?: string;
  /** PEM certificates trusted for an https URL (instead of the system's roots). */
  ca?: string | Buffer;
}

/** A non-2xx answer; `retryAfterMs` is set for 429 overload answers. A refused token is 69, as for a registry. */
export class GatewayError extends SmolError {
  constructor(message: string, readonly status: number, readonly retryAfterMs: number | null, readonly body: unknown, hint?: string) {
    super(message, status === 401 || status === 403 ? ExitCode.prerequisite : status === 429 || status >= 500 ? ExitCode.tempFail : ExitCode.failure, { hint });
  }
}

/** The gateway could not be reached or spoken to (refused, reset, TLS): not an answer, so a retry may help. */
export class GatewayUnreachableError extends SmolError {
  constructor(message: string, readonly code: string | undefined, hint?: string) {
    super(message, ExitCode.tempFail, { hint });
  }
}

/** The gateway's certificate is not trusted: retrying will not help until the worker is given the CA. */
export class GatewayTrustError extends PrerequisiteError {}

/** An answer past this is not one: outputs are model text, far below it. */
export const GATEWAY_MAX_ANSWER_BYTES = 64 * 1024 * 1024;
const CA_MAX_BYTES = 1024 * 1024;

const TRUST_CODES = new Set([
  'DEPTH_ZERO_SELF_SIGNED_CERT', 'SELF_SIGNED_CERT_IN_CHAIN', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'CERT_UNTRUSTED', 'CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID', 'CERT_SIGNATURE_FAILURE', 'ERR_TLS_CERT_ALTNAME_INVALID',
]);

const plainAgent = new http.Agent({ keepAlive: true });
const systemTlsAgent = new https.Agent({ keepAlive: true });
const caAgents = new WeakMap<GatewayEndpoint, https.Agent>();

function agentFor(ep: GatewayEndpoint, tls: boolean): http.Agent {
  if (!tls) return plainAgent;
  if (!ep.ca) return systemTlsAgent;
  let a = caAgents.get(ep);
  if (!a) caAgents.set(ep, a = new https.Agent({ keepAlive: true, ca: ep.ca }));
  return a;
}

function connectionError(err: NodeJS.ErrnoException, ep: GatewayEndpoint): Error {
  const code = err.code;
  if (err.name === 'AbortError') return err;
  if (code && TRUST_CODES.has(code)) {
    return new GatewayTrustError(`the gateway ${ep.url} presented a certificate this worker does not trust (${code}: ${err.message})`, {
      where: ep.url, hint: ep.ca ? 'The --gateway-ca file does not hold the CA that signed the gateway\'s certificate, or the certificate does not name this host: check its subjectAltName.' : 'Pass --gateway-ca FILE with the CA (PEM) that signed the gateway\'s --tls-cert.',
    });
  }
  const wrongScheme = code === 'EPROTO' || code === 'ERR_SSL_WRONG_VERSION_NUMBER' || code === 'HPE_INVALID_CONSTANT';
  return new GatewayUnreachableError(`cannot reach the gateway ${ep.url}: ${code ?? err.name} ${err.message}`, code,
    wrongScheme ? 'Does the gateway serve HTTPS (it was started with --tls-cert)? Then its URL starts https://, and otherwise http://.' : undefined);
}

function post(ep: GatewayEndpoint, path: string, body: string, headers: Record<string, string>, signal?: AbortSignal): Promise<{ status: number; headers: http.IncomingHttpHeaders; text: string | null }> {
  const url = new URL(path, ep.url);
  const tls = url.protocol === 'https:';
  return new Promise((resolve, reject) => {
    const req = (tls ? https : http).request(url, {
      method: 'POST', agent: agentFor(ep, tls), signal,
      headers: { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), ...(ep.token ? { authorization: `Bearer ${ep.token}` } : {}), ...headers },
    }, (res) => {
      const chunks: Buffer[] = [];
      let size = 0;
      res.on('data', (c: Buffer) => {
        size += c.length;
        if (size > GATEWAY_MAX_ANSWER_BYTES) { res.destroy(); resolve({ status: res.statusCode ?? 0, headers: res.headers, text: null }); return; }
        chunks.push(c);
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', (err) => reject(connectionError(err, ep)));
    });
    req.on('error', (err) => reject(connectionError(err, ep)));
    req.end(body);
  });
}

export async function infer(base: string | GatewayEndpoint, req: InferRequest, signal?: AbortSignal): Promise<InferResponse> {
  const ep = typeof base === 'string' ? { url: base } : base;
  const res = await post(ep, '/v1/infer', JSON.stringify(req), { 'idempotency-key': req.idempotencyKey }, signal);
  if (res.text === null) throw new GatewayError(`the gateway ${ep.url} answered more than ${sizeLabel(GATEWAY_MAX_ANSWER_BYTES)}`, 502, null, null);
  type Body = { error?: { message?: string } } | null;
  let body: Body = null;
  try { body = JSON.parse(res.text) as Body; } catch { /* a proxy's HTML page, say: the status tells the story */ }
  if (res.status >= 200 && res.status < 300 && body) return body as unknown as InferResponse;
  if (res.status === 401) {
    throw new GatewayError(`the gateway ${ep.url} refused this worker (401): ${body?.error?.message ?? 'no valid token'}`, 401, null, body,
      ep.token ? 'The token sent is not in the gateway\'s --token-file: check $SMOL_GATEWAY_TOKEN or --gateway-token-file.' : 'Give the worker the gateway\'s token in $SMOL_GATEWAY_TOKEN or --gateway-token-file FILE.');
  }
  const ra = res.headers['retry-after'];
  throw new GatewayError(`gateway answered ${res.status}: ${body?.error?.message ?? http.STATUS_CODES[res.status] ?? 'no message'}`, res.status, ra ? Number(ra) * 1000 : null, body);
}

/**
 * The endpoint a worker uses: the token from `tokenFile` (its first token: the gateway's own file will do)
 * or else $SMOL_GATEWAY_TOKEN, and the CA from `caFile`. Errors name the flag or variable.
 */
export function gatewayEndpoint(o: { url: string; tokenFile?: string; caFile?: string }, env: NodeJS.ProcessEnv = process.env): GatewayEndpoint {
  const ep: GatewayEndpoint = { url: o.url };
  if (o.tokenFile) {
    const tokens = readTokenFile(o.tokenFile, '--gateway-token-file');
    if (tokens.length === 0) throw invalid(`the token file ${o.tokenFile} holds no token`, { where: '--gateway-token-file', hint: 'Put the gateway\'s token on a line of its own.' });
    ep.token = tokens[0];
  } else if (env.SMOL_GATEWAY_TOKEN?.trim()) {
    const tokens = parseTokens(env.SMOL_GATEWAY_TOKEN.trim(), '$SMOL_GATEWAY_TOKEN');
    if (tokens.length !== 1) throw invalid('$SMOL_GATEWAY_TOKEN must hold one token', { where: '$SMOL_GATEWAY_TOKEN' });
    ep.token = tokens[0];
  }
  if (o.caFile) {
    if (new URL(o.url).protocol !== 'https:') throw new UserError(`--gateway-ca is for an https gateway, and ${o.url} is not one`, { where: '--gateway-ca', hint: 'Use the https:// URL of a gateway started with --tls-cert/--tls-key.' });
    ep.ca = readPem(o.caFile, '--gateway-ca');
  }
  return ep;
}

/** A PEM file named by a flag, bounded, and checked to hold a certificate so a wrong file fails here. */
export function readPem(file: string, what: string, kind: 'CERTIFICATE' | 'PRIVATE KEY' = 'CERTIFICATE'): string {
  let text: string | null;
  try {
    text = readCapped(file, CA_MAX_BYTES);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new UserError(`cannot read ${file}${code ? ` (${code})` : ''}`, { where: what, cause: err }, code === 'ENOENT' ? ExitCode.notFound : ExitCode.usage);
  }
  if (text === null) throw invalid(`${file} is over ${sizeLabel(CA_MAX_BYTES)}: not a PEM file`, { where: what });
  const marker = kind === 'CERTIFICATE' ? /-----BEGIN CERTIFICATE-----/ : /-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----/;
  if (!marker.test(text)) throw invalid(`${file} holds no PEM ${kind.toLowerCase()}`, { where: what, hint: `Give a PEM file (-----BEGIN ${kind}-----).` });
  return text;
}
