import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BlobStore, digestOf } from '../../../src/ledger/blobs.js';
import { SqliteLedger } from '../../../src/ledger/sqlite.js';
import { GatewayService } from '../../../src/rollout/gateway/service.js';
import { startGatewayServer, type GatewayServer } from '../../../src/rollout/gateway/server.js';
import { OpenAiCompletionsUpstream } from '../../../src/rollout/gateway/upstream.js';
import { completionFor, startUpstream, type TestUpstream } from '../../fixtures/upstream/server.js';

let dir: string;
let ledger: SqliteLedger;
let blobs: BlobStore;
let up: TestUpstream;
let gw: GatewayServer;
let svc: GatewayService;

async function start(limits = { maxOutstanding: 100, maxPerRollout: 100 }, batch = { maxBatch: 8, windowMs: 30 }) {
  svc = new GatewayService({ ledger, blobs, upstream: new OpenAiCompletionsUpstream(up.url), envVersion: 'test-env', limits, batch });
  gw = await startGatewayServer(svc, blobs, { host: '127.0.0.1', port: 0 });
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- response bodies are checked field by field
type Json = Record<string, any>;
let n = 0;
function req(over: Record<string, unknown> = {}) {
  n++;
  return {
    apiVersion: 'v1', requestId: `q${n}`, rolloutId: 'r1', idempotencyKey: `k${n}`, model: { name: 'tiny', version: '1' },
    promptVersion: 'p1', input: { text: `prompt ${n}` }, params: { max_tokens: 8 }, deadline: Date.now() + 10_000, ...over,
  };
}
async function post(body: unknown) {
  const res = await fetch(`${gw.url}/v1/infer`, { method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' } });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as Json };
}

beforeEach(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-gw-'));
  ledger = new SqliteLedger({ path: path.join(dir, 'l.db') });
  blobs = new BlobStore(path.join(dir, 'blobs'));
  up = await startUpstream();
});
afterEach(async () => {
  await gw?.close();
  await up.close();
  await ledger.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('inference gateway', () => {
  it('batches compatible requests and keeps incompatible ones apart', async () => {
    // a long window, so the batch of 8 is cut by size and the odd one out by time
    await start({ maxOutstanding: 100, maxPerRollout: 100 }, { maxBatch: 8, windowMs: 1500 });
    const same = Array.from({ length: 8 }, () => req());
    const other = req({ params: { max_tokens: 99 } });
    const answers = await Promise.all([...same, other].map(post));
    expect(answers.every((a) => a.status === 200)).toBe(true);
    expect(up.calls.map((c) => c.prompts.length).sort()).toEqual([1, 8]);
    const a = answers[0].body;
    expect(a).toMatchObject({ apiVersion: 'v1', status: 'ok', replayed: false, environmentVersion: 'test-env', model: { name: 'tiny', version: '1' } });
    expect(a.output.text).toBe(completionFor('tiny', same[0].input.text));
    expect(a.output.ref).toBe(digestOf(a.output.text));
    expect(a.timing.batchSize).toBe(8);
    expect(answers[8].body.timing.batchSize).toBe(1);
  });

  it('is durable before it answers, and a repeated key replays without a second inference', async () => {
    await start();
    const r = req();
    const first = await post(r);
    const rec = await ledger.getInference(r.idempotencyKey);
    expect(rec).toMatchObject({ status: 'done', outputRef: first.body.output.ref, envVersion: 'test-env', batchSize: 1, modelVersion: '1' });
    expect(blobs.getText(rec!.outputRef!)).toBe(first.body.output.text);
    const again = await post({ ...r, requestId: 'retry' });
    expect(again.status).toBe(200);
    expect(again.body).toMatchObject({ replayed: true, requestId: 'retry', output: first.body.output });
    expect(up.calls).toHaveLength(1);
    const conflict = await post({ ...r, input: { text: 'something else' } });
    expect(conflict.status).toBe(409);
  });

  it('answers overload with 429 and Retry-After, per rollout and overall', async () => {
    // the upstream holds each batch long enough for every check below, on a loaded host too
    up.setDelay(3000);
    await start({ maxOutstanding: 3, maxPerRollout: 2 }, { maxBatch: 8, windowMs: 5 });
    const admitted = async (k: number) => { while (svc.stats().admission.outstanding < k) await new Promise((r) => setTimeout(r, 5)); };
    const a = [post(req()), post(req())];
    await admitted(2);
    const third = await post(req());
    expect(third.status).toBe(429);
    expect(Number(third.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(third.body.status).toBe('overloaded');
    const otherRollout = post(req({ rolloutId: 'r2' }));
    await admitted(3);
    const overall = await post(req({ rolloutId: 'r3' }));
    expect(overall.status).toBe(429);
    expect((await Promise.all([...a, otherRollout])).map((x) => x.status)).toEqual([200, 200, 200]);
    expect(svc.stats().admission.rejected).toBe(2);
  });

  it('sheds requests whose deadline passes before or while they wait', async () => {
    await start({ maxOutstanding: 100, maxPerRollout: 100 }, { maxBatch: 8, windowMs: 200 });
    expect((await post(req({ deadline: Date.now() - 1 }))).status).toBe(504);
    const r = req({ deadline: Date.now() + 50 });
    const shed = await post(r);
    expect(shed).toMatchObject({ status: 504, body: { status: 'deadline_exceeded' } });
    expect((await ledger.getInference(r.idempotencyKey))?.status).toBe('shed');
    expect(up.calls).toHaveLength(0);
  });

  it('rejects malformed requests with field paths and records nothing', async () => {
    await start();
    const bad = await post({ ...req(), model: { name: 'x' }, deadline: 'soon', extra: 1 });
    expect(bad.status).toBe(400);
    expect(bad.body.error.issues.map((i: { path: string }) => i.path).sort()).toEqual(['(root)', 'deadline', 'model.version']);
    const notJson = await fetch(`${gw.url}/v1/infer`, { method: 'POST', body: '{' });
    expect(notJson.status).toBe(400);
    expect((await ledger.stats()).inference.requests).toBe(0);
  });

  it('reports upstream failure as 502, records it, and serves the key once the upstream recovers', async () => {
    await start();
    up.setFailing(true);
    const r = req();
    expect((await post(r)).status).toBe(502);
    expect((await ledger.getInference(r.idempotencyKey))?.status).toBe('failed');
    up.setFailing(false);
    const ok = await post(r);
    expect(ok.status).toBe(200);
    expect((await ledger.getInference(r.idempotencyKey))?.status).toBe('done');
  });
});
