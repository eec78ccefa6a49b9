/** The server's auth and body rules, in process on a scratch socket and TCP port (health needs no machine). */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TokenSet } from '../../../src/rollout/gateway/tokens.js';
import { Router } from '../../../src/api/router.js';
import { allRoutes } from '../../../src/api/routes/index.js';
import { claimSocket, startApiServer, type ApiServer } from '../../../src/api/server.js';
import type { ApiContext } from '../../../src/api/context.js';
import { request } from '../../helpers/serve.js';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-api-'));
const token = 'a'.repeat(32);
let srv: ApiServer;

beforeAll(async () => {
  const ctx = { home: dir, version: 'test', metrics: { requests: { inc: () => undefined } } } as unknown as ApiContext;
  srv = await startApiServer(ctx, new Router(allRoutes), { socket: path.join(dir, 'smol.sock'), listen: { host: '127.0.0.1', port: 0 }, tokens: new TokenSet([token]) });
});
afterAll(async () => { await srv.close(); fs.rmSync(dir, { recursive: true, force: true }); });

describe('api server auth', () => {
  it('makes the socket 0600 and refuses a second server on it', async () => {
    expect(fs.statSync(srv.socket!).mode & 0o777).toBe(0o600);
    await expect(claimSocket(srv.socket!)).rejects.toThrow(/another smol serve/);
  });

  it('needs the bearer token on TCP, but not for health', async () => {
    expect((await request('/v1/health', { url: srv.url! })).status).toBe(200);
    const missing = await request('/v1/machines', { url: srv.url! });
    expect(missing.status).toBe(401);
    expect(missing.json()).toMatchObject({ error: { code: 'unauthorized' } });
    expect((await request('/v1/machines', { url: srv.url!, headers: { authorization: `Bearer ${'b'.repeat(32)}` } })).status).toBe(401);
    // the token admits it to routing: an unknown route is then 404, not 401
    expect((await request('/v1/nope', { url: srv.url!, headers: { authorization: `Bearer ${token}` } })).status).toBe(404);
  });

  it('answers an oversized JSON body with 413', async () => {
    const big = await request('/v1/machines', { method: 'POST', rawBody: 'x'.repeat(2 * 1024 * 1024), socket: srv.socket! });
    expect(big.status).toBe(413);
    expect(big.json()).toMatchObject({ error: { code: 'payload_too_large' } });
  });
});
