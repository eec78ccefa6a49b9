/**
 * The inference gateway's logic, apart from HTTP: validation, idempotency, admission, deadline shedding,
 * batching, and durability (a result is in the ledger and its blob fsynced before anyone hears of it).
 */
import { randomUUID } from 'node:crypto';
import { digestOf, type BlobStore } from '../../ledger/blobs.js';
import type { InferenceOutcome, InferenceRecord, Ledger, NewInference } from '../../ledger/types.js';
import { Admission, type AdmissionLimits } from './admission.js';
import { Batcher, type BatchOptions } from './batcher.js';
import { ChatCompletions } from './chat.js';
import { canonical, inferRequestSchema, type InferRequestBody } from './schema.js';
import type { Upstream } from './upstream.js';

export interface GatewayOptions {
  ledger: Ledger;
  blobs: BlobStore;
  upstream: Upstream;
  /** Recorded with every result: what served it (e.g. "vllm-0.6 cuda-12.4 h100"). */
  envVersion: string;
  limits: AdmissionLimits;
  batch: BatchOptions;
}

export interface Answer { status: number; body: Record<string, unknown>; headers?: Record<string, string> }

interface Pending { req: InferRequestBody; hash: string; inputRef: string; enqueuedAt: number; resolve: (a: Answer) => void }

export class GatewayService {
  readonly admission: Admission;
  /** OpenAI's chat completions API; shares this gateway's admission control and ledger. */
  readonly chat: ChatCompletions;
  private readonly batcher: Batcher<Pending>;
  private readonly inflight = new Map<string, Promise<Answer>>();
  private readonly running = new Set<Promise<void>>();
  readonly counters = { requests: 0, replayed: 0, shed: 0, batches: 0, batchedRequests: 0, upstreamErrors: 0, invalid: 0 };

  constructor(private readonly o: GatewayOptions) {
    o.ledger.prepareWrites();
    this.admission = new Admission(o.limits);
    this.chat = new ChatCompletions({ ledger: o.ledger, blobs: o.blobs, upstream: o.upstream, envVersion: o.envVersion, admission: this.admission });
    this.batcher = new Batcher(o.batch, (_key, items) => {
      const p = this.runBatch(items).finally(() => this.running.delete(p));
      this.running.add(p);
    });
  }

  async handle(raw: unknown): Promise<Answer> {
    this.counters.requests++;
    const parsed = inferRequestSchema.safeParse(raw);
    if (!parsed.success) {
      this.counters.invalid++;
      const issues = parsed.error.issues.map((i) => ({ path: i.path.join('.') || '(root)', message: i.message }));
      return { status: 400, body: { apiVersion: 'v1', status: 'invalid', error: { type: 'ValidationError', message: 'invalid request', issues } } };
    }
    const req = parsed.data;
    const inputRef = req.input.ref ?? digestOf(req.input.text);
    if (req.input.ref && digestOf(req.input.text) !== req.input.ref) {
      return { status: 400, body: { apiVersion: 'v1', status: 'invalid', error: { type: 'ValidationError', message: 'input.text does not match input.ref', issues: [{ path: 'input.ref', message: 'digest mismatch' }] } } };
    }
    const hash = digestOf(canonical({ model: req.model, promptVersion: req.promptVersion, inputRef, params: req.params }));
    const joined = this.inflight.get(req.idempotencyKey);
    if (joined) return joined;
    const stored = await this.o.ledger.getInference(req.idempotencyKey);
    if (stored?.status === 'done') return await this.replay(req, stored, hash);
    if (req.deadline <= Date.now()) {
      this.counters.shed++;
      return { status: 504, body: { apiVersion: 'v1', requestId: req.requestId, status: 'deadline_exceeded', error: { message: 'deadline passed before admission' } } };
    }
    const wait = this.admission.tryAdmit(req.rolloutId);
    if (wait !== null) {
      return { status: 429, headers: { 'retry-after': String(wait) }, body: { apiVersion: 'v1', requestId: req.requestId, status: 'overloaded', error: { message: 'too many outstanding requests', retryAfterSeconds: wait } } };
    }
    const started = Date.now();
    const p = new Promise<Answer>((resolve) => {
      this.batcher.add(`${req.model.name}\u0000${req.model.version}\u0000${req.promptVersion}\u0000${canonical(req.params)}`,
        { req, hash, inputRef, enqueuedAt: started, resolve });
    }).finally(() => {
      this.inflight.delete(req.idempotencyKey);
      this.admission.release(req.rolloutId, Date.now() - started);
    });
    this.inflight.set(req.idempotencyKey, p);
    return p;
  }

