/**
 * `npm run bench:fork`: live fork figures, medians over BENCH_RUNS (default 5) runs, 256 MiB guests, beside a
 * cold boot of the same machine:
 *  - parent pause (resuming, and with --hold), fork → clone running, fork → first exec in the clone ("fork" is
 *    the pause, as in DESIGN §3; the setup before it, which overlaps the parent's work, is shown on its own)
 *  - N = 1/4/8 clones: fork → all clones ready
 *  - host memory per clone (PSS) vs a cold-booted machine's RSS; disk bytes per clone vs a fresh machine
 * The host is shared (other test runs), so the load average before and after is printed with the table.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { smolfileSchema } from '../src/smolfile/schema.js';
import { execOnChannel } from '../src/vm/exec.js';
import { forkMachine } from '../src/vm/fork/index.js';
import { QmpClient } from '../src/vm/qemu/qmp.js';
import { createQemuEngine } from '../src/vm/qemu/engine.js';
import { openMachineDb } from '../src/vm/store/db.js';
import { MachineStore } from '../src/vm/store/machines.js';
import { MachineService } from '../src/vm/service.js';
import { dataPaths } from '../src/util/paths.js';
import { benchHome, quickMode, requireGuest } from './env.js';
import { hostAccel, median, printRows, type Row } from './stats.js';

const RUNS = Number(process.env.BENCH_RUNS ?? (quickMode ? 1 : 5));
/** Fewest repeats of the N-clone and hold figures (a quick run checks the bench works, once each). */
const MIN_REPS = quickMode ? 1 : 3;
const { home, assets, ownHome } = benchHome('fork');
requireGuest(assets);
const MiB = 1024 * 1024;
const spec = smolfileSchema.parse({ memory: 256 });
const svc = new MachineService({ home, store: new MachineStore(openMachineDb(dataPaths(home).machineDb)), engine: createQemuEngine(home) });
const sink = () => new Writable({ write(_c, _e, cb) { cb(); } });

/** kB fields of /proc/<pid>/smaps_rollup or status, in MiB. */
function procMiB(pid: number, file: 'smaps_rollup' | 'status', field: string): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(fs.readFileSync(`/proc/${pid}/${file}`, 'utf8'));
  return m ? Number(m[1]) / 1024 : Number.NaN;
}
function dirBytes(dir: string): number {
  let n = 0;
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    n += e.isDirectory() ? dirBytes(p) : fs.statSync(p).blocks * 512;
  }
  return n;
}
async function timedExec(name: string): Promise<number> {
  const t0 = performance.now();
  const { ch, release } = await svc.channel(name);
  try {
    await execOnChannel(ch, { argv: ['true'] }, { stdin: null, stdout: sink(), stderr: sink() });
  } finally {
    ch.close();
    release();
  }
  return performance.now() - t0;
}

