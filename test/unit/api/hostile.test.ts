/**
 * The server against hostile clients, in process on a scratch TCP port (no machine needed): what an
 * unauthenticated peer, a browser page or a slow sender can do to it.
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenSet } from '../../../src/rollout/gateway/tokens.js';
import { Router } from '../../../src/api/router.js';
import { allRoutes } from '../../../src/api/routes/index.js';
import { startApiServer, type ApiServer } from '../../../src/api/server.js';
import type { ApiContext } from '../../../src/api/context.js';
import { request } from '../../helpers/serve.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-api-hostile-'));
const token = 'a'.repeat(32);
let srv: ApiServer;
let port: number;
/** `--insecure-no-auth`: TCP with no tokens. */
let open: ApiServer;

const ctx = { home: dir, version: 'test', metrics: { requests: { inc: () => undefined } } } as unknown as ApiContext;

beforeAll(async () => {
  srv = await startApiServer(ctx, new Router(allRoutes), { socket: null, listen: { host: '127.0.0.1', port: 0 }, tokens: new TokenSet([token]) });
  port = Number(new URL(srv.url!).port);
  open = await startApiServer(ctx, new Router(allRoutes), { socket: null, listen: { host: '127.0.0.1', port: 0 } });
});
afterAll(async () => { await srv.close(); await open.close(); fs.rmSync(dir, { recursive: true, force: true }); });

/** Writes `text` on a fresh connection; `then` runs once it is sent. */
function raw(text: string, then: (c: net.Socket) => void, to = port): Promise<void> {
  return new Promise((resolve) => {
    const c = net.connect(to, '127.0.0.1', () => { c.write(text); then(c); });
    c.on('error', () => undefined);
    c.on('close', () => resolve());
  });
}

