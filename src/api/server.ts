/**
 * `smol serve`: the HTTP API on a Unix socket ($SMOL_HOME/smol.sock, mode 0600: its file mode is the guard) and,
 * when asked, on TCP with bearer tokens and optional TLS. Every request goes through one handler: auth, route
 * match, validation, the route's handler, and errors in the one shape of errors.ts.
 */
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { ConflictError, UserError } from '../errors/index.js';
import type { TokenSet } from '../rollout/gateway/tokens.js';
import { ApiError, httpError } from './errors.js';
import { sweepScratch } from './files-io.js';
import { Router, routeInputs, type Match } from './router.js';
import type { ApiContext } from './context.js';

export interface ServeOptions {
  /** The Unix socket path; null: no socket (TCP only). */
  socket: string | null;
  listen?: { host: string; port: number };
  tokens?: TokenSet;
  tls?: { cert: string | Buffer; key: string | Buffer };
  /** SERVER_LIMITS by default; tests shorten them. */
  limits?: Partial<ServerLimits>;
}

export interface ServerLimits {
  /** A client's request line and headers arrive within this (slowloris); node's default is 60 s. */
  headersTimeoutMs: number;
  /** A request's body arrives within this; streams and execs that answer for longer are not cut by it. */
  requestTimeoutMs: number;
  /** How often the two timeouts above are checked (node's default, 30 s, lets a header trickle live 90 s). */
  checkIntervalMs: number;
  /** Connections per listener, streams included; past it a new one is closed at once, not queued. */
  maxConnections: number;
}

export const SERVER_LIMITS: ServerLimits = { headersTimeoutMs: 20_000, requestTimeoutMs: 300_000, checkIntervalMs: 5_000, maxConnections: 512 };

export interface ApiServer {
  socket: string | null;
  url: string | null;
  close(): Promise<void>;
}

/** The bearer check: only TCP connections with a token set configured; the Unix socket is guarded by its mode. */
function authorize(req: http.IncomingMessage, route: Match['route'], tokens: TokenSet | undefined): void {
  if (!tokens || route.public) return;
  const check = tokens.check(req.headers.authorization);
  if (check === 'ok') return;
  throw new ApiError(401, 'unauthorized', check === 'missing' ? 'a bearer token is required' : 'the bearer token is not accepted', {
    where: 'Authorization', hint: 'Send Authorization: Bearer TOKEN with a token from the server\'s --token-file.',
  }, 64);
}

/** What a listener checks before routing: tokens (TCP), and Host names (TCP without tokens). */
interface Guard { tokens: TokenSet | undefined; checkHost: boolean }

/** An IP literal or localhost, with or without a port: names a rebinding DNS server cannot point here. */
const LITERAL_HOST = /^(localhost|\d{1,3}(\.\d{1,3}){3}|\[[0-9a-fA-F:.]+\])(:\d{1,5})?$/;

/**
 * The API is for programs, not browsers. A web page can make a browser send a simple POST, or open a WebSocket,
 * to any address (no CORS preflight for either), and a browser says where it came from in Origin: refusing
 * Origin stops a page from creating machines or running commands through a server without tokens. Without
 * tokens, a Host that is a DNS name is refused too: a rebinding DNS server could otherwise point a page's own
 * name at this port and read the answers.
 */
function refuseBrowsers(req: http.IncomingMessage, g: Guard): void {
  const origin = req.headers.origin;
  if (origin !== undefined) {
    throw new ApiError(403, 'forbidden', `requests from a web page are refused (Origin: ${origin.slice(0, 200)})`, {
      where: 'Origin', hint: 'Call the API from a program (curl, the SDKs) that sends no Origin header; a browser page cannot use smol serve.',
    }, 64);
  }
  if (g.checkHost && !LITERAL_HOST.test(req.headers.host ?? '')) {
    throw new ApiError(403, 'forbidden', `Host ${JSON.stringify((req.headers.host ?? '').slice(0, 200))} is refused on a listener without tokens`, {
      where: 'Host', hint: 'Connect by IP address (http://127.0.0.1:PORT), or give the server --token-file.',
    }, 64);
  }
}

/**
 * The request target as a URL. Resolved against a base, `//host/v1/x` would be the path `/v1/x` on `host`: a
 * proxy in front that filters by path prefix would see one path and this server route another.
 */
function requestUrl(req: http.IncomingMessage): URL {
  const target = req.url ?? '/';
  if (target.startsWith('/')) return new URL(`http://smol${target}`);
  if (URL.canParse(target)) return new URL(target); // absolute-form, as a proxy sends it
  throw new ApiError(400, 'user_error', `the request target ${JSON.stringify(target.slice(0, 200))} is not a path`, { hint: 'Send a path such as /v1/machines.' });
}

export function sendJson(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
  res.end(text);
}

