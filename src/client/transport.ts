/**
 * The wire: openapi-fetch's typed calls (paths and bodies from schema.ts) over undici, to `smol serve`'s Unix
 * socket or a TCP/HTTPS URL with a bearer token. JSON answers are read with a cap, and every failure leaves as
 * a SmolApiError (an answer) or a SmolConnectionError (no answer), never as fetch's bare TypeError.
 */
import os from 'node:os';
import path from 'node:path';
import createClient, { type Client } from 'openapi-fetch';
import { Agent, fetch as undiciFetch, Request as UndiciRequest, type Dispatcher } from 'undici';
import { apiError, SmolConnectionError, SmolProtocolError } from './errors.js';
import type { paths } from './schema.js';

export interface SmolOptions {
  /** `smol serve`'s socket; default `$SMOL_HOME/smol.sock` (SMOL_HOME as the CLI defaults it). */
  socketPath?: string;
  /** `http://HOST:PORT` or `https://HOST:PORT` of `smol serve --listen`; default `$SMOL_URL`; wins over the socket. */
  url?: string;
  /** The bearer token for a TCP server; default `$SMOL_TOKEN`. */
  token?: string;
  /** PEM of the CA that signed an HTTPS server's certificate (one not in Node's store). */
  ca?: string | Uint8Array;
  /** Environment to read the defaults from (tests); default process.env. */
  env?: Record<string, string | undefined>;
}

/** More than any JSON answer the API sends (exec output is capped at 64 MiB a stream, base64 grows it). */
export const MAX_JSON_BYTES = 256 * 1024 * 1024;

/** As src/util/paths.ts's smolHome (the client imports nothing of src): $SMOL_HOME, $XDG_DATA_HOME/smol, ~/.local/share/smol. */
export function defaultSocketPath(env: Record<string, string | undefined> = process.env): string {
  if (env.SMOL_HOME) return path.join(path.resolve(env.SMOL_HOME), 'smol.sock');
  const xdg = env.XDG_DATA_HOME || path.join(os.homedir(), '.local', 'share');
  return path.join(xdg, 'smol', 'smol.sock');
}

export interface Transport {
  api: Client<paths>;
  /**
   * POST a JSON body and read a JSON answer through undici's own request API: the hot path (exec). fetch's
   * WHATWG Request and Response objects cost about 3 ms a call on 2 busy cores, more than the server's route.
   */
  postJson<T>(pathname: string, body: unknown, signal?: AbortSignal): Promise<T>;
  /** Where requests go, for messages: the socket path or the URL. */
  where: string;
  close(): Promise<void>;
}

export function openTransport(o: SmolOptions = {}): Transport {
  const env = o.env ?? process.env;
  const url = o.url ?? env.SMOL_URL;
  const token = o.token ?? env.SMOL_TOKEN;
  let baseUrl: string;
  let where: string;
  // no undici timeouts: a buffered exec answers when its command ends, which the server bounds by timeoutMs;
  // callers bound their own waits with an AbortSignal
  const timeouts = { headersTimeout: 0, bodyTimeout: 0 };
  let agent: Agent;
  if (url) {
    const u = new URL(url);
    if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new TypeError(`url ${url}: expected http://HOST:PORT or https://HOST:PORT`);
    baseUrl = u.origin + u.pathname.replace(/\/+$/, '');
    where = baseUrl;
    agent = new Agent({ ...timeouts, connect: o.ca ? { ca: typeof o.ca === 'string' ? o.ca : Buffer.from(o.ca) } : {} });
  } else {
    const socketPath = o.socketPath ?? defaultSocketPath(env);
    baseUrl = 'http://localhost';
    where = socketPath;
    agent = new Agent({ ...timeouts, connect: { socketPath } });
  }

  const send = async (req: Request): Promise<Response> => {
    let res: Awaited<ReturnType<typeof undiciFetch>>;
    try {
      res = await undiciFetch(req as unknown as UndiciRequest, { dispatcher: agent });
    } catch (err) {
      throw connectionError(err, where, url === undefined);
    }
    return capJson(res as unknown as Response);
  };
  const api = createClient<paths>({
    baseUrl, fetch: send, Request: UndiciRequest as unknown as typeof Request,
    headers: token ? { authorization: `Bearer ${token}` } : undefined,
  });
  const headers: Record<string, string> = { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) };
  const origin = url === undefined ? 'http://localhost' : new URL(baseUrl).origin;
  const prefix = url === undefined ? '' : new URL(baseUrl).pathname.replace(/\/+$/, '');
  const postJson = async <T>(pathname: string, body: unknown, signal?: AbortSignal): Promise<T> => {
    let res: Dispatcher.ResponseData;
    try {
      res = await agent.request({ origin, path: prefix + pathname, method: 'POST', headers, body: JSON.stringify(body), signal });
    } catch (err) {
      throw connectionError(err, where, url === undefined);
    }
    const text = await cappedText(res.body);
    let json: unknown;
    try {
      json = text ? JSON.parse(text) as unknown : undefined;
    } catch {
      throw new SmolProtocolError(`POST ${pathname} answered ${res.statusCode} with a body that is not JSON: ${text.slice(0, 200)}`);
    }
    if (res.statusCode < 200 || res.statusCode > 299) throw apiError(res.statusCode, json);
    return json as T;
  };
  return { api, postJson, where, close: () => agent.close() };
}

function connectionError(err: unknown, where: string, socket: boolean): Error {
  if ((err as Error)?.name === 'AbortError') return err as Error;
  const cause = (err as { cause?: { code?: string; message?: string } })?.cause;
  const why = cause?.code ?? cause?.message ?? (err as Error)?.message ?? String(err);
  const fix = socket ? `Start the server: smol serve (or pass { socketPath } / { url, token }).` : 'Check the URL and that `smol serve --listen` runs there.';
  return new SmolConnectionError(`cannot reach smol serve at ${where}: ${why}. ${fix}`, { cause: err });
}

/** A body read whole as text, refused past MAX_JSON_BYTES. */
async function cappedText(body: Dispatcher.ResponseData['body']): Promise<string> {
  const chunks: Buffer[] = [];
  let seen = 0;
  for await (const c of body as AsyncIterable<Buffer>) {
    seen += c.length;
    if (seen > MAX_JSON_BYTES) {
      body.destroy();
      throw new SmolProtocolError(`JSON answer larger than ${MAX_JSON_BYTES} bytes`);
    }
    chunks.push(c);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** A JSON answer past the cap is cut with an error instead of read whole into memory. */
function capJson(res: Response): Response {
  if (!res.body || !(res.headers.get('content-type') ?? '').includes('json')) return res;
  if (Number(res.headers.get('content-length') ?? 0) <= MAX_JSON_BYTES && res.headers.has('content-length')) return res;
  let seen = 0;
  const capped = res.body.pipeThrough(new TransformStream<Uint8Array, Uint8Array>({
    transform(chunk, ctl) {
      seen += chunk.length;
      if (seen > MAX_JSON_BYTES) ctl.error(new SmolProtocolError(`JSON answer larger than ${MAX_JSON_BYTES} bytes`));
      else ctl.enqueue(chunk);
    },
  }));
  return new Response(capped, { status: res.status, statusText: res.statusText, headers: res.headers });
}

/** The data of a typed call, or its error as the SmolApiError subclass of its code. */
export async function must<T>(call: Promise<{ data?: T; error?: unknown; response: Response }>): Promise<T> {
  const { data, error, response } = await call;
  if (!response.ok) throw apiError(response.status, error);
  return data as T;
}
