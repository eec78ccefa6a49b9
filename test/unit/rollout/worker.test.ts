import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { BlobStore } from '../../../src/ledger/blobs.js';
import { SqliteLedger } from '../../../src/ledger/sqlite.js';
import { ProcessStageRunner } from '../../../src/rollout/stage-runner.js';
import { submitRollout } from '../../../src/rollout/submit.js';
import { Worker, type WorkerEvent } from '../../../src/rollout/worker.js';

let dir: string;
let ledger: SqliteLedger;
let blobs: BlobStore;

function manifest(name: string, stages: string, extra = '') {
  return `apiVersion: smol/v1\nkind: Rollout\nname: ${name}\nenvironment: { version: env-7 }\ndefaults: { maxAttempts: 2, backoff: 10ms, timeout: 20s }\n${extra}generate: { count: 6, template: "x{i}" }\nstages:\n${stages}`;
}

async function worker(o: Partial<ConstructorParameters<typeof Worker>[0]> = {}) {
  const events: WorkerEvent[] = [];
  const w = new Worker({ ledger, blobs, runner: await ProcessStageRunner.create(), concurrency: 3, leaseMs: 2000, pollMs: 20, exitWhenIdleMs: 300, onEvent: (e) => events.push(e), ...o });
  return { w, events };
}

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-worker-'));
  ledger = new SqliteLedger({ path: path.join(dir, 'l.db') });
  blobs = new BlobStore(path.join(dir, 'blobs'));
});
afterEach(async () => {
  await ledger.close();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('worker', () => {
  it('runs a CPU pipeline stage by stage and assembles every trajectory', async () => {
    await submitRollout(ledger, blobs, manifest('p', `  - { name: upper, kind: cpu, command: [tr, a-z, A-Z] }\n  - { name: tag, kind: cpu, command: [sh, -c, 'printf "%s@%s" "$(cat)" "$SMOL_STAGE"'] }\n`));
    const { w } = await worker();
    await w.run();
    expect(w.completed).toBe(12);
    const trajs = await ledger.trajectories('p');
    expect(trajs).toHaveLength(6);
    const t = JSON.parse(await blobs.getText(trajs[0].ref));
    expect(t).toMatchObject({ kind: 'Trajectory', rolloutId: 'p', sampleId: 's0', environmentVersion: 'env-7', steps: [{ stage: 'upper', attempt: 1 }, { stage: 'tag', attempt: 1 }] });
    expect(blobs.getText(t.final)).toBe('X0@tag');
    expect(await ledger.check()).toEqual([]);
  });

  it('retries a failing stage, then leaves it dead with the last error', async () => {
    await submitRollout(ledger, blobs, manifest('f', `  - { name: boom, kind: cpu, command: [sh, -c, 'echo "bad $SMOL_ATTEMPT" >&2; exit 1'] }\n`));
    const { w, events } = await worker();
    await w.run();
    const items = await ledger.listItems('f');
    expect(items.every((i) => i.status === 'dead' && i.attempt === 2)).toBe(true);
    expect(items[0].lastError).toBe('sh failed (exit 1): bad 2');
    expect(events.filter((e) => e.type === 'failed')).toHaveLength(12);
  });

  it('aborts running items when their rollout is canceled', async () => {
    await submitRollout(ledger, blobs, manifest('c', `  - { name: slow, kind: cpu, command: [sleep, '30'] }\n`));
    const { w, events } = await worker({ leaseMs: 300 });
    const t0 = Date.now();
    const running = w.run();
    while (!events.some((e) => e.type === 'claimed')) await new Promise((r) => setTimeout(r, 20));
    await ledger.cancelRollout('c');
    await running;
    expect(Date.now() - t0).toBeLessThan(10_000);
    expect(events.some((e) => e.type === 'rejected' && e.reason === 'canceled')).toBe(true);
    expect((await ledger.getRollout('c'))?.counts.canceled).toBe(6);
  });

  it('on stop, lets running items finish within the grace period and releases the rest', async () => {
    await submitRollout(ledger, blobs, manifest('g', `  - { name: slow, kind: cpu, command: [sh, -c, 'sleep 0.3; echo done'] }\n`));
    const { w } = await worker({ exitWhenIdleMs: undefined });
    const running = w.run();
    await new Promise((r) => setTimeout(r, 100));
    w.stop(5000);
    await running;
    const c = (await ledger.getRollout('g'))!.counts;
    expect(c.done).toBe(3); // the three running at stop time finished
    expect(c.queued).toBe(3);
    expect(c.leased).toBe(0);
  });
});
