/**
 * HTTP front of the gateway (node:http, or node:https with a certificate): POST /v1/infer, GET /v1/stats,
 * GET /v1/health, GET /v1/blobs/:digest, and OpenAI's POST /v1/chat/completions and GET /v1/models for the
 * official clients. Anything else gets OpenAI's 404 body; no request is left without an answer. With tokens,
 * every path but /v1/health needs one (401 in OpenAI's shape otherwise).
 */
import http from 'node:http';
import https from 'node:https';
import { isIP } from 'node:net';
import type { AddressInfo } from 'node:net';
import { UserError } from '../../errors/index.js';
import { isDigest } from '../../ledger/blobs.js';
import type { ChatAnswer } from './chat.js';
import { notJson, openAiError, fromUpstream, unauthorized, unknownUrl, type OpenAiErrorAnswer } from './openai-errors.js';
import type { GatewayService } from './service.js';
import { sseBody } from './sse.js';
import type { TokenSet } from './tokens.js';
import { GATEWAY_KEEP_ALIVE_MS, GATEWAY_MAX_BODY_BYTES } from '../limits.js';

function send(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const data = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data), ...headers });
  res.end(data);
}

function sendError(res: http.ServerResponse, e: OpenAiErrorAnswer): void {
  send(res, e.status, e.body, e.headers);
}

function sendChat(res: http.ServerResponse, a: ChatAnswer): void {
  if (!('completion' in a)) return sendError(res, a);
  if (!a.stream) return send(res, 200, a.completion, a.headers);
  const data = sseBody(a.completion, a.includeUsage);
  res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'content-length': Buffer.byteLength(data), ...a.headers });
  res.end(data);
}

async function readBody(req: http.IncomingMessage): Promise<string | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req) {
    size += (c as Buffer).length;
    if (size > GATEWAY_MAX_BODY_BYTES) return null;
    chunks.push(c as Buffer);
  }
  return Buffer.concat(chunks).toString('utf8');
}

export interface GatewayServer { url: string; server: http.Server | https.Server; close(): Promise<void> }

export interface GatewaySecurity {
  /** Without it anyone who can connect is served: see `listenProblem`. */
  tokens?: TokenSet;
  /** PEM certificate chain and key: the gateway serves HTTPS. */
  tls?: { cert: string | Buffer; key: string | Buffer };
}

