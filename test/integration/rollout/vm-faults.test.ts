/**
 * The rollout fault test on real QEMU (TCG here): VM-isolated attempts cloned from one fork point by four
 * workers, each SIGKILLed at random moments and restarted, until every item is done. Then: exactly one
 * result per idempotency key, and nothing left over (counted): no clone, no QEMU but the warm machine's, no
 * overlay but the warm machine's chain and the point's layer, no template but the point's, no other point.
 *
 * SMOL_VM_FAULT_ATTEMPTS sets the item count (default 40, what fits CI on 2 TCG cores; the 500 runs
 * with `SMOL_VM_FAULT_ATTEMPTS=500 npx vitest run --project integration test/integration/rollout/vm-faults.test.ts`:
 * 15 min here at load 13-16, passed; docs/ledger.md).
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BlobStore } from '../../../src/ledger/blobs.js';
import { SqliteLedger } from '../../../src/ledger/sqlite.js';
import { submitRollout } from '../../../src/rollout/submit.js';
import { killQemuMentioning, qemuProcessesMentioning, scratchHome, sharedHome, smol as smolCli } from '../../helpers/cli.js';
import { removeHomeShm } from '../../helpers/shm.js';
import { smol, type Proc } from './procs.js';

const ATTEMPTS = Number(process.env.SMOL_VM_FAULT_ATTEMPTS ?? 40);
const WORKERS = 4;
let home: string;
let env: NodeJS.ProcessEnv;
const all: Proc[] = [];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const shmBefore = new Set(fs.readdirSync('/dev/shm'));

beforeAll(() => {
  home = scratchHome('vm-faults');
  // no warm spare: every QEMU left is then a leak, except the warm machine's own
  env = { SMOL_HOME: home, SMOL_ASSETS: sharedHome(), SMOL_LEDGER: '', SMOL_FORK_SPARE: '0' };
});
afterAll(() => {
  for (const p of all) p.kill('SIGKILL');
  killQemuMentioning(home);
  removeHomeShm(home); // only ours: other tests' machines keep their RAM in /dev/shm too
  fs.rmSync(home, { recursive: true, force: true });
});

/** /dev/shm files smol made since the test began that no other home's QEMU maps (other tests share /dev/shm). */
function newTemplates(): string[] {
  const fresh = fs.readdirSync('/dev/shm').filter((f) => f.startsWith('smol-') && !shmBefore.has(f));
  const foreign = new Set<string>();
  for (const pid of spawnSync('pgrep', ['qemu-system'], { encoding: 'utf8' }).stdout.split('\n').filter(Boolean)) {
    try {
      if (fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(home)) continue;
      for (const f of fresh) if (fs.readFileSync(`/proc/${pid}/maps`, 'utf8').includes(f)) foreign.add(f);
    } catch { /* gone */ }
  }
  return fresh.filter((f) => !foreign.has(f));
}

function files(dir: string, ext: string): string[] {
  if (!fs.existsSync(dir)) return [];
  return fs.readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile() && e.name.endsWith(ext)).map((e) => path.join(e.parentPath, e.name));
}

async function ledgerView<T>(fn: (l: SqliteLedger) => Promise<T>): Promise<T> {
  const l = new SqliteLedger({ path: path.join(home, 'ledger.db') });
  try { return await fn(l); } finally { await l.close(); }
}

function startWorker(): Proc {
  const p = smol(['worker', '--json', '--isolation', 'vm', '--warm-machine', 'warm', '--concurrency', '1', '--lease', '3s'], env);
  all.push(p);
  return p;
}

