/**
 * `POST /v1/chat/completions`, OpenAI's API as its clients send it, in front of an OpenAI-compatible
 * upstream: the `Idempotency-Key` header makes a retry return the stored completion (one upstream call per
 * key), admission control answers 429 with Retry-After, every completion is in the ledger and blob store
 * before the client hears of it, and every refusal is an OpenAI-style error body.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import { z } from 'zod';
import { digestOf, type BlobStore } from '../../ledger/blobs.js';
import type { InferenceRecord, Ledger } from '../../ledger/types.js';
import type { Admission } from './admission.js';
import { fromUpstream, openAiError, type OpenAiErrorAnswer } from './openai-errors.js';
import { canonical } from './schema.js';
import type { Upstream } from './upstream.js';

/** The fields the gateway itself reads; everything else passes through to the upstream untouched. */
export const chatRequestSchema = z.looseObject({
  model: z.string().min(1),
  messages: z.array(z.looseObject({ role: z.string().min(1) })).min(1),
  stream: z.boolean().nullish(),
  stream_options: z.looseObject({ include_usage: z.boolean().nullish() }).nullish(),
  n: z.number().int().min(1).max(128).nullish(),
});

export type ChatAnswer =
  | OpenAiErrorAnswer
  | { status: 200; completion: Record<string, unknown>; stream: boolean; includeUsage: boolean; headers: Record<string, string> };

export interface ChatDeps {
  ledger: Ledger;
  blobs: BlobStore;
  upstream: Upstream;
  envVersion: string;
  admission: Admission;
}

const KEY_PREFIX = 'chat:';
type Completed = { completion: Record<string, unknown>; replayed?: true } | { error: OpenAiErrorAnswer };
interface RunArgs { key: string; requestId: string; rolloutId: string; hash: string; model: string; request: Record<string, unknown> }

/** A zod issue as OpenAI words it: the parameter's path in `param`, missing vs invalid in `code`. */
function invalid(issue: z.core.$ZodIssue): OpenAiErrorAnswer {
  const param = issue.path.map((p, i) => (typeof p === 'number' ? `[${p}]` : `${i ? '.' : ''}${String(p)}`)).join('') || null;
  if (issue.code === 'invalid_type' && /received undefined/.test(issue.message)) {
    return openAiError(400, `Missing required parameter: '${param}'.`, { param, code: 'missing_required_parameter' });
  }
  return openAiError(400, `Invalid value for '${param}': ${issue.message}.`, { param, code: issue.code === 'invalid_type' ? 'invalid_type' : 'invalid_value' });
}

export class ChatCompletions {
  private readonly inflight = new Map<string, { hash: string; p: Promise<Completed> }>();
  readonly counters = { requests: 0, replayed: 0, upstreamCalls: 0, errors: 0 };

  constructor(private readonly d: ChatDeps) {}

  async handle(raw: unknown, headers: IncomingHttpHeaders): Promise<ChatAnswer> {
    this.counters.requests++;
    const answer = await this.answer(raw, headers);
    if (answer.status !== 200) this.counters.errors++;
    return answer;
  }

  private async answer(raw: unknown, headers: IncomingHttpHeaders): Promise<ChatAnswer> {
    if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return openAiError(400, 'The request body must be a JSON object.', { code: 'invalid_type' });
    const parsed = chatRequestSchema.safeParse(raw);
    if (!parsed.success) return invalid(parsed.error.issues[0]);
    const body = parsed.data;
    if (body.stream_options && !body.stream) {
      return openAiError(400, "The 'stream_options' parameter is only allowed when 'stream' is enabled.", { param: 'stream_options', code: 'invalid_value' });
    }
    const header = (n: string) => { const v = headers[n]; return Array.isArray(v) ? v[0] : v; };
    // streamed or not, it is the same completion: those fields stay out of the request's identity
    const { stream: _s, stream_options: _so, ...request } = body;
    const hash = digestOf(canonical(request));
    const key = KEY_PREFIX + (header('idempotency-key') ?? randomUUID());
    const requestId = header('x-request-id') ?? `chatcmpl-${randomUUID()}`;
    const rolloutId = header('x-smol-rollout-id') ?? 'chat';
    const out = (c: Completed, replayed: boolean): ChatAnswer => ('error' in c ? c.error : {
      status: 200, completion: c.completion, stream: body.stream === true, includeUsage: body.stream_options?.include_usage === true,
      headers: { 'x-request-id': requestId, 'x-smol-replayed': String(replayed), 'x-smol-environment-version': this.d.envVersion },
    });

    // joined before any await, so two requests with one key can never both reach the upstream
    const joined = this.inflight.get(key);
    if (joined && joined.hash !== hash) return this.reused(key);
    const replayed = joined !== undefined;
    let p = joined?.p;
    if (!p) {
      p = this.lookupOrRun({ key, requestId, rolloutId, hash, model: body.model, request }).finally(() => this.inflight.delete(key));
      this.inflight.set(key, { hash, p });
    }
    const c = await p;
    if ('replayed' in c || replayed) this.counters.replayed++;
    return out(c, replayed || 'replayed' in c);
  }

