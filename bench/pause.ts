/**
 * `npm run bench:pause`: pause and resume figures, medians over BENCH_RUNS (default 5) runs of one 256 MiB
 * machine, for a plain machine (RAM in the migration stream) and a forkable one (RAM file copied beside
 * device state only):
 *  - pause (vCPUs stop), resume → first exec `true` done
 *  - pause --to-disk, resume from disk → first exec `true` done, the saved bytes on disk
 * The figures are of the service calls (what the HTTP API pays); the CLI adds node's start (~0.3 s).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { smolfileSchema } from '../src/smolfile/schema.js';
import { execOnChannel } from '../src/vm/exec.js';
import { pauseMachine, resumeMachine } from '../src/vm/pause.js';
import { pausedDir } from '../src/vm/pause-files.js';
import { createQemuEngine } from '../src/vm/qemu/engine.js';
import { openMachineDb } from '../src/vm/store/db.js';
import { MachineStore } from '../src/vm/store/machines.js';
import { MachineService } from '../src/vm/service.js';
import { dataPaths } from '../src/util/paths.js';
import { benchHome, quickMode, requireGuest } from './env.js';
import { hostAccel, median, printRows, type Row } from './stats.js';

const RUNS = Number(process.env.BENCH_RUNS ?? (quickMode ? 1 : 5));
const { home, assets, ownHome } = benchHome('pause');
requireGuest(assets);
const MiB = 1024 * 1024;
const svc = new MachineService({ home, store: new MachineStore(openMachineDb(dataPaths(home).machineDb)), engine: createQemuEngine(home) });
const sink = () => new Writable({ write(_c, _e, cb) { cb(); } });

async function firstExec(name: string): Promise<void> {
  const { ch, release } = await svc.channel(name);
  try {
    await execOnChannel(ch, { argv: ['true'] }, { stdin: null, stdout: sink(), stderr: sink() });
  } finally {
    ch.close();
    release();
  }
}

const ms = async (fn: () => Promise<unknown>) => { const t = performance.now(); await fn(); return performance.now() - t; };

interface Figures { pause: number[]; resume: number[]; toDisk: number[]; fromDisk: number[]; bytes: number[] }

async function measure(name: string, forkable: boolean): Promise<Figures> {
  const rec = await svc.create(smolfileSchema.parse({ memory: 256, fork: { enabled: forkable } }), { name });
  await svc.start(rec.id);
  // a guest that has used its memory: a page cache and a tmpfs file, as a working machine has
  await firstExec(name);
  const f: Figures = { pause: [], resume: [], toDisk: [], fromDisk: [], bytes: [] };
  for (let i = 0; i < RUNS; i++) {
    f.pause.push(await ms(() => pauseMachine(svc, name)));
    f.resume.push(await ms(async () => { await resumeMachine(svc, name); await firstExec(name); }));
    f.toDisk.push(await ms(() => pauseMachine(svc, name, { toDisk: true })));
    const dir = pausedDir(svc.layout(svc.store.get(name)));
    f.bytes.push(fs.readdirSync(dir).reduce((n, e) => n + fs.statSync(path.join(dir, e)).blocks * 512, 0));
    f.fromDisk.push(await ms(async () => { await resumeMachine(svc, name); await firstExec(name); }));
  }
  await svc.remove(name, { force: true });
  return f;
}

async function main(): Promise<void> {
  const load0 = os.loadavg();
  const plain = await measure('bench-plain', false);
  const fork = await measure('bench-forkable', true);
  const load1 = os.loadavg();
  const rows: Row[] = [];
  for (const [label, f] of [['plain', plain], ['forkable', fork]] as const) {
    rows.push(
      { metric: `${label}: pause (vCPUs stop)`, unit: 'ms', value: median(f.pause), target: '≤50' },
      { metric: `${label}: resume → first exec done`, unit: 'ms', value: median(f.resume) },
      { metric: `${label}: pause --to-disk`, unit: 'ms', value: median(f.toDisk), baseline: median(f.pause), baselineLabel: 'pause in memory', target: '≤2000' },
      { metric: `${label}: resume from disk → first exec done`, unit: 'ms', value: median(f.fromDisk), baseline: median(f.resume), baselineLabel: 'resume from memory', target: '≤1000' },
      { metric: `${label}: saved on disk`, unit: 'MiB', value: median(f.bytes) / MiB },
    );
  }
  printRows(`smol pause/resume (${RUNS} runs, 256 MiB, ${(await hostAccel()).toUpperCase()}, ${os.cpus().length} cores)`, rows);
  console.log(`host load average (1/5/15 min): before ${load0.map((x) => x.toFixed(1)).join('/')}, after ${load1.map((x) => x.toFixed(1)).join('/')}`);
}

main().then(() => {
  if (ownHome) fs.rmSync(home, { recursive: true, force: true });
}, (err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
