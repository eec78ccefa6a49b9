/**
 * `npm run bench:rollout`: VM-isolated rollout attempts on fork points, side by side with process isolation
 * and with the old way (a fork of the warm machine per attempt), 256 MiB guests, a trivial stage (`true`):
 *  - attempts per minute, the real Worker over a real SQLite ledger, the same concurrency for every mode
 *  - parent pauses while those attempts run: captures of the warm machine (each one is a stop … cont)
 *  - clone start from a saved point → first exec (`true`) done in it, medians over BENCH_RUNS
 * BENCH_ATTEMPTS (default 200; quick 6) attempts per mode; BENCH_CONCURRENCY (default 2) attempts at once.
 * The modes run interleaved in chunks of BENCH_CHUNK (default 20) attempts (points, fork per attempt,
 * process, points, ...), each chunk a fresh worker and runner, so host load from others falls on all alike.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { BlobStore } from '../src/ledger/blobs.js';
import { SqliteLedger } from '../src/ledger/sqlite.js';
import { ProcessStageRunner, type StageRunner } from '../src/rollout/stage-runner.js';
import { submitRollout } from '../src/rollout/submit.js';
import { VmStageRunner } from '../src/rollout/vm-stage-runner.js';
import { Worker } from '../src/rollout/worker.js';
import { smolfileSchema } from '../src/smolfile/schema.js';
import { execOnChannel } from '../src/vm/exec.js';
import { forkFromPoint, prepareClone, startPrepared } from '../src/vm/fork/from-point.js';
import { saveForkPoint } from '../src/vm/fork/save.js';
import { createQemuEngine } from '../src/vm/qemu/engine.js';
import { openMachineDb } from '../src/vm/store/db.js';
import { MachineStore } from '../src/vm/store/machines.js';
import { MachineService } from '../src/vm/service.js';
import { dataPaths } from '../src/util/paths.js';
import { benchHome, quickMode, requireGuest } from './env.js';
import { hostAccel, median, percentile, printRows, type Row } from './stats.js';

const RUNS = Number(process.env.BENCH_RUNS ?? (quickMode ? 1 : 9));
const ATTEMPTS = Number(process.env.BENCH_ATTEMPTS ?? (quickMode ? 6 : 200));
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 2);
const CHUNK = Math.min(ATTEMPTS, Number(process.env.BENCH_CHUNK ?? 20));
const { home, assets, ownHome } = benchHome('rollout');
requireGuest(assets);
const spec = smolfileSchema.parse({ memory: 256 });
const svc = new MachineService({ home, store: new MachineStore(openMachineDb(dataPaths(home).machineDb)), engine: createQemuEngine(home) });
const sink = () => new Writable({ write(_c, _e, cb) { cb(); } });

// every capture of a running machine is one pause of it (stop → … → cont); count them where they happen
let captures = 0;
const ops = svc.engine.fork!;
const capture = ops.capture.bind(ops);
ops.capture = (...a) => { captures++; return capture(...a); };

interface Tally { completed: number; seconds: number; pauses: number; failed: number; cpuMs: number }
const tally = (): Tally => ({ completed: 0, seconds: 0, pauses: 0, failed: 0, cpuMs: 0 });

async function chunk(tag: string, n: number, runner: StageRunner, into: Tally): Promise<void> {
  const dir = path.join(home, `ledger-${tag}`);
  fs.mkdirSync(dir, { recursive: true });
  const ledger = new SqliteLedger({ path: path.join(dir, 'ledger.db') });
  const blobs = new BlobStore(path.join(dir, 'blobs'));
  try {
    const manifest = `apiVersion: smol/v1\nkind: Rollout\nname: ${tag}\nenvironment: { version: e1 }\ndefaults: { maxAttempts: 1, timeout: 120s }\n`
      + `generate: { count: ${n}, template: "x{i}" }\nstages:\n  - name: t\n    kind: cpu\n    command: ["true"]\n`;
    await submitRollout(ledger, blobs, manifest);
    let failed = 0;
    const worker = new Worker({
      ledger, blobs, runner, concurrency: CONCURRENCY, leaseMs: 120_000, pollMs: 20, exitWhenIdleMs: 0,
      onEvent: (e) => { if (e.type === 'failed') { failed++; if (failed < 3) console.error(`bench: ${tag}: ${e.error}`); } },
    });
    const before = captures;
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    await worker.run();
    const cpu = process.cpuUsage(cpu0);
    into.cpuMs += (cpu.user + cpu.system) / 1000;
    into.seconds += (performance.now() - t0) / 1000;
    into.completed += worker.completed;
    into.pauses += captures - before;
    into.failed += failed;
  } finally {
    await ledger.close();
  }
}

/** Phase marks of the point-clone attempts (VmStageRunner's onTrace), for where an attempt's time goes. */
const traces: Record<string, number>[] = [];
const phase = (a: string, b: string) => median(traces.filter((t) => t[a] !== undefined && t[b] !== undefined).map((t) => t[b] - t[a]));

