/**
 * The official `openai` npm client against a real `smol gateway` process, in front of the test upstream:
 * chat completions plain and streamed (OpenAI's SSE chunks and `data: [DONE]`), `n`, the Idempotency-Key
 * header (one upstream call per key, the same completion back), 429 + Retry-After under overload with the
 * client's own retries waiting as told, and OpenAI-style error bodies for whatever the gateway or the
 * upstream refuses. Every call has a client timeout, so a hang fails the test instead of stalling it.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chatContentFor, startUpstream, type TestUpstream } from '../../fixtures/upstream/server.js';
import { smol, type Proc } from './procs.js';

let dir: string;
let up: TestUpstream;
const procs: Proc[] = [];

async function gateway(extra: string[] = []): Promise<string> {
  const p = smol(['gateway', '--listen', '127.0.0.1:0', '--upstream', up.url, '--env-version', 'test-env-7', '--json', ...extra], { SMOL_HOME: dir, SMOL_LEDGER: '' });
  procs.push(p);
  const ev = await p.waitFor((e) => typeof e.url === 'string');
  return String(ev.url);
}
const client = (url: string, o: Partial<ConstructorParameters<typeof OpenAI>[0]> = {}) =>
  new OpenAI({ baseURL: `${url}/v1`, apiKey: 'not-checked', timeout: 20_000, maxRetries: 0, ...o });
const ask = (content: string, over: Record<string, unknown> = {}) => ({ model: 'tiny-coder', messages: [{ role: 'user' as const, content }], ...over });

/** The error body exactly as OpenAI shapes it. */
function expectOpenAiError(err: unknown, status: number, want: { type?: string; param?: string | null; code?: string | null; message?: RegExp }) {
  expect(err).toBeInstanceOf(OpenAI.APIError);
  const e = err as InstanceType<typeof OpenAI.APIError>;
  expect(e.status).toBe(status);
  const body = e.error as Record<string, unknown>;
  expect(Object.keys(body).sort()).toEqual(['code', 'message', 'param', 'type']);
  if (want.type) expect(body.type).toBe(want.type);
  if (want.param !== undefined) expect(body.param).toBe(want.param);
  if (want.code !== undefined) expect(body.code).toBe(want.code);
  if (want.message) expect(String(body.message)).toMatch(want.message);
}
/**
 * The client has an `idempotencyKey` request option, but OpenAI's client class sets no idempotency header
 * name, so the option sends nothing (openai 6.49): the header is passed as a header.
 */
const key = (k: string) => ({ headers: { 'Idempotency-Key': k } });
async function rejection(p: Promise<unknown>): Promise<unknown> {
  try { await p; } catch (err) { return err; }
  throw new Error('expected the request to fail');
}

