/**
 * examples/rollout-code-rl end to end, exactly as its README runs it (run.sh): the stand-in code model, a
 * real `smol gateway`, a warm machine, one worker whose CPU stages run in clones of it on real QEMU (TCG
 * here). 4 tasks × 2 solutions; the rewards must be what the stand-in's solutions (code-tasks.ts) earn
 * against the manifest's unit tests, every test run in a machine of its own, and nothing left behind.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BlobStore, type FileBlobStore } from '../../../src/ledger/blobs.js';
import { SqliteLedger } from '../../../src/ledger/sqlite.js';
import { parseManifest } from '../../../src/rollout/manifest.js';
import { completionFor } from '../../fixtures/upstream/server.js';
import { killQemuMentioning, qemuProcessesMentioning, root, scratchHome, sharedHome, smol } from '../../helpers/cli.js';
import { removeHomeShm } from '../../helpers/shm.js';

let home: string;
let run: { code: number | null; out: string };

beforeAll(async () => {
  home = scratchHome('code-rl');
  const env = { ...process.env, SMOL_HOME: home, SMOL_ASSETS: sharedHome(), SMOL_LEDGER: path.join(home, 'ledger.db'), NO_COLOR: '1' };
  run = await new Promise((resolve) => {
    const child = spawn('bash', [path.join(root, 'examples/rollout-code-rl/run.sh')], { cwd: root, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => { out += d.toString(); });
    child.stderr.on('data', (d: Buffer) => { out += d.toString(); });
    const timer = setTimeout(() => child.kill('SIGTERM'), 420_000);
    child.on('close', (code) => { clearTimeout(timer); resolve({ code, out }); });
  });
}, 450_000);
afterAll(() => {
  killQemuMentioning(home);
  removeHomeShm(home); // the warm machine's fork point keeps its template in /dev/shm, outside the home
  fs.rmSync(home, { recursive: true, force: true });
});

/** Processes whose environment has this SMOL_HOME (everything run.sh started carries it). */
function processesWithHome(h: string): string[] {
  const out: string[] = [];
  for (const pid of fs.readdirSync('/proc').filter((d) => /^\d+$/.test(d))) {
    try {
      if (fs.readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0').includes(`SMOL_HOME=${h}`)) out.push(fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1').replaceAll('\0', ' '));
    } catch {
      // gone meanwhile, or not ours to read
    }
  }
  return out;
}

async function inLedger<T>(fn: (l: SqliteLedger, blobs: FileBlobStore) => Promise<T>): Promise<T> {
  const l = new SqliteLedger({ path: path.join(home, 'ledger.db') });
  try { return await fn(l, new BlobStore(path.join(home, 'blobs'))); } finally { await l.close(); }
}

describe('examples/rollout-code-rl', () => {
  it('run.sh completes, printing the rewards, the stats and a clean ledger check', () => {
    expect(run.code, run.out).toBe(0);
    expect(run.out).toMatch(/stage +test \(cpu\): 8 attempts, 8 done/);
    expect(run.out).toMatch(/^ *max-2 +test +1 +\{"sample":"max-2","task":"max","passed":0,"total":3,"reward":0\.000/m); // `rollout results`
    expect(run.out).toMatch(/^ok: /m);
  });

  it('rewards are the fraction of unit tests each stand-in solution passes', async () => {
    const rewards = await inLedger(async (l, blobs) => (await l.results({ rolloutId: 'code-rl' }))
      .filter((r) => r.stage === 'test').map((r) => JSON.parse(blobs.getText(r.outputRef)) as { sample: string; passed: number; total: number; reward: number; machine: string }));
    const bySample = Object.fromEntries(rewards.map((r) => [r.sample, [r.passed, r.total, r.reward]]));
    expect(bySample).toEqual({
      'reverse-1': [3, 3, 1], 'reverse-2': [1, 3, 0.333], // `cat`: right only for the palindrome
      'sum-1': [3, 3, 1], 'sum-2': [2, 3, 0.667], // prints nothing, not 0, for no input
      'fizzbuzz-1': [2, 3, 0.667], 'fizzbuzz-2': [3, 3, 1], // tests 3 before 15
      'max-1': [3, 3, 1], 'max-2': [0, 3, 0], // never answers: every run timed out
    });
    // one clone per attempt: eight machines, none of them the warm parent
    const machines = new Set(rewards.map((r) => r.machine));
    expect(machines.size).toBe(8);
    expect([...machines].every((m) => m.startsWith('stage-'))).toBe(true);
  });

  it('the GPU stage got each sample\'s answer from the upstream through the gateway, recorded once per key', async () => {
    const m = parseManifest(fs.readFileSync(path.join(root, 'examples/rollout-code-rl/manifest.yaml'), 'utf8'));
    await inLedger(async (l, blobs) => {
      const solved = (await l.results({ rolloutId: 'code-rl' })).filter((r) => r.stage === 'solve');
      expect(solved).toHaveLength(8);
      for (const r of solved) {
        const prompt = m.samples!.find((s) => s.id === r.sampleId)!.text;
        expect(blobs.getText(r.outputRef)).toBe(completionFor('tiny-coder', prompt));
        expect((await l.getInference(`code-rl/${r.sampleId}/solve`))?.status).toBe('done');
      }
      expect(await l.trajectories('code-rl')).toHaveLength(8);
      const st = await l.stats('code-rl');
      expect(st).toMatchObject({ done: 16, dead: 0, trajectories: 8, retryRate: 0 });
      expect(await l.check()).toEqual([]);
    });
  });

  it('leaves no machine, clone, QEMU, gateway or model server behind', async () => {
    expect(qemuProcessesMentioning(home)).toEqual([]);
    expect(processesWithHome(home)).toEqual([]);
    const ls = await smol(['machine', 'ls', '--json'], { home });
    expect(JSON.parse(ls.stdout)).toEqual([]);
    expect(fs.readdirSync(path.join(home, 'machines'))).toEqual([]);
  });
});
