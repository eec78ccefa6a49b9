/**
 * `smol worker --isolation vm` on real QEMU (TCG here): items complete with their command run inside a
 * throwaway microVM (or a clone of a warm machine), outputs land in the ledger by digest, and an attempt
 * that runs past its timeout leaves no QEMU process behind. A few items only: each one is a VM.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BlobStore } from '../../../src/ledger/blobs.js';
import { SqliteLedger } from '../../../src/ledger/sqlite.js';
import { killQemuMentioning, qemuProcessesMentioning, scratchHome, sharedHome, smol as smolCli } from '../../helpers/cli.js';
import { removeHomeShm } from '../../helpers/shm.js';
import { smol, smolRun, type Proc } from './procs.js';

let home: string;
let env: NodeJS.ProcessEnv;
const procs: Proc[] = [];

beforeAll(() => {
  home = scratchHome('rollout-vm');
  env = { SMOL_HOME: home, SMOL_ASSETS: sharedHome(), SMOL_LEDGER: '' };
});
afterAll(() => {
  for (const p of procs) p.kill('SIGKILL');
  killQemuMentioning(home);
  removeHomeShm(home); // the warm machine's fork point keeps its template in /dev/shm, outside the home
  fs.rmSync(home, { recursive: true, force: true });
});

/** Only a guest's kernel command line carries smol.* parameters: that proves where the command ran. */
const IN_VM = 'grep -q smol[.] /proc/cmdline && where=vm || where=host';

function manifest(name: string, stage: string, count: number): string {
  const file = path.join(home, `${name}.yaml`);
  fs.writeFileSync(file, `apiVersion: smol/v1\nkind: Rollout\nname: ${name}\nenvironment: { version: e1 }\ndefaults: { maxAttempts: 1, timeout: 60s }\ngenerate: { count: ${count}, template: "in{i}" }\nstages:\n${stage}`);
  return file;
}

async function submitAndWork(file: string, workerArgs: string[]): Promise<void> {
  const sub = await smolRun(['rollout', 'submit', file, '--json'], env);
  expect(sub.code, sub.stderr).toBe(0);
  // idle means nothing queued or leased anywhere (rollout/worker.ts): a short wait for it loses nothing
  const w = smol(['worker', '--json', '--isolation', 'vm', '--exit-when-idle', '250ms', ...workerArgs], env);
  procs.push(w);
  expect(await w.exited, w.stderr).toBe(0);
}

async function outputs(rolloutId: string): Promise<{ states: string[]; texts: string[] }> {
  const l = new SqliteLedger({ path: path.join(home, 'ledger.db') });
  try {
    const blobs = new BlobStore(path.join(home, 'blobs'));
    const items = await l.listItems(rolloutId);
    const results = await l.results({ rolloutId });
    return { states: items.map((i) => i.status), texts: results.map((r) => blobs.getText(r.outputRef)).sort() };
  } finally {
    await l.close();
  }
}