  private async lookupOrRun(r: RunArgs): Promise<Completed> {
    const stored = await this.d.ledger.getInference(r.key);
    if (stored?.status === 'done') {
      if (stored.requestHash !== r.hash) return { error: this.reused(r.key) };
      return { completion: JSON.parse(await this.d.blobs.getText(stored.outputRef!)) as Record<string, unknown>, replayed: true };
    }
    const wait = this.d.admission.tryAdmit(r.rolloutId);
    if (wait !== null) {
      return { error: openAiError(429, `Rate limit reached: too many outstanding requests at this gateway. Please try again in ${wait}s.`, { code: 'rate_limit_exceeded', headers: { 'retry-after': String(wait) } }) };
    }
    const started = Date.now();
    try {
      return await this.run(r);
    } finally {
      this.d.admission.release(r.rolloutId, Date.now() - started);
    }
  }

  private reused(key: string): OpenAiErrorAnswer {
    return openAiError(400, `Idempotency-Key ${key.slice(KEY_PREFIX.length)} was already used for a different request; use a new key for a new request.`, { param: 'Idempotency-Key', code: 'idempotency_key_reused' });
  }

  /** One upstream call; the completion is durable (blob, then ledger row) before anyone is answered. */
  private async run({ key, requestId, rolloutId, hash, model, request }: RunArgs): Promise<Completed> {
    const { ledger, blobs, upstream, envVersion } = this.d;
    const { messages: _m, ...params } = request;
    const inputRef = await blobs.put(canonical(request));
    await ledger.beginInference([{
      idempotencyKey: key, requestId, rolloutId, requestHash: hash, model, modelVersion: '-', promptVersion: 'chat.completions',
      inputRef, params: canonical(params),
    }]);
    const finish = (o: { status: 'done' | 'failed'; outputRef?: string; upstreamMs?: number; error?: string }) => ledger.finishInference([{
      idempotencyKey: key, status: o.status, outputRef: o.outputRef ?? null, envVersion, batchId: null, batchSize: 1, upstreamMs: o.upstreamMs ?? null, error: o.error ?? null,
    }]);
    const t0 = performance.now();
    let res: { status: number; text: string };
    try {
      this.counters.upstreamCalls++;
      res = await upstream.forward('POST', '/v1/chat/completions', JSON.stringify({ ...request, stream: false }));
    } catch (err) {
      await finish({ status: 'failed', error: (err as Error).message });
      return { error: openAiError(502, (err as Error).message, { code: 'upstream_unreachable' }) };
    }
    const upstreamMs = performance.now() - t0;
    let completion: Record<string, unknown> | null = null;
    if (res.status >= 200 && res.status < 300) {
      try { completion = JSON.parse(res.text) as Record<string, unknown>; } catch { /* handled below */ }
      if (!completion || !Array.isArray(completion.choices)) {
        await finish({ status: 'failed', error: `upstream sent no completion: ${res.text.slice(0, 200)}` });
        return { error: openAiError(502, `upstream ${upstream.url} sent something that is not a chat completion: ${res.text.slice(0, 200)}`, { code: 'upstream_error' }) };
      }
    } else {
      const e = fromUpstream(res.status, res.text, upstream.url);
      await finish({ status: 'failed', error: `${res.status}: ${e.body.error.message}` });
      return { error: e };
    }
    // system_fingerprint is OpenAI's "backend configuration" field: the environment version when the upstream gives none
    completion = { ...completion, object: 'chat.completion', id: completion.id ?? requestId, created: completion.created ?? Math.floor(Date.now() / 1000), system_fingerprint: completion.system_fingerprint ?? envVersion };
    const outputRef = await blobs.put(JSON.stringify(completion));
    await finish({ status: 'done', outputRef, upstreamMs });
    // another gateway on the same ledger may have finished this key first: its answer is the one on record
    const rec: InferenceRecord | null = await ledger.getInference(key);
    if (rec?.outputRef && rec.outputRef !== outputRef) return { completion: JSON.parse(await blobs.getText(rec.outputRef)) as Record<string, unknown> };
    return { completion };
  }
}