describe('api server against hostile clients', () => {
  it('survives clients that reset the connection during a WebSocket upgrade', async () => {
    const upgrade = 'GET /v1/machines/x/exec/ws?argv=sh HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n';
    // the reset lands before, during and after the 401 is written: each once was an uncaught ECONNRESET
    for (let i = 0; i < 60; i++) await raw(upgrade, (c) => setTimeout(() => c.resetAndDestroy(), i % 3));
    await new Promise((r) => setTimeout(r, 100));
    expect((await request('/v1/health', { url: srv.url! })).status).toBe(200);
  });

  it('refuses any request from a web page: a cross-site POST, a cross-site WebSocket', async () => {
    // what a page's <form> or fetch(no-cors) sends: text/plain, no preflight, Origin set by the browser
    const post = await request('/v1/machines', { url: open.url!, method: 'POST', rawBody: '{"name":"x"}', headers: { 'content-type': 'text/plain', origin: 'https://evil.example' } });
    expect(post.status).toBe(403);
    expect(post.json()).toMatchObject({ error: { code: 'forbidden', where: 'Origin' } });
    // a browser's WebSocket to the exec route: the refusal comes before the upgrade
    let answer = '';
    await raw('GET /v1/machines/x/exec/ws?argv=sh HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://evil.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n', (c) => {
      c.on('data', (d: Buffer) => { answer += d.toString(); });
    }, Number(new URL(open.url!).port));
    expect(answer).toMatch(/^HTTP\/1\.1 403 /);
    expect(answer).toContain('"forbidden"');
  });

  it('refuses a DNS name in Host without tokens (rebinding), and takes IP literals and localhost', async () => {
    const rebound = await request('/v1/health', { url: open.url!, headers: { host: 'attacker.example:8480' } });
    expect(rebound.status).toBe(403);
    expect(rebound.json()).toMatchObject({ error: { code: 'forbidden', where: 'Host' } });
    for (const host of ['127.0.0.1:8480', 'localhost', '[::1]:8480']) {
      expect((await request('/v1/health', { url: open.url!, headers: { host } })).status).toBe(200);
    }
    // with tokens a name is fine: a page cannot send the bearer token
    expect((await request('/v1/health', { url: srv.url!, headers: { host: 'smol.example.com' } })).status).toBe(200);
  });

  it('closes a connection whose headers trickle in past the headers timeout (slowloris)', async () => {
    const slow = await startApiServer(ctx, new Router(allRoutes), { socket: null, listen: { host: '127.0.0.1', port: 0 }, limits: { headersTimeoutMs: 300, checkIntervalMs: 100 } });
    try {
      let answer = '';
      let sent = 0;
      await raw('GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n', (c) => {
        c.on('data', (d: Buffer) => { answer += d.toString(); });
        // one header every 100 ms for up to 10 s: node's defaults (60 s, checked every 30 s) keep it open all along
        const t = setInterval(() => { if (++sent > 100 || c.destroyed) { clearInterval(t); c.destroy(); } else c.write(`x-${sent}: y\r\n`); }, 100);
      }, Number(new URL(slow.url!).port));
      expect(answer).toMatch(/^HTTP\/1\.1 408 /);
      expect(sent).toBeLessThan(100);
    } finally {
      await slow.close();
    }
  });

  it('closes connections past the cap at once, and takes new ones when one goes', async () => {
    const capped = await startApiServer(ctx, new Router(allRoutes), { socket: null, listen: { host: '127.0.0.1', port: 0 }, limits: { maxConnections: 2 } });
    const to = Number(new URL(capped.url!).port);
    const idle = await Promise.all([0, 1].map(() => new Promise<net.Socket>((resolve) => { const c = net.connect(to, '127.0.0.1', () => resolve(c)); })));
    try {
      await new Promise((r) => setTimeout(r, 50)); // the server has accepted both
      await expect(request('/v1/health', { url: capped.url! })).rejects.toThrow(/socket hang up|ECONNRESET/);
      idle[0].destroy();
      await new Promise((r) => setTimeout(r, 50));
      expect((await request('/v1/health', { url: capped.url! })).status).toBe(200);
    } finally {
      for (const c of idle) c.destroy();
      await capped.close();
    }
  });

  it('answers query keys named after Object.prototype as unknown keys (400), on routes with and without a query', async () => {
    const auth = { authorization: `Bearer ${token}` };
    for (const q of ['toString=x', '__proto__=x', 'constructor=1&label=a']) {
      for (const route of ['/v1/machines', '/v1/health']) {
        const r = await request(`${route}?${q}`, { url: srv.url!, headers: auth });
        expect(r.status, `${route}?${q}: ${r.text}`).toBe(400);
        expect(r.json()).toMatchObject({ error: { code: 'invalid_input', where: 'query' } });
      }
    }
  });

  it('refuses a JSON body nested past JSON_BODY_MAX_DEPTH as invalid input, not a stack overflow', async () => {
    const d = 300_000; // 600 KB: under the 1 MiB cap, and past any recursion that walks it
    const r = await request('/v1/machines', { url: open.url!, method: 'POST', rawBody: `{"smolfile":{"a":${'['.repeat(d)}${']'.repeat(d)}}}` });
    expect(r.status, r.text).toBe(400);
    expect(r.json()).toMatchObject({ error: { code: 'invalid_input', where: 'body' } });
    // a deep but sane body still reaches its schema
    const ok = await request('/v1/machines', { url: open.url!, method: 'POST', body: { labels: { a: 'b' }, nope: [[[1]]] } });
    expect(ok.json()).toMatchObject({ error: { code: 'invalid_input', issues: [{ path: '(root)' }] } });
  });

  it('routes the path it was sent: //host/v1/x is not /v1/x', async () => {
    for (const target of ['//evil/v1/health', '//v1/health']) {
      let answer = '';
      await raw(`GET ${target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`, (c) => c.on('data', (d: Buffer) => { answer += d.toString(); }));
      expect(answer, target).toMatch(/^HTTP\/1\.1 404 /);
    }
  });
});
