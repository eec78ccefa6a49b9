/**
 * Fault tests with real processes: workers SIGKILLed after claim, mid-work and after writing output but
 * before completing; a worker SIGSTOPped past its lease whose late completion must be rejected; the
 * gateway killed mid-batch and restarted. Every case ends with exactly one result per idempotency key.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SqliteLedger } from '../../../src/ledger/sqlite.js';
import { startUpstream, type TestUpstream } from '../../fixtures/upstream/server.js';
import { BlobStore } from '../../../src/ledger/blobs.js';
import { ProcessStageRunner } from '../../../src/rollout/stage-runner.js';
import { submitRollout } from '../../../src/rollout/submit.js';
import { Worker } from '../../../src/rollout/worker.js';
import { smol, type Proc } from './procs.js';

let dir: string;
let env: NodeJS.ProcessEnv;
let procs: Proc[];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function manifest(name: string, stages: string, count = 1): string {
  const file = path.join(dir, `${name}.yaml`);
  fs.writeFileSync(file, `apiVersion: smol/v1\nkind: Rollout\nname: ${name}\nenvironment: { version: e1 }\ndefaults: { maxAttempts: 3, backoff: 50ms, timeout: 60s }\ngenerate: { count: ${count}, template: "in{i}" }\nstages:\n${stages}`);
  return file;
}
function worker(args: string[] = [], extraEnv: NodeJS.ProcessEnv = {}): Proc {
  const p = smol(['worker', '--json', '--concurrency', '2', '--lease', '1s', ...args], { ...env, ...extraEnv });
  procs.push(p);
  return p;
}
async function ledgerView<T>(fn: (l: SqliteLedger) => Promise<T>): Promise<T> {
  const l = new SqliteLedger({ path: path.join(dir, 'ledger.db') });
  try { return await fn(l); } finally { await l.close(); }
}
/** Submitting through the CLI is covered in cli.test.ts; here it runs in-process to save a process start. */
async function submit(file: string) {
  await ledgerView((l) => submitRollout(l, new BlobStore(path.join(dir, 'blobs')), fs.readFileSync(file, 'utf8'), file));
}
/** The rescuer runs in-process: the process under test is the one that gets killed. */
async function rescue(): Promise<void> {
  await ledgerView(async (l) => {
    const w = new Worker({ ledger: l, blobs: new BlobStore(path.join(dir, 'blobs')), runner: await ProcessStageRunner.create(), concurrency: 2, leaseMs: 1000, pollMs: 50, exitWhenIdleMs: 300 });
    // the victim's lease must expire first; the rescuer polls until the item is done
    const until = Date.now() + 30_000;
    while (Date.now() < until) {
      await w.run();
      const r = await l.listRollouts();
      if (r.every((x) => x.counts.queued + x.counts.leased === 0)) return;
    }
  });
}

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-faults-'));
  env = { SMOL_HOME: dir, SMOL_LEDGER: '' };
  procs = [];
});
afterEach(async () => {
  for (const p of procs) { p.kill('SIGCONT'); p.kill('SIGKILL'); }
  await Promise.all(procs.map((p) => p.exited));
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('worker faults (real processes)', () => {
  for (const point of ['after-claim', 'mid-work', 'after-output'] as const) {
    it(`SIGKILL ${point}: the lease expires, another worker finishes, one result`, async () => {
      const cmd = point === 'mid-work' ? `[sh, -c, 'sleep 2; cat']` : '[cat]';
      await submit(manifest('k', `  - { name: only, kind: cpu, command: ${cmd} }\n`));
      const fault = point === 'after-claim' ? 'after-claim=60000' : point === 'after-output' ? 'after-output=60000' : '';
      const victim = worker([], { SMOL_WORKER_FAULT: fault });
      await victim.waitFor((e) => e.type === (point === 'after-output' ? 'output' : 'claimed'));
      if (point === 'mid-work') await sleep(300);
      victim.kill('SIGKILL');
      await victim.exited;
      await rescue();
      await ledgerView(async (l) => {
        const [item] = await l.listItems('k');
        expect(item).toMatchObject({ status: 'done', attempt: 2 });
        expect((await l.attemptsOf(item.id)).map((a) => a.outcome)).toEqual(['expired', 'done']);
        expect(await l.results({ rolloutId: 'k' })).toHaveLength(1);
        expect((await l.stats('k')).leaseExpiries).toBe(1);
        expect(await l.check()).toEqual([]);
      });
    });
  }

  it('SIGSTOP past the lease, then SIGCONT: the late completion is rejected and counted', async () => {
    await submit(manifest('z', `  - { name: only, kind: cpu, command: [cat] }\n`));
    const zombie = worker(['--lease', '600ms'], { SMOL_WORKER_FAULT: 'after-output=1500' });
    await zombie.waitFor((e) => e.type === 'output');
    zombie.kill('SIGSTOP');
    await rescue();
    zombie.kill('SIGCONT');
    await zombie.waitFor((e) => e.type === 'rejected' && e.op === 'complete', 30_000);
    zombie.kill('SIGTERM');
    expect(await zombie.exited).toBe(0);
    await ledgerView(async (l) => {
      const results = await l.results({ rolloutId: 'z' });
      expect(results).toHaveLength(1);
      expect(results[0].attempt).toBe(2);
      expect((await l.stats('z')).staleRejections).toBeGreaterThanOrEqual(1);
    });
  });

  it('SIGTERM: a worker finishes its running item within the grace period and exits 0', async () => {
    await submit(manifest('t', `  - { name: only, kind: cpu, command: [sh, -c, 'sleep 1; cat'] }\n`, 4));
    const w = worker(['--concurrency', '1', '--grace', '20s']);
    await w.waitFor((e) => e.type === 'claimed');
    w.kill('SIGTERM');
    expect(await w.exited, w.stderr).toBe(0);
    await ledgerView(async (l) => {
      const c = (await l.getRollout('t'))!.counts;
      expect(c.leased).toBe(0);
      expect(c.done).toBeGreaterThanOrEqual(1);
      expect(c.done + c.queued).toBe(4);
    });
  });
});

describe('gateway faults (real processes)', () => {
  let up: TestUpstream;
  beforeEach(async () => { up = await startUpstream({ delayMs: 1500 }); });
  afterEach(async () => { await up.close(); });

  it('kill the gateway mid-batch, restart it: the worker retries, the result is stored once', async () => {
    await submit(manifest('g', `  - { name: gen, kind: gpu, model: { name: m, version: '1' }, promptVersion: p, params: { max_tokens: 4 } }\n`, 3));
    const start = (port: string) => {
      const g = smol(['gateway', '--json', '--listen', `127.0.0.1:${port}`, '--upstream', up.url, '--batch-window', '200'], env);
      procs.push(g);
      return g;
    };
    const g1 = start('0');
    const url = String((await g1.waitFor((e) => typeof e.url === 'string')).url);
    const w = worker(['--gateway', url, '--concurrency', '3', '--lease', '5s', '--exit-when-idle', '250ms']);
    while (up.calls.length === 0) await sleep(20); // the batch is at the upstream now
    expect(up.calls[0].prompts).toHaveLength(3);
    g1.kill('SIGKILL');
    await g1.exited;
    await ledgerView(async (l) => expect((await l.getInference('g/s0/gen'))?.status).toBe('pending'));
    up.setDelay(0);
    start(url.split(':').pop()!);
    expect(await w.exited, w.stderr).toBe(0);
    expect(up.calls.length).toBeGreaterThanOrEqual(2); // the lost batch was never durable, so it ran again
    await ledgerView(async (l) => {
      // the worker waited for the gateway within its attempt instead of burning retries
      expect((await l.listItems('g')).map((i) => [i.status, i.attempt])).toEqual([['done', 1], ['done', 1], ['done', 1]]);
      expect(await l.results({ rolloutId: 'g' })).toHaveLength(3);
      for (const s of ['s0', 's1', 's2']) expect((await l.getInference(`g/${s}/gen`))?.status).toBe('done');
      expect(await l.check()).toEqual([]);
    });
  });
});