async function firstExec(name: string): Promise<number> {
  const { ch, release } = await svc.channel(name);
  try {
    const t = performance.now();
    await execOnChannel(ch, { argv: ['true'] }, { stdin: null, stdout: sink(), stderr: sink() });
    return performance.now() - t;
  } finally {
    ch.close();
    release();
  }
}

async function main(): Promise<void> {
  const load0 = os.loadavg();
  const warm = await svc.create(spec, { name: 'warm' });
  await svc.start(warm.id, { forkable: true });
  await firstExec('warm');

  // clone start from a saved point → first exec, and its parts
  const t = performance.now();
  const saved = await saveForkPoint(svc, 'warm', 'pt');
  const saveMs = performance.now() - t;
  const start = { total: [] as number[], running: [] as number[], ready: [] as number[], exec: [] as number[] };
  for (let i = 0; i < RUNS; i++) {
    const t0 = performance.now();
    const r = await forkFromPoint(svc, 'pt', { names: [`c${i}`] });
    const exec = await firstExec(`c${i}`);
    start.total.push(performance.now() - t0);
    start.running.push(r.clones[0].runningMs!);
    start.ready.push(r.clones[0].readyMs!);
    start.exec.push(exec);
    await svc.remove(`c${i}`, { force: true });
  }

  // the worker's steady state: the clone's QEMU was started while the previous attempt ran; the first exec
  // on the CONFIGURE connection (what a worker does), interleaved with the same on a new connection
  const waiting: number[] = [];
  const waitingNewConn: number[] = [];
  for (let i = 0; i < RUNS * 2; i++) {
    const kept = i % 2 === 0;
    const p = await prepareClone(svc, 'pt', `w${i}`);
    await new Promise((r) => setTimeout(r, 200));
    const t0 = performance.now();
    const c = await startPrepared(svc, p, { keepChannel: kept });
    if (!c.ok) throw new Error(`clone w${i}: ${c.error}`);
    if (c.channel) {
      try {
        await execOnChannel(c.channel.ch, { argv: ['true'] }, { stdin: null, stdout: sink(), stderr: sink() });
      } finally {
        c.channel.ch.close();
        c.channel.release();
      }
    } else await firstExec(`w${i}`);
    (kept ? waiting : waitingNewConn).push(performance.now() - t0);
    await svc.remove(`w${i}`, { force: true });
  }

  const proc = tally();
  const points = tally();
  const perFork = tally();
  const loads: number[] = [];
  for (let done = 0, k = 0; done < ATTEMPTS; done += CHUNK, k++) {
    const n = Math.min(CHUNK, ATTEMPTS - done);
    await chunk(`points-${k}`, n, await VmStageRunner.create({ svc, spec, forkPoint: 'pt', onTrace: (m) => traces.push(m) }), points);
    await chunk(`fork-each-${k}`, n, await VmStageRunner.create({ svc, spec, warmMachine: 'warm', forkEachAttempt: true }), perFork);
    await chunk(`process-${k}`, n, await ProcessStageRunner.create(), proc);
    loads.push(os.loadavg()[0]);
  }
  const perMin = (t: Tally) => (t.completed / t.seconds) * 60;
  const load1 = os.loadavg();
  const accel = await hostAccel();

  const rows: Row[] = [
    { metric: `attempts/min, vm, fork points (${ATTEMPTS} × true, concurrency ${CONCURRENCY})`, unit: '/min', value: perMin(points), baseline: perMin(perFork), baselineLabel: 'fork per attempt', target: accel === 'tcg' ? '≥ 120' : undefined },
    { metric: 'attempts/min, process isolation (same run)', unit: '/min', value: perMin(proc) },
    { metric: '  attempt, point clone: waiting for a spare clone', unit: 'ms', value: phase('begin', 'taken') },
    { metric: '  attempt, point clone: state load + cont', unit: 'ms', value: phase('taken', 'running') },
    { metric: '  attempt, point clone: CONFIGURE (identity, entropy, clock)', unit: 'ms', value: phase('running', 'configured') },
    { metric: '  attempt, point clone: command (input in, run, output out)', unit: 'ms', value: phase('started', 'execDone') },
    { metric: '  a spare clone\'s preparation (overlay, QEMU start; in the background)', unit: 'ms', value: phase('prepBegin', 'prepEnd') },
    { metric: '  CPU per attempt: the clone\'s QEMU (start, state load, guest work)', unit: 'ms', value: median(traces.filter((t) => t.qemuCpuMs >= 0).map((t) => t.qemuCpuMs)) },
    { metric: '  CPU per attempt: this node process (worker, ledger, smol), fork points', unit: 'ms', value: points.cpuMs / Math.max(1, points.completed) },
    { metric: '  CPU per attempt: this node process, fork per attempt', unit: 'ms', value: perFork.cpuMs / Math.max(1, perFork.completed) },
    { metric: `parent pauses during ${ATTEMPTS} attempts, fork points`, unit: 'pauses', value: points.pauses, baseline: perFork.pauses, baselineLabel: 'fork per attempt', target: '0' },
    { metric: 'clone from a saved point → first exec done', unit: 'ms', value: median(start.total), target: accel === 'tcg' ? '≤ 250' : undefined },
    { metric: 'the same, its QEMU already waiting (a worker\'s next attempt)', unit: 'ms', value: median(waiting), target: accel === 'tcg' ? '≤ 250' : undefined },
    { metric: '  … with the first exec on a new connection instead', unit: 'ms', value: median(waitingNewConn) },
    { metric: '  of which: clone running (QEMU, overlay, state loaded)', unit: 'ms', value: median(start.running) },
    { metric: '  of which: clone configured (identity, entropy, clock)', unit: 'ms', value: median(start.ready) },
    { metric: '  of which: first exec of `true`', unit: 'ms', value: median(start.exec) },
    { metric: 'clone → first exec, p90', unit: 'ms', value: percentile(start.total, 90) },
    { metric: 'saving the point (once; parent paused for part of it)', unit: 'ms', value: saveMs },
    { metric: '  of which: parent paused', unit: 'ms', value: saved.pausedMs },
  ];
  printRows(`rollout attempts on fork points (${accel.toUpperCase()}, 256 MiB, ${RUNS} runs for medians)`, rows);
  if (points.failed + perFork.failed + proc.failed) console.log(`failed attempts: points ${points.failed}, fork per attempt ${perFork.failed}, process ${proc.failed}`);
  console.log(`load average before ${load0.map((x) => x.toFixed(1)).join(' ')}, after ${load1.map((x) => x.toFixed(1)).join(' ')}; 1-min load after each round of chunks: ${loads.map((x) => x.toFixed(1)).join(' ')}`);
}

/** Whatever happened: every machine (QEMU included) and the point go, then the scratch home. */
async function cleanup(): Promise<void> {
  for (const m of svc.store.list()) await svc.remove(m.id, { force: true, cascade: true }).catch(() => undefined);
  const { removePoint } = await import('../src/vm/fork/points.js');
  try { removePoint(svc, 'pt', { force: true }); } catch { /* never saved, or gone */ }
  await svc.list().catch(() => []);
  if (ownHome) fs.rmSync(home, { recursive: true, force: true });
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
}).finally(() => cleanup());