export async function startGatewayServer(svc: GatewayService, blobs: { getText(d: string): string | Promise<string> }, listen: { host: string; port: number }, security: GatewaySecurity = {}): Promise<GatewayServer> {
  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://x');
      // health stays open so load balancers and probes need no token; it says nothing but "ok"
      if (security.tokens && !(req.method === 'GET' && url.pathname === '/v1/health')) {
        const check = security.tokens.check(req.headers.authorization);
        if (check !== 'ok') {
          // read (a bounded amount of) what was sent, so the client reads the 401 instead of a reset
          if (await readBody(req) === null) res.shouldKeepAlive = false;
          return sendError(res, unauthorized(check));
        }
      }
      if (req.method === 'POST' && url.pathname === '/v1/infer') {
        const text = await readBody(req);
        if (text === null) return send(res, 413, { apiVersion: 'v1', status: 'invalid', error: { message: `body over ${GATEWAY_MAX_BODY_BYTES} bytes` } });
        let raw: unknown;
        try {
          raw = JSON.parse(text);
        } catch {
          return send(res, 400, { apiVersion: 'v1', status: 'invalid', error: { type: 'ValidationError', message: 'body is not JSON', issues: [{ path: '(root)', message: 'not JSON' }] } });
        }
        const a = await svc.handle(raw);
        return send(res, a.status, a.body, a.headers);
      }
      if (req.method === 'POST' && url.pathname === '/v1/chat/completions') {
        const text = await readBody(req);
        if (text === null) return sendError(res, openAiError(413, `The request body is over ${GATEWAY_MAX_BODY_BYTES} bytes.`, { code: 'request_too_large' }));
        let raw: unknown;
        try { raw = JSON.parse(text); } catch { return sendError(res, notJson()); }
        return sendChat(res, await svc.chat.handle(raw, req.headers));
      }
      if (req.method === 'GET' && url.pathname === '/v1/models') {
        const up = await svc.upstreamModels().catch((err: Error) => ({ status: 502, text: JSON.stringify({ error: { message: err.message } }) }));
        if (up.status === 200) return send(res, 200, JSON.parse(up.text));
        return sendError(res, fromUpstream(up.status, up.text, svc.upstreamUrl));
      }
      if (req.method === 'GET' && url.pathname === '/v1/stats') return send(res, 200, svc.stats());
      if (req.method === 'GET' && url.pathname === '/v1/health') return send(res, 200, { status: 'ok' });
      const m = /^\/v1\/blobs\/(sha256:[0-9a-f]{64})$/.exec(url.pathname);
      if (req.method === 'GET' && m && isDigest(m[1])) {
        try { return send(res, 200, { ref: m[1], text: await blobs.getText(m[1]) }); } catch { return send(res, 404, { error: { message: `no blob ${m[1]}` } }); }
      }
      // drain what was sent first, so the client is not cut off mid-upload and reads the answer
      for await (const _ of req) { /* discard */ }
      sendError(res, unknownUrl(req.method ?? '?', url.pathname));
    })().catch((err: unknown) => {
      if (!res.headersSent) sendError(res, openAiError(500, `the gateway failed: ${(err as Error).message}`, { code: 'internal_error' }));
      else res.destroy();
    });
  };
  const server = security.tls ? https.createServer({ cert: security.tls.cert, key: security.tls.key }, handler) : http.createServer(handler);
  server.keepAliveTimeout = GATEWAY_KEEP_ALIVE_MS;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port, listen.host, () => resolve());
  });
  const addr = server.address() as AddressInfo;
  const host = addr.family === 'IPv6' ? `[${addr.address}]` : addr.address;
  return {
    url: `${security.tls ? 'https' : 'http'}://${host}:${addr.port}`,
    server,
    close: async () => {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await svc.drain();
    },
  };
}

/** "HOST:PORT", ":PORT" or "PORT" → listen options (loopback unless a host is named). */
export function parseListen(addr: string): { host: string; port: number } {
  const m = /^(?:(.*):)?(\d+)$/.exec(addr);
  if (!m) throw new UserError(`not a listen address: ${addr}`, { where: '--listen', hint: 'Use HOST:PORT, :PORT or PORT.' });
  return { host: m[1] || '127.0.0.1', port: Number(m[2]) };
}

/** 127.0.0.0/8, ::1 (and ::ffff:127.x) and "localhost": addresses only this host can reach. */
export function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  if (h === 'localhost') return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  if (isIP(h) === 6) return h === '::1' || /^::ffff:127\./.test(h);
  return false;
}

/**
 * Why the gateway must not listen as asked, or null. Off loopback, anyone who can connect could run
 * inference on the GPU and read every stored completion, so tokens are required unless the user says
 * otherwise in so many words.
 */
export function listenProblem(host: string, o: { tokens: boolean; insecureNoAuth: boolean }): UserError | null {
  if (o.tokens && o.insecureNoAuth) return new UserError('--token-file and --insecure-no-auth contradict each other', { where: '--insecure-no-auth', hint: 'Drop --insecure-no-auth: with a token file every request needs a token.' });
  if (o.tokens || o.insecureNoAuth || isLoopback(host)) return null;
  return new UserError(`refusing to listen on ${host} without tokens: anyone who can reach it could run inference and read stored results`, {
    where: '--listen',
    hint: 'Give --token-file FILE (one token per line, e.g. from `openssl rand -hex 32`) and --tls-cert/--tls-key, listen on 127.0.0.1, or say --insecure-no-auth on a network you trust.',
  });
}
