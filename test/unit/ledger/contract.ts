/**
 * The ledger contract, run against every backend: SQLite in the unit project, PostgreSQL (a real server)
 * in the integration project. Times are real, so lease tests use short leases and wait them out.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Ledger, NewItem } from '../../../src/ledger/types.js';

export interface LedgerFixture { ledger: Ledger; cleanup(): Promise<void> }

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
let seq = 0;

export function newItem(rolloutId: string, over: Partial<NewItem> = {}): NewItem {
  const n = seq++;
  return {
    rolloutId, stage: 'simulate', stageIndex: 0, kind: 'cpu', sampleId: `s${n}`, inputRef: `sha256:${'0'.repeat(64)}`,
    inputVersion: 'v1', envVersion: 'env-1', idempotencyKey: `${rolloutId}/s${n}/simulate`, maxAttempts: 3, timeoutMs: 10_000,
    backoffMs: 50, deadlineAt: null, ...over,
  };
}

export function ledgerContract(name: string, open: () => Promise<LedgerFixture>): void {
  describe(`ledger contract: ${name}`, () => {
    let fx: LedgerFixture;
    let L: Ledger;
    let rid = 0;
    const rollout = async (items: (r: string) => NewItem[]) => {
      const id = `r${++rid}-${Date.now()}`;
      await L.putManifest(`sha256:${id}`, 'body');
      await L.createRollout({ id, name: id, manifestDigest: `sha256:${id}`, envVersion: 'env-1', gpus: 1 }, items(id));
      return id;
    };
    beforeEach(async () => { fx = await open(); L = fx.ledger; });
    afterEach(async () => { await fx?.cleanup(); });

    it('creates a rollout once and enqueues idempotently per key', async () => {
      const id = await rollout((r) => [newItem(r), newItem(r)]);
      expect((await L.createRollout({ id, name: id, manifestDigest: `sha256:${id}`, envVersion: 'env-1', gpus: 1 }, [])).created).toBe(false);
      const dup = newItem(id);
      expect(await L.enqueue([dup, dup, newItem(id)])).toBe(2);
      expect((await L.getRollout(id))?.counts.queued).toBe(4);
    });

    it('claims in one transaction: distinct items, attempt 1, a token and an expiry on the ledger clock', async () => {
      const id = await rollout((r) => Array.from({ length: 5 }, () => newItem(r, { kind: 'gpu' })));
      const before = await L.now();
      const a = await L.claim({ worker: 'w1', leaseMs: 30_000, limit: 3, kind: 'gpu' });
      const b = await L.claim({ worker: 'w2', leaseMs: 30_000, limit: 3, kind: 'gpu' });
      expect(a).toHaveLength(3);
      expect(b).toHaveLength(2);
      const ids = [...a, ...b].map((c) => c.item.id);
      expect(new Set(ids).size).toBe(5);
      for (const c of a) {
        expect(c.attempt).toBe(1);
        expect(c.token).toMatch(/^[0-9a-f-]{36}$/);
        expect(c.expiresAt).toBeGreaterThanOrEqual(before + 30_000);
        expect(c.item.rolloutId).toBe(id);
      }
      expect(await L.claim({ worker: 'w3', leaseMs: 30_000, limit: 3, kind: 'gpu' })).toHaveLength(0);
    });

    it('completes once per token; a second complete is rejected and counted', async () => {
      const id = await rollout((r) => [newItem(r, { stage: 'score' })]);
      const [c] = await L.claim({ worker: 'w', leaseMs: 30_000, kind: 'cpu', limit: 1 });
      expect(c.item.rolloutId).toBe(id);
      expect(await L.complete({ itemId: c.item.id, token: c.token, outputRef: 'sha256:out' })).toEqual({ ok: true, resultCreated: true });
      expect(await L.complete({ itemId: c.item.id, token: c.token, outputRef: 'sha256:other' })).toEqual({ ok: false, reason: 'stale' });
      const res = await L.results({ rolloutId: id });
      expect(res).toHaveLength(1);
      expect(res[0].outputRef).toBe('sha256:out');
      expect((await L.stats(id)).staleRejections).toBe(1);
    });

    it('completes a batch in one call, checking each token on its own', async () => {
      const id = await rollout((r) => [newItem(r), newItem(r), newItem(r)]);
      const cs = await L.claim({ worker: 'w', leaseMs: 30_000, limit: 3, kind: 'cpu' });
      const res = await L.completeMany([
        { itemId: cs[0].item.id, token: cs[0].token, outputRef: 'sha256:a' },
        { itemId: cs[1].item.id, token: 'not-the-token', outputRef: 'sha256:b' },
        { itemId: cs[2].item.id, token: cs[2].token, outputRef: 'sha256:c' },
      ]);
      expect(res).toEqual([{ ok: true, resultCreated: true }, { ok: false, reason: 'stale' }, { ok: true, resultCreated: true }]);
      expect((await L.getRollout(id))?.counts).toMatchObject({ done: 2, leased: 1 });
    });

    it('renews only with the live token', async () => {
      await rollout((r) => [newItem(r)]);
      const [c] = await L.claim({ worker: 'w', leaseMs: 1000, kind: 'cpu' });
      const [ok] = await L.renew([{ itemId: c.item.id, token: c.token }], 60_000);
      expect(ok.ok && ok.expiresAt > c.expiresAt).toBe(true);
      const [bad] = await L.renew([{ itemId: c.item.id, token: '00000000-0000-0000-0000-000000000000' }], 60_000);
      expect(bad).toEqual({ itemId: c.item.id, ok: false, reason: 'stale' });
      await L.complete({ itemId: c.item.id, token: c.token, outputRef: 'sha256:x' });
    });

    it('reclaims an expired lease; the zombie cannot renew or complete; one result', async () => {
      const id = await rollout((r) => [newItem(r, { backoffMs: 1 })]);
      const [first] = await L.claim({ worker: 'zombie', leaseMs: 150, kind: 'cpu' });
      await sleep(300);
      const [second] = await L.claim({ worker: 'fresh', leaseMs: 30_000, kind: 'cpu' }).then(async (c) => (c.length ? c : (await sleep(50), L.claim({ worker: 'fresh', leaseMs: 30_000, kind: 'cpu' }))));
      expect(second.item.id).toBe(first.item.id);
      expect(second.attempt).toBe(2);
      expect((await L.renew([{ itemId: first.item.id, token: first.token }], 1000))[0].ok).toBe(false);
      expect((await L.complete({ itemId: first.item.id, token: first.token, outputRef: 'sha256:late' })).ok).toBe(false);
      expect((await L.complete({ itemId: second.item.id, token: second.token, outputRef: 'sha256:good' })).ok).toBe(true);
      expect((await L.results({ rolloutId: id })).map((r) => r.outputRef)).toEqual(['sha256:good']);
      const st = await L.stats(id);
      expect(st.leaseExpiries).toBe(1);
      expect(st.staleRejections).toBe(2);
      expect((await L.attemptsOf(first.item.id)).map((a) => a.outcome)).toEqual(['expired', 'done']);
    });

    it('retries with backoff, then goes dead with the last error after max_attempts', async () => {
      const id = await rollout((r) => [newItem(r, { maxAttempts: 2, backoffMs: 200 })]);
      const [c1] = await L.claim({ worker: 'w', leaseMs: 30_000, kind: 'cpu' });
      expect(await L.fail({ itemId: c1.item.id, token: c1.token, error: 'boom 1' })).toEqual({ ok: true, state: 'queued' });
      expect(await L.claim({ worker: 'w', leaseMs: 30_000, kind: 'cpu' })).toHaveLength(0); // still backing off
      await sleep(260);
      const [c2] = await L.claim({ worker: 'w', leaseMs: 30_000, kind: 'cpu' });
      expect(c2.attempt).toBe(2);
      expect(await L.fail({ itemId: c2.item.id, token: c2.token, error: 'boom 2' })).toEqual({ ok: true, state: 'dead' });
      const item = await L.getItem(c2.item.id);
      expect(item?.status).toBe('dead');
      expect(item?.lastError).toBe('boom 2');
      const st = await L.stats(id);
      expect(st.attempts).toBe(2);
      expect(st.retryRate).toBeCloseTo(0.5);
    });

    it('non-retryable failures go dead at once', async () => {
      await rollout((r) => [newItem(r)]);
      const [c] = await L.claim({ worker: 'w', leaseMs: 30_000, kind: 'cpu' });
      expect(await L.fail({ itemId: c.item.id, token: c.token, error: 'bad input', retryable: false })).toEqual({ ok: true, state: 'dead' });
    });

    it('cancel stops queued work and tells the lease holder', async () => {
      const id = await rollout((r) => [newItem(r), newItem(r)]);
      const [c] = await L.claim({ worker: 'w', leaseMs: 30_000, kind: 'cpu' });
      expect((await L.cancelRollout(id)).canceled).toBe(2);
      expect((await L.renew([{ itemId: c.item.id, token: c.token }], 1000))[0]).toEqual({ itemId: c.item.id, ok: false, reason: 'canceled' });
      expect((await L.complete({ itemId: c.item.id, token: c.token, outputRef: 'sha256:x' })).ok).toBe(false);
      expect(await L.claim({ worker: 'w', leaseMs: 30_000, kind: 'cpu' })).toHaveLength(0);
      expect((await L.getRollout(id))?.status).toBe('canceled');
    });

    it('completing a stage enqueues the next one and records the trajectory', async () => {
      const id = await rollout((r) => [newItem(r, { sampleId: 'a', idempotencyKey: `${r}/a/gen`, stage: 'gen' })]);
      const [c] = await L.claim({ worker: 'w', leaseMs: 30_000, kind: 'cpu' });
      const next = newItem(id, { sampleId: 'a', idempotencyKey: `${id}/a/score`, stage: 'score', stageIndex: 1, inputRef: 'sha256:gen-out' });
      await L.complete({ itemId: c.item.id, token: c.token, outputRef: 'sha256:gen-out', next: [next] });
      const [c2] = await L.claim({ worker: 'w', leaseMs: 30_000, kind: 'cpu' });
      expect(c2.item.stage).toBe('score');
      expect(c2.item.inputRef).toBe('sha256:gen-out');
      await L.complete({ itemId: c2.item.id, token: c2.token, outputRef: 'sha256:score', trajectory: { rolloutId: id, sampleId: 'a', ref: 'sha256:traj' } });
      expect(await L.trajectories(id)).toMatchObject([{ sampleId: 'a', ref: 'sha256:traj' }]);
      const s = await L.getRollout(id);
      expect(s?.counts.done).toBe(2);
      expect(s?.trajectories).toBe(1);
    });

    it('releasing an unstarted claim gives the attempt back; a started one keeps it', async () => {
      await rollout((r) => [newItem(r, { maxAttempts: 1 })]);
      const [c] = await L.claim({ worker: 'w', leaseMs: 30_000, kind: 'cpu' });
      expect(await L.release({ itemId: c.item.id, token: c.token, started: false }, 'shutdown')).toBe(true);
      const [again] = await L.claim({ worker: 'w', leaseMs: 30_000, kind: 'cpu' });
      expect(again.attempt).toBe(1);
      expect(await L.release({ itemId: again.item.id, token: again.token }, 'shutdown')).toBe(true);
      expect((await L.getItem(again.item.id))?.status).toBe('dead');
    });

    it('an item past its deadline goes dead instead of running', async () => {
      const now = await L.now();
      await rollout((r) => [newItem(r, { deadlineAt: now - 1 })]);
      expect(await L.claim({ worker: 'w', leaseMs: 30_000, kind: 'cpu' })).toHaveLength(0);
    });

    it('keeps the first finished inference result per idempotency key', async () => {
      const req = { idempotencyKey: `k-${Date.now()}`, requestId: 'q1', rolloutId: 'r', requestHash: 'h', model: 'm', modelVersion: '1', promptVersion: 'p', inputRef: 'sha256:i', params: '{}' };
      await L.beginInference([req]);
      expect((await L.getInference(req.idempotencyKey))?.status).toBe('pending');
      const done = { idempotencyKey: req.idempotencyKey, status: 'done' as const, outputRef: 'sha256:o1', envVersion: 'e', batchId: 'b', batchSize: 4, upstreamMs: 3, error: null };
      await L.finishInference([done]);
      await L.finishInference([{ ...done, outputRef: 'sha256:o2' }]);
      await L.beginInference([req]);
      const rec = await L.getInference(req.idempotencyKey);
      expect(rec?.status).toBe('done');
      expect(rec?.outputRef).toBe('sha256:o1');
      expect(rec?.batchSize).toBe(4);
    });

    it('stats and check agree with what happened', async () => {
      const id = await rollout((r) => [newItem(r, { sampleId: 'a' }), newItem(r), newItem(r)]);
      const [c] = await L.claim({ worker: 'w', leaseMs: 30_000, kind: 'cpu' });
      await sleep(5); // GPU-hours span submission → last trajectory; give it a nonzero length
      await L.complete({ itemId: c.item.id, token: c.token, outputRef: 'sha256:o', trajectory: { rolloutId: id, sampleId: 'a', ref: 'sha256:t' } });
      const [d] = await L.claim({ worker: 'w', leaseMs: 30_000, kind: 'cpu' });
      await L.fail({ itemId: d.item.id, token: d.token, error: 'x' });
      const key = `k-${id}`;
      await L.beginInference([{ idempotencyKey: key, requestId: 'q', rolloutId: id, requestHash: 'h', model: 'm', modelVersion: '1', promptVersion: 'p', inputRef: 'sha256:i', params: '{}' }]);
      await L.finishInference([{ idempotencyKey: key, status: 'done', outputRef: 'sha256:o', envVersion: 'e', batchId: 'b', batchSize: 4, upstreamMs: 1, error: null }]);
      const st = await L.stats(id);
      expect(st).toMatchObject({ queueDepth: 2, leased: 0, done: 1, results: 1, trajectories: 1, attempts: 2, itemsAttempted: 2 });
      expect(st.resultsPerSec).toBeCloseTo(0.1);
      expect(st.trajectoriesPerGpuHour).toBeGreaterThan(0);
      expect(st.inference).toEqual({ requests: 1, done: 1, shed: 0, meanBatchSize: 4 });
      expect(st.queueAgeP99Ms).toBeGreaterThanOrEqual(st.queueAgeP50Ms);
      const timings = await L.attemptTimings(id);
      expect(timings.map((t) => [t.stage, t.stageIndex, t.kind, t.outcome])).toEqual([['simulate', 0, 'cpu', 'done'], ['simulate', 0, 'cpu', 'failed']]);
      expect(timings.every((t) => t.endedAt !== null && t.endedAt >= t.startedAt)).toBe(true);
      expect(await L.check()).toEqual([]);
    });
  });
}