describe('smol worker --isolation vm (real QEMU)', () => {
  it('runs each attempt in a throwaway microVM: input on stdin, $SMOL_OUTPUT or stdout back by digest, limits applied', async () => {
    const file = manifest('vmrun', `  - name: upper\n    kind: cpu\n    limits: { openFiles: 77 }\n    command: [sh, -c, '${IN_VM}; echo "$(tr a-z A-Z) $where $SMOL_SAMPLE_ID $(ulimit -n)" > "$SMOL_OUTPUT"']\n`, 2);
    await submitAndWork(file, ['--concurrency', '1']);
    const r = await outputs('vmrun');
    expect(r.states).toEqual(['done', 'done']);
    expect(r.texts).toEqual(['IN0 vm s0 77\n', 'IN1 vm s1 77\n']);
    expect(qemuProcessesMentioning(home)).toEqual([]);
  });

  it('kills the VM of an attempt past its timeout: the item goes dead and no QEMU is left', async () => {
    const file = manifest('vmslow', '  - name: hang\n    kind: cpu\n    timeout: 4s\n    command: [sh, -c, \'sleep 600\']\n', 1);
    await submitAndWork(file, ['--concurrency', '1']);
    const l = new SqliteLedger({ path: path.join(home, 'ledger.db') });
    try {
      const [item] = await l.listItems('vmslow');
      expect(item.status).toBe('dead');
      expect(item.lastError).toMatch(/timed out/);
    } finally {
      await l.close();
    }
    expect(qemuProcessesMentioning(home)).toEqual([]);
  });

  it('a restarted worker removes the VM that a SIGKILLed worker left running', async () => {
    const file = manifest('vmkill', '  - name: hang\n    kind: cpu\n    command: [sh, -c, \'sleep 600\']\n', 1);
    expect((await smolRun(['rollout', 'submit', file], env)).code).toBe(0);
    const victim = smol(['worker', '--json', '--isolation', 'vm', '--lease', '2s'], env);
    procs.push(victim);
    await victim.waitFor((e) => e.type === 'claimed');
    const until = Date.now() + 60_000;
    while (qemuProcessesMentioning(home).length === 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 200));
    victim.kill('SIGKILL');
    await victim.exited;
    await new Promise((r) => setTimeout(r, 500));
    expect(qemuProcessesMentioning(home).length).toBe(1); // QEMU is detached: killing the worker does not end it
    await submitAndWork(file, ['--lease', '2s']);
    expect(qemuProcessesMentioning(home)).toEqual([]);
    const l = new SqliteLedger({ path: path.join(home, 'ledger.db') });
    try {
      expect((await l.listItems('vmkill'))[0].status).toBe('dead'); // its only attempt's lease expired
    } finally {
      await l.close();
    }
  });

  it('clones each attempt from the warm machine\'s fork point and removes the clone afterwards', async () => {
    const create = await smolCli(['machine', 'create', 'warm', '--forkable', '--start'], { home, timeoutMs: 120_000 });
    expect(create.code, create.stderr).toBe(0);
    const file = manifest('vmfork', `  - name: count\n    kind: cpu\n    command: [sh, -c, '${IN_VM}; echo "$(wc -c) $where"']\n`, 2);
    await submitAndWork(file, ['--concurrency', '2', '--warm-machine', 'warm']);
    const r = await outputs('vmfork');
    expect(r.states).toEqual(['done', 'done']);
    expect(r.texts).toEqual(['3 vm\n', '3 vm\n']);
    // only the warm machine remains, still running, with the one point the worker saved from it
    const ls = JSON.parse((await smolCli(['machine', 'ls', '--json'], { home })).stdout) as { name: string; state: string }[];
    expect(ls.map((m) => [m.name, m.state])).toEqual([['warm', 'running']]);
    const points = JSON.parse((await smolCli(['snapshot', 'ls', '--json'], { home })).stdout) as { name: string; clones: string[] }[];
    expect(points.map((p) => [p.name, p.clones])).toEqual([['warm.warm', []]]);
    // a second worker reuses the point: still one
    await submitAndWork(manifest('vmfork2', `  - name: count\n    kind: cpu\n    command: [sh, -c, '${IN_VM}; echo "$(wc -c) $where"']\n`, 1), ['--warm-machine', 'warm']);
    expect((await outputs('vmfork2')).texts).toEqual(['3 vm\n']);
    expect(JSON.parse((await smolCli(['snapshot', 'ls', '--json'], { home })).stdout)).toHaveLength(1);
    // in a clone the agent carries input and output (no wrapper in the guest): $SMOL_OUTPUT wins over stdout,
    // the limits apply, the command runs in the clone with its own hostname
    await submitAndWork(manifest('vmfork3', `  - name: upper\n    kind: cpu\n    limits: { openFiles: 77 }\n    command: [sh, -c, 'echo noise; ${IN_VM}; echo "$(tr a-z A-Z) $where $(ulimit -n) $(hostname)" > "$SMOL_OUTPUT"']\n`, 2), ['--warm-machine', 'warm']);
    expect((await outputs('vmfork3')).texts).toEqual([expect.stringMatching(/^IN0 vm 77 stage-\d+-[0-9a-f]{8}\n$/), expect.stringMatching(/^IN1 vm 77 stage-\d+-[0-9a-f]{8}\n$/)]);
    expect((await smolCli(['snapshot', 'rm', 'warm.warm'], { home })).code).toBe(0);
    expect((await smolCli(['machine', 'rm', '--force', 'warm'], { home })).code).toBe(0);
    expect(qemuProcessesMentioning(home)).toEqual([]);
  });

  it('a process-isolated worker refuses a stage that asks for a VM, without retrying it', async () => {
    const file = manifest('needvm', '  - name: s\n    kind: cpu\n    maxAttempts: 3\n    isolation: vm\n    command: [\'true\']\n', 1);
    expect((await smolRun(['rollout', 'submit', file], env)).code).toBe(0);
    const w = smol(['worker', '--json', '--exit-when-idle', '250ms'], env);
    procs.push(w);
    expect(await w.exited, w.stderr).toBe(0);
    const l = new SqliteLedger({ path: path.join(home, 'ledger.db') });
    try {
      const [item] = await l.listItems('needvm');
      expect(item).toMatchObject({ status: 'dead', attempt: 1 });
      expect(item.lastError).toMatch(/asks for vm isolation; run it with: smol worker --isolation vm/);
    } finally {
      await l.close();
    }
  });
});
