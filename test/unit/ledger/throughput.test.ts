/**
 * `rollout stats` figures from ledger rows whose answer is known: a ledger on a hand-driven clock goes
 * through claims, a failure and its retry, completions and a trajectory; then the stats, the per-stage
 * times and the command's JSON are checked against numbers worked out by hand.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { main } from '../../../src/cli/main.js';
import { SqliteLedger } from '../../../src/ledger/sqlite.js';
import { throughput } from '../../../src/ledger/throughput.js';
import { newItem } from './contract.js';

let dir: string | undefined;
afterEach(() => { if (dir) fs.rmSync(dir, { recursive: true, force: true }); dir = undefined; });

describe('throughput from attempt rows', () => {
  it('attempts/min over the covered span; p50/p95 of completed attempts per stage, in stage order', () => {
    const row = (stage: string, stageIndex: number, outcome: string, startedAt: number, endedAt: number | null) => ({ stage, stageIndex, kind: 'cpu' as const, outcome, startedAt, endedAt });
    const rows = [
      row('test', 1, 'done', 0, 1000),
      ...Array.from({ length: 20 }, (_, i) => row('gen', 0, 'done', 0, (i + 1) * 10)), // 10, 20, …, 200 ms
      row('gen', 0, 'expired', 0, 5000),
      row('test', 1, 'running', 2000, null),
    ];
    const t = throughput(rows, 6000);
    expect(t.spanMs).toBe(6000); // a running attempt counts up to now
    expect(t.attemptsPerMin).toBeCloseTo(23 / 0.1);
    expect(t.stages.map((s) => s.stage)).toEqual(['gen', 'test']);
    expect(t.stages[0]).toEqual({ stage: 'gen', kind: 'cpu', attempts: 21, done: 20, failed: 1, p50Ms: 100, p95Ms: 190 });
    expect(t.stages[1]).toMatchObject({ attempts: 2, done: 1, failed: 0, p50Ms: 1000, p95Ms: 1000 });
    expect(throughput([], 1)).toEqual({ attemptsPerMin: null, spanMs: 0, stages: [] });
  });

  it('a ledger on a known clock: queue age, retry rate, attempts/min, stage times, trajectories per GPU-hour', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-throughput-'));
    let now = 0;
    const file = path.join(dir!, 'ledger.db');
    const l = new SqliteLedger({ path: file, clock: () => now });
    const id = 'known';
    const gen = (s: string) => newItem(id, { sampleId: s, stage: 'gen', stageIndex: 0, kind: 'gpu', idempotencyKey: `${id}/${s}/gen`, backoffMs: 1000 });
    const test = (s: string) => newItem(id, { sampleId: s, stage: 'test', stageIndex: 1, kind: 'cpu', idempotencyKey: `${id}/${s}/test` });
    await l.putManifest('sha256:m', 'body');
    await l.createRollout({ id, name: id, manifestDigest: 'sha256:m', envVersion: 'e', gpus: 2 }, [gen('a'), gen('b'), test('c'), test('d')]);

    const [a, b] = await l.claim({ worker: 'w', leaseMs: 60_000, kind: 'gpu', limit: 2 }); // t=0
    now = 100;
    await l.complete({ itemId: a.item.id, token: a.token, outputRef: 'sha256:o' }); // gen 100 ms
    now = 300;
    await l.fail({ itemId: b.item.id, token: b.token, error: 'flaky', retryable: true }); // back at 300 + 1000
    now = 1300;
    const [b2] = await l.claim({ worker: 'w', leaseMs: 60_000, kind: 'gpu' });
    expect(b2.attempt).toBe(2);
    now = 1500;
    await l.complete({ itemId: b2.item.id, token: b2.token, outputRef: 'sha256:o' }); // gen 200 ms
    const [c] = await l.claim({ worker: 'w', leaseMs: 60_000, kind: 'cpu', limit: 1 });
    now = 2500;
    await l.complete({ itemId: c.item.id, token: c.token, outputRef: 'sha256:o', trajectory: { rolloutId: id, sampleId: c.item.sampleId, ref: 'sha256:t' } }); // test 1000 ms
    now = 3000;

    const st = await l.stats(id);
    const t = throughput(await l.attemptTimings(id), st.now);
    // one item left queued since t=0
    expect(st).toMatchObject({ queueDepth: 1, queueAgeP50Ms: 3000, attempts: 4, itemsAttempted: 3, retryRate: 0.25, trajectories: 1 });
    // 2 GPUs × 2.5 s from submission to the last trajectory = 1/720 GPU-hour, for one trajectory
    expect(st.trajectoriesPerGpuHour).toBeCloseTo(720);
    // 4 attempts between t=0 and t=2500
    expect(t.attemptsPerMin).toBeCloseTo(96);
    expect(t.stages).toEqual([
      { stage: 'gen', kind: 'gpu', attempts: 3, done: 2, failed: 1, p50Ms: 100, p95Ms: 200 },
      { stage: 'test', kind: 'cpu', attempts: 1, done: 1, failed: 0, p50Ms: 1000, p95Ms: 1000 },
    ]);
    await l.close();

    // the command shows the same figures (its rates come from rows, not from its own clock)
    const chunks: string[] = [];
    const write = process.stdout.write;
    process.stdout.write = ((s: string) => { chunks.push(s); return true; }) as typeof process.stdout.write;
    try {
      expect(await main(['node', 'smol', 'rollout', 'stats', '--rollout', id, '--ledger', file, '--json'])).toBe(0);
    } finally {
      process.stdout.write = write;
    }
    const out = JSON.parse(chunks.join('')) as Record<string, unknown>;
    expect(out).toMatchObject({ attempts: 4, retryRate: 0.25, spanMs: 2500, stages: t.stages });
    expect(out.attemptsPerMin).toBeCloseTo(96);
    expect(out.trajectoriesPerGpuHour).toBeCloseTo(720);
  });
});