describe(`VM-isolated attempts under kill -9 (${ATTEMPTS} items, ${WORKERS} workers)`, () => {
  it('one result per key, and no clone, QEMU, overlay, template or fork point left', async () => {
    const create = await smolCli(['machine', 'create', 'warm', '--forkable', '--start'], { home, env, timeoutMs: 180_000 });
    expect(create.code, create.stderr).toBe(0);
    const stage = `  - name: t\n    kind: cpu\n    isolation: vm\n    command: [sh, -c, 'echo "$(cat) $(hostname)"']\n`;
    await ledgerView((l) => submitRollout(l, new BlobStore(path.join(home, 'blobs')),
      `apiVersion: smol/v1\nkind: Rollout\nname: f\nenvironment: { version: e1 }\ndefaults: { maxAttempts: 20, backoff: 100ms, timeout: 120s }\ngenerate: { count: ${ATTEMPTS}, template: "in{i}" }\nstages:\n${stage}`));

    const workers = Array.from({ length: WORKERS }, startWorker);
    let kills = 0;
    const until = Date.now() + 3_000_000;
    for (;;) {
      const counts = await ledgerView(async (l) => (await l.listRollouts())[0].counts);
      if (counts.queued + counts.leased === 0) break;
      // a worker that exits on its own (an error at start) is a failure, not a kill to restart
      for (const w of workers) if (w.child.exitCode !== null) throw new Error(`a worker exited by itself (${w.child.exitCode}): ${w.stderr.slice(-1500)}`);
      expect(Date.now(), `items left: ${JSON.stringify(counts)}`).toBeLessThan(until);
      await sleep(3000 + Math.random() * 9000);
      const i = Math.floor(Math.random() * WORKERS);
      workers[i].kill('SIGKILL');
      await workers[i].exited;
      kills++;
      workers[i] = startWorker();
    }
    for (const w of workers) w.kill('SIGKILL'); // the last generation too: the leftovers are the sweep's
    await Promise.all(workers.map((w) => w.exited));
    expect(kills).toBeGreaterThan(0);

    await ledgerView(async (l) => {
      const items = await l.listItems('f');
      expect(items.filter((i) => i.status !== 'done').map((i) => [i.sampleId, i.status, i.lastError])).toEqual([]);
      const results = await l.results({ rolloutId: 'f' });
      expect(results).toHaveLength(ATTEMPTS);
      expect(new Set(results.map((r) => r.idempotencyKey)).size).toBe(ATTEMPTS);
      const blobs = new BlobStore(path.join(home, 'blobs'));
      for (const r of results) expect(blobs.getText(r.outputRef)).toMatch(/^in\d+ stage-\d+-[0-9a-f]{8}\n$/); // ran in a clone
      expect(await l.check()).toEqual([]);
    });

    // one `machine ls` sweeps what the last kills left; then count
    const ls = JSON.parse((await smolCli(['machine', 'ls', '--json'], { home, env })).stdout) as { name: string; id: string; pid: number }[];
    expect(ls.map((m) => m.name)).toEqual(['warm']);
    expect(qemuProcessesMentioning(home)).toEqual([ls[0].pid]);
    const db = new Database(path.join(home, 'smol.db'), { readonly: true });
    const points = db.prepare('SELECT id, name FROM fork_points').all() as { id: string; name: string | null }[];
    db.close();
    expect(points.map((p) => p.name)).toEqual(['warm.warm']);
    const machinesDir = path.join(home, 'machines');
    expect(fs.readdirSync(machinesDir)).toEqual([ls[0].id]);
    expect(fs.readdirSync(path.join(home, 'forks'))).toEqual([points[0].id]);
    const status = JSON.parse((await smolCli(['machine', 'status', 'warm', '--json'], { home, env })).stdout) as { usage: { disk: { chain: string[] } } };
    const chain = new Set(status.usage.disk.chain.map((f) => path.resolve(f)));
    expect(files(machinesDir, '.qcow2').filter((f) => !chain.has(path.resolve(f)))).toEqual([]);
    // the point's own files: its disk layer, and the overlay its clones' overlays are copied from
    const pointDir = path.join(home, 'forks', points[0].id);
    expect(files(path.join(home, 'forks'), '.qcow2').sort()).toEqual([path.join(pointDir, 'clone-overlay.qcow2'), path.join(pointDir, 'disk.qcow2')]);
    expect(newTemplates().sort()).toEqual([`smol-${ls[0].id}.mem`, `smol-fork-${points[0].id}.mem`].sort());

    // and the point and the machine go cleanly
    expect((await smolCli(['snapshot', 'rm', 'warm.warm'], { home, env })).code).toBe(0);
    expect((await smolCli(['machine', 'rm', '--force', 'warm'], { home, env })).code).toBe(0);
    expect(qemuProcessesMentioning(home)).toEqual([]);
    expect(newTemplates()).toEqual([]);
  }, 3_600_000);
});