  private async replay(req: InferRequestBody, r: InferenceRecord, hash: string): Promise<Answer> {
    if (r.requestHash !== hash) {
      return { status: 409, body: { apiVersion: 'v1', requestId: req.requestId, status: 'conflict', error: { message: `idempotency key ${req.idempotencyKey} was used for a different request` } } };
    }
    this.counters.replayed++;
    return {
      status: 200,
      body: {
        apiVersion: 'v1', requestId: req.requestId, idempotencyKey: req.idempotencyKey, status: 'ok', replayed: true,
        output: { ref: r.outputRef, text: await this.o.blobs.getText(r.outputRef!) },
        timing: { queuedMs: 0, upstreamMs: r.upstreamMs ?? 0, totalMs: 0, batchSize: r.batchSize ?? 1 },
        model: { name: r.model, version: r.modelVersion }, environmentVersion: r.envVersion,
      },
    };
  }

  private async runBatch(items: Pending[]): Promise<void> {
    const now = Date.now();
    const live = items.filter((p) => p.req.deadline > now);
    const late = items.filter((p) => p.req.deadline <= now);
    const batchId = randomUUID();
    const outcome = (p: Pending, o: Partial<InferenceOutcome>): InferenceOutcome => ({
      idempotencyKey: p.req.idempotencyKey, status: 'failed', outputRef: null, envVersion: this.o.envVersion, batchId, batchSize: live.length, upstreamMs: null, error: null, ...o,
    });
    try {
      // one commit for the batch's small blobs, in place before the ledger names them
      const inputRefs = await this.o.blobs.putMany(items.map((p) => p.req.input.text));
      const rows: NewInference[] = items.map((p, i) => ({
        idempotencyKey: p.req.idempotencyKey, requestId: p.req.requestId, rolloutId: p.req.rolloutId, requestHash: p.hash, model: p.req.model.name,
        modelVersion: p.req.model.version, promptVersion: p.req.promptVersion, inputRef: inputRefs[i], params: canonical(p.req.params),
      }));
      await this.o.ledger.beginInference(rows);
      if (late.length) {
        this.counters.shed += late.length;
        await this.o.ledger.finishInference(late.map((p) => outcome(p, { status: 'shed', error: 'deadline passed in the batch queue' })));
        for (const p of late) p.resolve({ status: 504, body: { apiVersion: 'v1', requestId: p.req.requestId, status: 'deadline_exceeded', error: { message: 'deadline passed while queued' } } });
      }
      if (live.length === 0) return;
      const first = live[0].req;
      const t0 = performance.now();
      const texts = await this.o.upstream.complete(first.model.name, live.map((p) => p.req.input.text), first.params);
      const upstreamMs = performance.now() - t0;
      const refs = await this.o.blobs.putMany(texts);
      // durable before acknowledged: the ledger commit happens before any response is written
      await this.o.ledger.finishInference(live.map((p, i) => outcome(p, { status: 'done', outputRef: refs[i], upstreamMs })));
      this.counters.batches++;
      this.counters.batchedRequests += live.length;
      const done = Date.now();
      live.forEach((p, i) => p.resolve({
        status: 200,
        body: {
          apiVersion: 'v1', requestId: p.req.requestId, idempotencyKey: p.req.idempotencyKey, status: 'ok', replayed: false,
          output: { ref: refs[i], text: texts[i] },
          timing: { queuedMs: Math.round(now - p.enqueuedAt), upstreamMs: Math.round(upstreamMs * 10) / 10, totalMs: done - p.enqueuedAt, batchSize: live.length },
          model: p.req.model, environmentVersion: this.o.envVersion,
        },
      }));
    } catch (err) {
      this.counters.upstreamErrors++;
      const msg = (err as Error).message;
      await this.o.ledger.finishInference(live.map((p) => outcome(p, { status: 'failed', error: msg }))).catch(() => undefined);
      for (const p of live) p.resolve({ status: 502, body: { apiVersion: 'v1', requestId: p.req.requestId, status: 'failed', error: { message: msg } } });
    }
  }

  get upstreamUrl(): string { return this.o.upstream.url; }

  /** The upstream's model list, passed through (OpenAI clients call it to check the connection). */
  upstreamModels(): Promise<{ status: number; text: string }> { return this.o.upstream.forward('GET', '/v1/models'); }

  stats() {
    const c = this.counters;
    return { ...c, meanBatchSize: c.batches ? c.batchedRequests / c.batches : null, queued: this.batcher.pending, admission: this.admission.snapshot(), chat: this.chat.counters, envVersion: this.o.envVersion };
  }

  /** Flushes queued requests and waits for running batches (graceful shutdown). */
  async drain(): Promise<void> {
    this.batcher.flushAll();
    while (this.running.size) await Promise.all([...this.running]);
  }
}