async function main(): Promise<void> {
  const load0 = os.loadavg();
  // cold-boot baseline: the same machine booted from its disk, no fork
  const cold = { boot: [] as number[], exec: [] as number[], rss: [] as number[], disk: [] as number[] };
  for (let i = 0; i < RUNS; i++) {
    const rec = await svc.create(spec, { name: `cold-${i}` });
    const t0 = performance.now();
    const r = await svc.start(rec.id);
    cold.boot.push(performance.now() - t0);
    cold.exec.push(performance.now() - t0 + (await timedExec(rec.id)));
    await new Promise((res) => setTimeout(res, 500));
    cold.rss.push(procMiB(r.pid!, 'status', 'VmRSS'));
    cold.disk.push(dirBytes(svc.layout(r).dir));
    await svc.remove(rec.id, { force: true });
  }

  const parent = await svc.create(spec, { name: 'parent' });
  await svc.start(parent.id, { forkable: true });
  await timedExec('parent');
  const steps: Record<string, number[]> = {};
  const one = { pause: [] as number[], prePause: [] as number[], running: [] as number[], ready: [] as number[], exec: [] as number[], callExec: [] as number[], pss: [] as number[], rss: [] as number[], disk: [] as number[] };
  for (let i = 0; i < RUNS; i++) {
    const r = await forkMachine(svc, 'parent', { count: 1 });
    const c = r.clones[0];
    one.pause.push(r.pausedMs);
    for (const [k, v] of Object.entries(r.steps)) (steps[k] ??= []).push(v);
    one.running.push(c.runningMs!);
    one.ready.push(c.readyMs!);
    one.exec.push(c.readyMs! + (await timedExec(c.name)));
    one.prePause.push(r.prePauseMs);
    one.callExec.push(r.prePauseMs + one.exec[one.exec.length - 1]);
    await new Promise((res) => setTimeout(res, 500));
    one.pss.push(procMiB(c.pid!, 'smaps_rollup', 'Pss'));
    one.rss.push(procMiB(c.pid!, 'status', 'VmRSS'));
    one.disk.push(dirBytes(svc.layout(svc.store.get(c.id)).dir));
    await svc.remove(c.id, { force: true });
  }
  // the same without the warm spare (SMOL_FORK_SPARE=0): the clone's QEMU and overlays start inside the call
  process.env.SMOL_FORK_SPARE = '0';
  const noSpare: number[] = [];
  for (let i = 0; i <= Math.max(MIN_REPS, Math.ceil(RUNS / 2)); i++) {
    const r = await forkMachine(svc, 'parent', { count: 1 });
    const c = r.clones[0];
    // the first of these still finds the spare the previous fork left
    if (i > 0) noSpare.push(r.prePauseMs + c.readyMs! + (await timedExec(c.name)));
    await svc.remove(c.id, { force: true });
  }
  delete process.env.SMOL_FORK_SPARE;
  const hold: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const r = await forkMachine(svc, 'parent', { count: 1, hold: true });
    hold.push(r.pausedMs);
    // the clone maps the held parent's own memory: it must be gone before the parent may run again
    for (const c of r.clones) await svc.remove(c.id, { force: true });
    const qmp = await QmpClient.connect(svc.layout(svc.store.get('parent')).qmpSocket);
    await qmp.execute('cont');
    qmp.close();
  }
  const many: Record<number, { total: number[]; pss: number[] }> = {};
  for (const n of [4, 8]) {
    many[n] = { total: [], pss: [] };
    for (let i = 0; i < Math.max(MIN_REPS, Math.ceil(RUNS / 2)); i++) {
      const r = await forkMachine(svc, 'parent', { count: n });
      if (r.clones.some((c) => !c.ok)) throw new Error(`a clone failed: ${JSON.stringify(r.clones)}`);
      many[n].total.push(Math.max(...r.clones.map((c) => c.readyMs!)));
      await new Promise((res) => setTimeout(res, 500));
      many[n].pss.push(median(r.clones.map((c) => procMiB(c.pid!, 'smaps_rollup', 'Pss'))));
      for (const c of r.clones) await svc.remove(c.id, { force: true });
    }
  }
  await svc.remove('parent', { force: true, cascade: true });
  const load1 = os.loadavg();

  const coldReady = median(cold.exec);
  const rows: Row[] = [
    { metric: 'parent pause (parent resumes)', unit: 'ms', value: median(one.pause), target: '≤100' },
    { metric: 'parent pause (--hold)', unit: 'ms', value: median(hold), target: '≤50' },
    { metric: 'fork → clone running', unit: 'ms', value: median(one.running), baseline: median(cold.boot), baselineLabel: 'cold boot → agent' },
    // the release is done by the agent itself (no guest process), so the first exec is the timed `true` after it
    { metric: 'fork → clone configured + released', unit: 'ms', value: median(one.ready), baseline: coldReady, baselineLabel: 'cold boot → 1st exec' },
    { metric: 'fork → first exec `true` done in the clone', unit: 'ms', value: median(one.exec), baseline: coldReady, baselineLabel: 'cold boot → 1st exec', target: '≤300' },
    // what runs in the call before the pause: inspection, locks, the parent's port (the warm spare that the
    // previous fork or `machine start --forkable` left holds the clone's QEMU and overlays)
    { metric: 'forkMachine() call → parent paused', unit: 'ms', value: median(one.prePause) },
    { metric: 'forkMachine() call → first exec done in the clone', unit: 'ms', value: median(one.callExec), baseline: coldReady, baselineLabel: 'cold boot → 1st exec' },
    { metric: '  the same without a warm spare (SMOL_FORK_SPARE=0)', unit: 'ms', value: median(noSpare), baseline: coldReady, baselineLabel: 'cold boot → 1st exec' },
    { metric: 'N=4: fork → all ready', unit: 'ms', value: median(many[4].total), baseline: 4 * coldReady, baselineLabel: '4 cold boots in series' },
    { metric: 'N=8: fork → all ready', unit: 'ms', value: median(many[8].total), baseline: 8 * coldReady, baselineLabel: '8 cold boots in series', target: '≤2000' },
    { metric: 'PSS per clone (N=1)', unit: 'MiB', value: median(one.pss), baseline: median(cold.rss), baselineLabel: 'cold-booted RSS', target: '≤50% of baseline' },
    { metric: 'PSS per clone (N=8)', unit: 'MiB', value: median(many[8].pss), baseline: median(cold.rss), baselineLabel: 'cold-booted RSS' },
    { metric: 'RSS per clone (N=1, shared pages counted)', unit: 'MiB', value: median(one.rss), baseline: median(cold.rss), baselineLabel: 'cold-booted RSS' },
    { metric: 'disk bytes per clone', unit: 'MiB', value: median(one.disk) / MiB, baseline: median(cold.disk) / MiB, baselineLabel: 'fresh machine dir' },
  ];
  printRows(`smol fork (${RUNS} runs, 256 MiB, ${(await hostAccel()).toUpperCase()}, ${os.cpus().length} cores)`, rows);
  console.log(`inside the pause (medians, ms; the template copy overlaps the save): ${Object.entries(steps).map(([k, v]) => `${k} ${median(v).toFixed(1)}`).join(', ')}`);
  console.log(`host load average (1/5/15 min): before ${load0.map((x) => x.toFixed(1)).join('/')}, after ${load1.map((x) => x.toFixed(1)).join('/')}`);
}

main().then(() => {
  if (ownHome) fs.rmSync(home, { recursive: true, force: true });
}, (err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
