/**
 * The gateway over HTTPS (node:https) with a certificate from a private CA made here by openssl: the
 * worker's client trusts it through --gateway-ca, fails with a clear error without it, and the official
 * `openai` npm client (in its own process, trusting the CA through NODE_EXTRA_CA_CERTS as a user's would)
 * works with the gateway token as its apiKey and gets OpenAI's AuthenticationError with another.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BlobStore } from '../../../src/ledger/blobs.js';
import { SqliteLedger } from '../../../src/ledger/sqlite.js';
import { GatewayTrustError, GatewayUnreachableError, gatewayEndpoint, infer, type InferRequest } from '../../../src/rollout/gateway-client.js';
import { GatewayService } from '../../../src/rollout/gateway/service.js';
import { startGatewayServer, type GatewayServer } from '../../../src/rollout/gateway/server.js';
import { TokenSet } from '../../../src/rollout/gateway/tokens.js';
import { OpenAiCompletionsUpstream } from '../../../src/rollout/gateway/upstream.js';
import { run } from '../../../src/util/exec.js';
import { chatContentFor, completionFor, startUpstream, type TestUpstream } from '../../fixtures/upstream/server.js';
import { makeCerts, type TestCerts } from '../../fixtures/tls.js';

const TOKEN = 'c0ffee'.repeat(6);
const root = path.resolve(import.meta.dirname, '..', '..', '..');

let dir: string;
let certs: TestCerts;
let ledger: SqliteLedger;
let up: TestUpstream;
let gw: GatewayServer;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-gw-tls-'));
  certs = await makeCerts(dir);
  ledger = new SqliteLedger({ path: path.join(dir, 'l.db') });
  const blobs = new BlobStore(path.join(dir, 'blobs'));
  up = await startUpstream();
  const svc = new GatewayService({ ledger, blobs, upstream: new OpenAiCompletionsUpstream(up.url), envVersion: 'env', limits: { maxOutstanding: 10, maxPerRollout: 10 }, batch: { maxBatch: 1, windowMs: 0 } });
  gw = await startGatewayServer(svc, blobs, { host: '127.0.0.1', port: 0 }, { tokens: new TokenSet([TOKEN]), tls: { cert: certs.cert, key: certs.key } });
});
afterAll(async () => {
  await gw?.close();
  await up?.close();
  await ledger?.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

let n = 0;
const request = () => {
  n++;
  return { apiVersion: 'v1', requestId: `t${n}`, rolloutId: 'r', idempotencyKey: `tls-${n}`, model: { name: 'tiny', version: '1' }, promptVersion: 'p', input: { text: `tls prompt ${n}` }, params: {}, deadline: Date.now() + 10_000 } as unknown as InferRequest;
};

describe('gateway over TLS', () => {
  it('serves https, and the worker trusts it through --gateway-ca', async () => {
    expect(gw.url).toMatch(/^https:\/\/127\.0\.0\.1:\d+$/);
    const ep = gatewayEndpoint({ url: gw.url, caFile: certs.caCert }, { SMOL_GATEWAY_TOKEN: TOKEN });
    const r = request();
    const res = await infer(ep, r);
    expect(res.output.text).toBe(completionFor('tiny', r.input.text));
    // the same name the certificate holds, by DNS
    expect((await infer({ ...ep, url: gw.url.replace('127.0.0.1', 'localhost') }, request())).status).toBe('ok');
  });

  it('a worker that does not trust the certificate fails with an error that says so and how to fix it', async () => {
    const err = await infer({ url: gw.url, token: TOKEN }, request()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GatewayTrustError);
    expect(err).toMatchObject({ exitCode: 69, hint: expect.stringContaining('--gateway-ca') });
    expect((err as Error).message).toMatch(/^the gateway https:\/\/127\.0\.0\.1:\d+ presented a certificate this worker does not trust \(UNABLE_TO_VERIFY_LEAF_SIGNATURE/);
    // a CA that did not sign it is no better
    const other = await makeCerts(fs.mkdtempSync(path.join(dir, 'other-')));
    const wrongCa = await infer({ url: gw.url, token: TOKEN, ca: other.ca }, request()).catch((e: unknown) => e);
    expect(wrongCa).toBeInstanceOf(GatewayTrustError);
    expect(wrongCa).toMatchObject({ hint: expect.stringContaining('does not hold the CA') });
    // plain http to the https port
    const plain = await infer({ url: gw.url.replace('https:', 'http:'), token: TOKEN }, request()).catch((e: unknown) => e);
    expect(plain).toBeInstanceOf(GatewayUnreachableError);
    expect(up.calls.length).toBe(2);
  });

  it('--gateway-ca wants an https URL and a PEM certificate', () => {
    expect(() => gatewayEndpoint({ url: 'http://127.0.0.1:1', caFile: certs.caCert })).toThrow(expect.objectContaining({ exitCode: 64, where: '--gateway-ca' }));
    expect(() => gatewayEndpoint({ url: gw.url, caFile: certs.serverKey })).toThrow(expect.objectContaining({ exitCode: 65, message: expect.stringContaining('holds no PEM certificate') }));
    expect(() => gatewayEndpoint({ url: gw.url, caFile: path.join(dir, 'nope.pem') })).toThrow(expect.objectContaining({ exitCode: 66 }));
  });

  it('the official openai client works over TLS with the token as its apiKey', async () => {
    const script = `
      import OpenAI from 'openai';
      const ask = (apiKey) => new OpenAI({ baseURL: process.env.GW + '/v1', apiKey, timeout: 15000, maxRetries: 0 })
        .chat.completions.create({ model: 'tiny-coder', messages: [{ role: 'user', content: 'hello over tls' }] });
      const ok = await ask(process.env.TOKEN);
      const bad = await ask('not-the-token-at-all-0000').catch((e) => e);
      console.log(JSON.stringify({ content: ok.choices[0].message.content, badClass: bad.constructor.name, badStatus: bad.status, badCode: bad.code }));
    `;
    const out = await run(process.execPath, ['--input-type=module', '-e', script], {
      cwd: root, timeoutMs: 30_000, env: { GW: gw.url, TOKEN, NODE_EXTRA_CA_CERTS: certs.caCert },
    });
    expect(JSON.parse(out.stdout)).toEqual({ content: chatContentFor('tiny-coder', 'hello over tls'), badClass: 'AuthenticationError', badStatus: 401, badCode: 'invalid_api_key' });
  });
});