let gw: string;
beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-openai-'));
  up = await startUpstream();
  gw = await gateway();
});
afterAll(async () => {
  for (const p of procs) p.kill('SIGKILL');
  await up.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('the openai client against smol gateway', () => {
  it('creates a chat completion; the environment version is its system_fingerprint; models list passes through', async () => {
    const c = client(gw);
    const { data, response } = await c.chat.completions.create(ask('hello there')).withResponse();
    expect(data.object).toBe('chat.completion');
    expect(data.choices).toHaveLength(1);
    expect(data.choices[0].message).toMatchObject({ role: 'assistant', content: chatContentFor('tiny-coder', 'hello there') });
    expect(data.choices[0].finish_reason).toBe('stop');
    expect(data.system_fingerprint).toBe('test-env-7');
    expect(data.usage?.total_tokens).toBeGreaterThan(0);
    expect(response.headers.get('x-smol-replayed')).toBe('false');
    expect((await c.models.list()).data.map((m) => m.id)).toEqual(['tiny-coder']);
  });

  it('streams the same completion as OpenAI does: role, content pieces, finish reason, usage, [DONE]', async () => {
    const c = client(gw);
    const plain = await c.chat.completions.create(ask('stream me'));
    const stream = await c.chat.completions.create({ ...ask('stream me'), stream: true, stream_options: { include_usage: true } });
    const chunks = [];
    for await (const ch of stream) chunks.push(ch);
    expect(chunks.every((ch) => ch.object === 'chat.completion.chunk')).toBe(true);
    expect(chunks[0].choices[0].delta.role).toBe('assistant');
    const content = chunks.flatMap((ch) => ch.choices.map((x) => x.delta.content ?? '')).join('');
    expect(content).toBe(plain.choices[0].message.content);
    expect(chunks.length).toBeGreaterThan(3); // content in pieces, not one blob
    const withChoices = chunks.filter((ch) => ch.choices.length);
    expect(withChoices.at(-1)!.choices[0].finish_reason).toBe('stop');
    expect(chunks.at(-1)!.choices).toEqual([]);
    expect(chunks.at(-1)!.usage).toEqual(plain.usage);

    // on the wire: text/event-stream, one `data:` line per event, ending with data: [DONE]
    const res = await fetch(`${gw}/v1/chat/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(ask('stream me', { stream: true })) });
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    const events = (await res.text()).split('\n\n').filter(Boolean);
    expect(events.every((e) => e.startsWith('data: '))).toBe(true);
    expect(events.at(-1)).toBe('data: [DONE]');
  });

  it('n > 1: one choice per index, streamed or not', async () => {
    const c = client(gw);
    const plain = await c.chat.completions.create(ask('two please', { n: 2 }));
    expect(plain.choices.map((x) => [x.index, x.message.content])).toEqual([0, 1].map((j) => [j, chatContentFor('tiny-coder', 'two please', j)]));
    const stream = c.chat.completions.stream(ask('two please', { n: 2 }));
    const final = await stream.finalChatCompletion();
    expect(final.choices.map((x) => x.message.content)).toEqual(plain.choices.map((x) => x.message.content));
  });

  it('honours Idempotency-Key: the same key returns the stored completion and calls the upstream once', async () => {
    const c = client(gw);
    const before = up.chatCalls.length;
    up.setDelay(400);
    try {
      // two at once (the second joins the first in flight), then one more after it finished
      const [a, b] = await Promise.all([1, 2].map(() => c.chat.completions.create(ask('idempotent'), key('key-1')).withResponse()));
      const again = await c.chat.completions.create({ ...ask('idempotent'), stream: true }, key('key-1'));
      let streamed = '';
      for await (const ch of again) streamed += ch.choices[0]?.delta.content ?? '';
      expect(up.chatCalls.slice(before).map((x) => JSON.stringify(x.body))).toHaveLength(1);
      expect(b.data.id).toBe(a.data.id);
      expect(b.data).toEqual(a.data);
      expect(streamed).toBe(a.data.choices[0].message.content);
      expect([a, b].map((x) => x.response.headers.get('x-smol-replayed')).sort()).toEqual(['false', 'true']);
      // a different request under a used key is refused, and the client does not retry it
      const err = await rejection(client(gw, { maxRetries: 3 }).chat.completions.create(ask('something else'), key('key-1')));
      expectOpenAiError(err, 400, { type: 'invalid_request_error', code: 'idempotency_key_reused', param: 'Idempotency-Key' });
      expect(up.chatCalls.length - before).toBe(1);
    } finally {
      up.setDelay(0);
    }
  });

  it('the client retries through upstream failures under one key, and the key then holds the completion', async () => {
    const before = up.chatCalls.length;
    up.setFailing(true);
    setTimeout(() => up.setFailing(false), 300);
    const r = await client(gw, { maxRetries: 4 }).chat.completions.create(ask('flaky'), key('key-2'));
    expect(r.choices[0].message.content).toBe(chatContentFor('tiny-coder', 'flaky'));
    const calls = up.chatCalls.length - before;
    expect(calls).toBeGreaterThan(1); // the client retried the 502s
    const again = await client(gw).chat.completions.create(ask('flaky'), key('key-2'));
    expect(again).toEqual(r);
    expect(up.chatCalls.length - before).toBe(calls);
  });

  it('answers 429 with Retry-After under overload, and the client waits that long before each retry', async () => {
    const small = await gateway(['--max-outstanding', '1']);
    up.setDelay(1500);
    try {
      const busy = client(small).chat.completions.create(ask('slow one'));
      const until = Date.now() + 10_000;
      while (!up.chatCalls.some((x) => x.messages[0].content === 'slow one') && Date.now() < until) await new Promise((r) => setTimeout(r, 20));

      const err = await rejection(client(small).chat.completions.create(ask('too many')));
      expect(err).toBeInstanceOf(OpenAI.RateLimitError);
      expectOpenAiError(err, 429, { type: 'requests', code: 'rate_limit_exceeded' });
      expect((err as InstanceType<typeof OpenAI.APIError>).headers?.get('retry-after')).toBe('1');

      const rejected = async () => ((await (await fetch(`${small}/v1/stats`)).json()) as { admission: { rejected: number } }).admission.rejected;
      const r0 = await rejected();
      const t0 = Date.now();
      const ok = await client(small, { maxRetries: 5 }).chat.completions.create(ask('patient'));
      const waited = Date.now() - t0;
      const refusals = (await rejected()) - r0;
      expect(ok.choices[0].message.content).toBe(chatContentFor('tiny-coder', 'patient'));
      expect(refusals).toBeGreaterThanOrEqual(1);
      expect(waited).toBeGreaterThanOrEqual(refusals * 1000 - 50); // Retry-After: 1 honoured every time
      await busy;
    } finally {
      up.setDelay(0);
    }
  });

  it('refuses what it does not serve with OpenAI-style errors, never a hang', async () => {
    const c = client(gw);
    expectOpenAiError(await rejection(c.embeddings.create({ model: 'tiny-coder', input: 'x' })), 404,
      { type: 'invalid_request_error', code: 'unknown_url', message: /^Invalid URL \(POST \/v1\/embeddings\)$/ });
    expectOpenAiError(await rejection(c.chat.completions.create(ask('use a tool', { tools: [{ type: 'function', function: { name: 'f', parameters: {} } }] }))), 400,
      { type: 'invalid_request_error', param: 'tools', message: /tools are not supported/ });
    expectOpenAiError(await rejection(c.chat.completions.create({ model: 'tiny-coder' } as never)), 400,
      { type: 'invalid_request_error', param: 'messages', code: 'missing_required_parameter' });
    expectOpenAiError(await rejection(c.chat.completions.create(ask('x', { n: 0 }))), 400, { param: 'n', code: 'invalid_value' });
    expectOpenAiError(await rejection(c.chat.completions.create(ask('x', { stream_options: { include_usage: true } }))), 400, { param: 'stream_options' });

    const raw = async (method: string, p: string, body?: string) => {
      const res = await fetch(`${gw}${p}`, { method, body, headers: { 'content-type': 'application/json' }, signal: AbortSignal.timeout(10_000) });
      return { status: res.status, body: (await res.json()) as { error: Record<string, unknown> } };
    };
    const bad = await raw('POST', '/v1/chat/completions', '{"model": "tiny-coder", "messages": [');
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ type: 'invalid_request_error', param: null, code: 'invalid_json' });
    expect((await raw('POST', '/v1/chat/completions', '[1, 2]')).status).toBe(400);
    const get = await raw('GET', '/v1/chat/completions');
    expect(get).toMatchObject({ status: 404, body: { error: { message: 'Invalid URL (GET /v1/chat/completions)', code: 'unknown_url' } } });

    up.setFailing(true);
    try {
      expectOpenAiError(await rejection(c.chat.completions.create(ask('upstream down'))), 502, { type: 'server_error', code: 'upstream_error', message: /answered 503/ });
    } finally {
      up.setFailing(false);
    }
  });
});
