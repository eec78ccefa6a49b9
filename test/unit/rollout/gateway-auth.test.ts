/**
 * The gateway's bearer tokens: a real gateway server over node:http with a token file, refusing a missing
 * or wrong token with OpenAI's 401 and accepting the right one; the worker's client sending the token from
 * $SMOL_GATEWAY_TOKEN or --gateway-token-file; reloads; and the refusal to listen off loopback bare.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { main } from '../../../src/cli/main.js';
import { BlobStore } from '../../../src/ledger/blobs.js';
import { SqliteLedger } from '../../../src/ledger/sqlite.js';
import { GatewayError, gatewayEndpoint, infer, type InferRequest } from '../../../src/rollout/gateway-client.js';
import { GatewayService } from '../../../src/rollout/gateway/service.js';
import { isLoopback, listenProblem, startGatewayServer, type GatewayServer } from '../../../src/rollout/gateway/server.js';
import { parseTokens, TokenSet, watchTokens } from '../../../src/rollout/gateway/tokens.js';
import { OpenAiCompletionsUpstream } from '../../../src/rollout/gateway/upstream.js';
import { completionFor, startUpstream, type TestUpstream } from '../../fixtures/upstream/server.js';

const TOKEN = 'a'.repeat(20) + '-worker-one';
const OTHER = 'b'.repeat(32);

let dir: string;
let tokenFile: string;
let ledger: SqliteLedger;
let up: TestUpstream;
let gw: GatewayServer;
let tokens: TokenSet;

beforeEach(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-gw-auth-'));
  tokenFile = path.join(dir, 'tokens');
  fs.writeFileSync(tokenFile, `# workers\n\n  ${TOKEN}  \n# revoked: ${OTHER}\n`);
  ledger = new SqliteLedger({ path: path.join(dir, 'l.db') });
  const blobs = new BlobStore(path.join(dir, 'blobs'));
  up = await startUpstream();
  tokens = TokenSet.load(tokenFile);
  const svc = new GatewayService({ ledger, blobs, upstream: new OpenAiCompletionsUpstream(up.url), envVersion: 'env', limits: { maxOutstanding: 10, maxPerRollout: 10 }, batch: { maxBatch: 1, windowMs: 0 } });
  gw = await startGatewayServer(svc, blobs, { host: '127.0.0.1', port: 0 }, { tokens });
});
afterEach(async () => {
  await gw.close();
  await up.close();
  await ledger.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

let n = 0;
function request(): InferRequest {
  n++;
  return {
    apiVersion: 'v1', requestId: `q${n}`, rolloutId: 'r1', idempotencyKey: `auth-${n}`, model: { name: 'tiny', version: '1' },
    promptVersion: 'p1', input: { ref: '', text: `prompt ${n}` }, params: {}, deadline: Date.now() + 10_000,
  };
}
const withoutRef = (r: InferRequest) => ({ ...r, input: { text: r.input.text } }) as unknown as InferRequest;

async function raw(pathname: string, auth?: string) {
  const res = await fetch(`${gw.url}${pathname}`, {
    method: pathname === '/v1/infer' ? 'POST' : 'GET', headers: { 'content-type': 'application/json', ...(auth ? { authorization: auth } : {}) },
    body: pathname === '/v1/infer' ? JSON.stringify(withoutRef(request())) : undefined,
  });
  return { status: res.status, headers: res.headers, body: (await res.json()) as { error: Record<string, unknown> } };
}

describe('gateway tokens', () => {
  it('refuses a missing or wrong token with OpenAI\'s 401 and WWW-Authenticate: Bearer', async () => {
    const missing = await raw('/v1/infer');
    expect(missing.status).toBe(401);
    expect(missing.body).toEqual({ error: { message: expect.stringContaining('Authorization: Bearer'), type: 'invalid_request_error', param: null, code: 'missing_api_key' } });
    expect(missing.headers.get('www-authenticate')).toBe('Bearer realm="smol gateway"');
    expect(missing.headers.get('x-should-retry')).toBe('false');
    for (const auth of [`Bearer ${OTHER}`, `Bearer ${TOKEN}x`, `Bearer ${TOKEN.slice(0, -1)}`]) {
      const wrong = await raw('/v1/infer', auth);
      expect(wrong.status).toBe(401);
      expect(wrong.body.error).toMatchObject({ type: 'invalid_request_error', code: 'invalid_api_key' });
      expect(String(wrong.body.error.message)).not.toContain(auth.slice(7));
      expect(wrong.headers.get('www-authenticate')).toBe('Bearer realm="smol gateway", error="invalid_token"');
    }
    // not Bearer, or a token with no scheme, counts as none
    expect((await raw('/v1/infer', `Basic ${TOKEN}`)).body.error.code).toBe('missing_api_key');
    expect((await raw('/v1/stats')).status).toBe(401);
    expect((await raw('/v1/chat/completions')).status).toBe(401);
    expect((await raw('/v1/nope')).status).toBe(401);
    expect(up.calls).toHaveLength(0);
    // health stays open, and says nothing else
    const health = await fetch(`${gw.url}/v1/health`);
    expect([health.status, await health.json()]).toEqual([200, { status: 'ok' }]);
    expect((await raw('/v1/stats', `bearer ${TOKEN}`)).status).toBe(200);
  });

  it('the worker\'s client sends the token from $SMOL_GATEWAY_TOKEN or --gateway-token-file', async () => {
    const r = withoutRef(request());
    const viaEnv = await infer(gatewayEndpoint({ url: gw.url }, { SMOL_GATEWAY_TOKEN: `${TOKEN}\n` }), r);
    expect(viaEnv.output.text).toBe(completionFor('tiny', r.input.text));
    const file = path.join(dir, 'worker-token');
    fs.writeFileSync(file, `# the gateway's token\n${TOKEN}\n`);
    // the file wins over the variable
    const viaFile = await infer(gatewayEndpoint({ url: gw.url, tokenFile: file }, { SMOL_GATEWAY_TOKEN: OTHER }), withoutRef(request()));
    expect(viaFile.status).toBe('ok');

    const refused = await infer(gatewayEndpoint({ url: gw.url }, {}), withoutRef(request())).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(GatewayError);
    expect(refused).toMatchObject({ status: 401, exitCode: 69, hint: expect.stringContaining('SMOL_GATEWAY_TOKEN') });
    expect((refused as Error).message).toMatch(/refused this worker \(401\): You didn't provide an API key/);
    const wrong = await infer(gatewayEndpoint({ url: gw.url }, { SMOL_GATEWAY_TOKEN: OTHER }), withoutRef(request())).catch((e: unknown) => e);
    expect(wrong).toMatchObject({ status: 401, hint: expect.stringContaining('not in the gateway\'s --token-file') });

    expect(() => gatewayEndpoint({ url: gw.url, tokenFile: path.join(dir, 'none') })).toThrow(expect.objectContaining({ exitCode: 66, where: '--gateway-token-file' }));
    expect(() => gatewayEndpoint({ url: gw.url }, { SMOL_GATEWAY_TOKEN: 'short' })).toThrow(expect.objectContaining({ exitCode: 65 }));
  });

  it('reads the file again on SIGHUP: new tokens in, removed ones out, a broken file changes nothing', async () => {
    const logged: string[] = [];
    const stop = watchTokens(tokens, (l) => logged.push(l));
    try {
      fs.writeFileSync(tokenFile, `${OTHER}\n`);
      process.emit('SIGHUP', 'SIGHUP');
      expect(logged.at(-1)).toBe(`gateway: SIGHUP: 1 token(s) from ${tokenFile}`);
      expect((await raw('/v1/stats', `Bearer ${OTHER}`)).status).toBe(200);
      expect((await raw('/v1/stats', `Bearer ${TOKEN}`)).status).toBe(401);
      fs.writeFileSync(tokenFile, 'tooshort\n');
      process.emit('SIGHUP', 'SIGHUP');
      expect(logged.at(-1)).toMatch(/keeping the previous tokens.*tokens:1 is 8 characters/);
      expect((await raw('/v1/stats', `Bearer ${OTHER}`)).status).toBe(200);
    } finally {
      stop();
    }
  });
});

describe('token files', () => {
  it('skips blank lines and comments, and names FILE:LINE for a bad token', () => {
    expect(parseTokens(`\n# c\n${TOKEN}\r\n\t${OTHER}\n`, 'f')).toEqual([TOKEN, OTHER]);
    expect(() => parseTokens(`# c\nabc\n`, 'f')).toThrow(expect.objectContaining({ where: 'f:2', exitCode: 65, message: expect.stringContaining('at least 16') }));
    expect(() => parseTokens(`${TOKEN} ${OTHER}\n`, 'f')).toThrow(expect.objectContaining({ where: 'f:1' }));
    const t = new TokenSet([TOKEN]);
    expect([t.check(`Bearer ${TOKEN}`), t.check(`BEARER  ${TOKEN} `), t.check(TOKEN), t.check(undefined), t.check(`Bearer ${OTHER}`)]).toEqual(['ok', 'ok', 'missing', 'missing', 'wrong']);
    const empty = path.join(dir, 'empty');
    fs.writeFileSync(empty, '# nobody yet\n');
    expect(() => TokenSet.load(empty)).toThrow(/holds no tokens/);
  });
});

describe('listening off loopback', () => {
  it('is refused without a token file unless --insecure-no-auth', () => {
    for (const h of ['127.0.0.1', '127.8.0.1', '::1', '[::1]', 'localhost', '::ffff:127.0.0.1']) expect(isLoopback(h)).toBe(true);
    for (const h of ['0.0.0.0', '::', '10.0.0.2', 'gpu-box', '::ffff:10.0.0.1']) expect(isLoopback(h)).toBe(false);
    expect(listenProblem('0.0.0.0', { tokens: false, insecureNoAuth: false })).toMatchObject({ exitCode: 64, where: '--listen', message: expect.stringContaining('refusing to listen on 0.0.0.0 without tokens') });
    expect(listenProblem('0.0.0.0', { tokens: true, insecureNoAuth: false })).toBeNull();
    expect(listenProblem('0.0.0.0', { tokens: false, insecureNoAuth: true })).toBeNull();
    expect(listenProblem('127.0.0.1', { tokens: false, insecureNoAuth: false })).toBeNull();
    expect(listenProblem('127.0.0.1', { tokens: true, insecureNoAuth: true })?.exitCode).toBe(64);
  });

  it('smol gateway exits 64 before opening anything, and with --insecure-no-auth serves', async () => {
    const err = vi.spyOn(process.stderr, 'write').mockImplementation(() => true);
    const out = vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
    const env = { SMOL_HOME: process.env.SMOL_HOME, SMOL_LEDGER: process.env.SMOL_LEDGER };
    process.env.SMOL_HOME = dir;
    process.env.SMOL_LEDGER = '';
    try {
      expect(await main(['node', 'smol', 'gateway', '--listen', '0.0.0.0:0', '--upstream', up.url])).toBe(64);
      expect(err.mock.calls.map((c) => String(c[0])).join('')).toContain('--token-file');
      expect(fs.existsSync(path.join(dir, 'ledger.db'))).toBe(false);
      const running = main(['node', 'smol', 'gateway', '--listen', '0.0.0.0:0', '--upstream', up.url, '--insecure-no-auth', '--json']);
      await vi.waitFor(() => expect(out.mock.calls.length).toBeGreaterThan(0), { timeout: 10_000 });
      const { url, tokens: count } = JSON.parse(String(out.mock.calls[0][0])) as { url: string; tokens: number };
      expect([url.startsWith('http://0.0.0.0:'), count]).toEqual([true, 0]);
      expect((await fetch(`${url.replace('0.0.0.0', '127.0.0.1')}/v1/stats`)).status).toBe(200);
      process.emit('SIGTERM', 'SIGTERM');
      expect(await running).toBe(0);
    } finally {
      err.mockRestore();
      out.mockRestore();
      for (const [k, v] of Object.entries(env)) { if (v === undefined) delete process.env[k]; else process.env[k] = v; }
    }
  });
});