function handler(ctx: ApiContext, router: Router, g: Guard) {
  return (req: http.IncomingMessage, res: http.ServerResponse) => {
    const abort = new AbortController();
    // the response closing before it finished is the client going away: streams and execs stop on it
    res.on('close', () => { if (!res.writableFinished) abort.abort(); });
    let label = 'unmatched';
    void (async () => {
      try {
        refuseBrowsers(req, g);
        const url = requestUrl(req);
        const m = router.match(req.method ?? 'GET', url.pathname);
        label = m.route.path;
        authorize(req, m.route, g.tokens);
        const inputs = await routeInputs(m, req, url);
        const reply = await m.route.handle({ ...inputs, req, res, signal: abort.signal, ctx } as Parameters<Match['route']['handle']>[0]);
        if (reply && !res.headersSent) sendJson(res, reply.status ?? 200, reply.body, reply.headers);
      } catch (err) {
        const { status, body } = httpError(err);
        if (!res.headersSent) {
          // the rest of an unread body is not worth reading: close the connection after the answer
          if (!req.complete) res.shouldKeepAlive = false;
          sendJson(res, status, body, status === 401 ? { 'www-authenticate': 'Bearer' } : {});
        } else if (!res.writableEnded) {
          res.destroy(); // mid-stream: the client sees a cut stream, not a body in the wrong format
        }
      } finally {
        ctx.metrics.requests.inc({ route: label, status: String(res.statusCode) });
      }
    })();
  };
}

function upgrader(ctx: ApiContext, router: Router, g: Guard) {
  return (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    // node:http drops its own error listener on an upgrade: a client resetting now would be an uncaught
    // ECONNRESET that ends the server, so until `ws` takes the socket a failure only ends this connection
    socket.on('error', () => socket.destroy());
    void (async () => {
      try {
        refuseBrowsers(req, g);
        const url = requestUrl(req);
        const m = router.match(req.method ?? 'GET', url.pathname);
        authorize(req, m.route, g.tokens);
        if (!m.route.upgrade) throw new ApiError(400, 'user_error', `${url.pathname} is not a WebSocket route`);
        const { params, query } = await routeInputs(m, req, url);
        m.route.upgrade({ params, query, req, socket, head, ctx } as Parameters<NonNullable<Match['route']['upgrade']>>[0]);
      } catch (err) {
        const { status, body } = httpError(err);
        const text = JSON.stringify(body);
        socket.end(`HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? ''}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n${status === 401 ? 'www-authenticate: Bearer\r\n' : ''}\r\n${text}`);
      }
    })();
  };
}

/**
 * A socket file left by a server that died is replaced; one a live server answers on is refused (two servers
 * on one socket would each think they own it); anything that is not a socket is never removed.
 */
export async function claimSocket(file: string): Promise<void> {
  let st: fs.Stats;
  try {
    st = fs.lstatSync(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return;
    throw err;
  }
  if (!st.isSocket()) throw new UserError(`${file} exists and is not a socket; refusing to replace it`, { where: '--socket', hint: 'Remove it yourself or pass --socket with another path.' });
  const live = await new Promise<boolean>((resolve) => {
    const c = net.connect(file);
    c.once('connect', () => { c.destroy(); resolve(true); });
    c.once('error', () => resolve(false));
  });
  if (live) throw new ConflictError(`another smol serve is listening on ${file}`, { where: '--socket', hint: 'Stop it first, or pass --socket with another path.' });
  fs.unlinkSync(file);
}

function listenOn(server: http.Server, target: { path: string } | { host: string; port: number }): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    if ('path' in target) {
      // bind happens inside listen(): under this umask the socket is born 0600, with no window at a wider mode
      const old = process.umask(0o177);
      try {
        server.listen(target.path, () => resolve());
      } finally {
        process.umask(old);
      }
    } else server.listen(target.port, target.host, () => resolve());
  });
}

/** node:http's own guards against slow and numerous clients, set from `limits`. */
function serverOptions(l: ServerLimits): http.ServerOptions {
  return { headersTimeout: l.headersTimeoutMs, requestTimeout: l.requestTimeoutMs, connectionsCheckingInterval: l.checkIntervalMs };
}

export async function startApiServer(ctx: ApiContext, router: Router, o: ServeOptions): Promise<ApiServer> {
  const limits = { ...SERVER_LIMITS, ...o.limits };
  await sweepScratch(ctx.home); // what a server killed mid-transfer left in $SMOL_HOME/tmp
  const servers: http.Server[] = [];
  let socket: string | null = null;
  let url: string | null = null;
  try {
    if (o.socket) {
      await claimSocket(o.socket);
      const guard = { tokens: undefined, checkHost: false };
      const s = http.createServer(serverOptions(limits), handler(ctx, router, guard));
      s.maxConnections = limits.maxConnections;
      s.on('upgrade', upgrader(ctx, router, guard));
      await listenOn(s, { path: o.socket });
      fs.chmodSync(o.socket, 0o600);
      servers.push(s);
      socket = o.socket;
    }
    if (o.listen) {
      const guard = { tokens: o.tokens, checkHost: !o.tokens };
      const h = handler(ctx, router, guard);
      const s = o.tls ? https.createServer({ ...serverOptions(limits), cert: o.tls.cert, key: o.tls.key }, h) : http.createServer(serverOptions(limits), h);
      s.maxConnections = limits.maxConnections;
      s.on('upgrade', upgrader(ctx, router, guard));
      await listenOn(s, o.listen);
      servers.push(s);
      const a = s.address() as AddressInfo;
      url = `${o.tls ? 'https' : 'http'}://${a.family === 'IPv6' ? `[${a.address}]` : a.address}:${a.port}`;
    }
  } catch (err) {
    for (const s of servers) s.close();
    throw err;
  }
  return {
    socket, url,
    close: async () => {
      await Promise.all(servers.map((s) => new Promise<void>((resolve) => {
        s.close(() => resolve());
        s.closeAllConnections();
      })));
    },
  };
}
