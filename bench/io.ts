/**
 * `npm run bench:io`: what a machine's I/O with the host costs, each figure beside the same thing on the host.
 * One function per section; BENCH_IO=volumes,… picks sections (default: all).
 *  - volumes: virtiofs sequential read of a 256 MiB file (dd bs=1M, buffered and O_DIRECT; dd bs=4M O_DIRECT,
 *    beside the host's dd at the same block size) and, for the
 *    TCG ceiling, 256 MiB read from a file in the guest's own tmpfs (page cache to user, no virtiofs at all);
 *    busybox `find` over 10,000 small files (guest caches dropped, then warm), each vs the host (warm page
 *    cache, the same tools); `smol run -v … -- true` vs `smol run -- true`, interleaved (both restore a boot
 *    snapshot; the volumes are hotplugged after: docs/volumes.md), with the phases of each from SMOL_TRACE=1.
 *  - ports (bench/io-ports.ts): 1,000 keep-alive HTTP requests and a 100 MiB download through a published port,
 *    vs the same server on the host's loopback.
 * Set BENCH_RUNS (default 5). Machines live in a temp SMOL_HOME; kernel and images come from the default
 * $SMOL_ASSETS (what `bash scripts/setup.sh` installed), so it works on a fresh clone.
 */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { assetsHome, dataPaths } from '../src/util/paths.js';
import { MachineService } from '../src/vm/service.js';
import { MachineStore } from '../src/vm/store/machines.js';
import { openMachineDb } from '../src/vm/store/db.js';
import { createQemuEngine } from '../src/vm/qemu/engine.js';
import { execOnChannel } from '../src/vm/exec.js';
import type { GuestChannel } from '../src/vm/engine.js';
import { smolfileSchema } from '../src/smolfile/schema.js';
import { hostAccel, median, printRows, timeRuns, type Row } from './stats.js';
import { portsSection } from './io-ports.js';

const RUNS = Number(process.env.BENCH_RUNS ?? 5);
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const assets = assetsHome(process.env); // the default assets, before SMOL_HOME moves to a scratch dir
const home = process.env.SMOL_BENCH_HOME ?? fs.mkdtempSync(path.join(os.tmpdir(), 'smol-bench-io-'));
process.env.SMOL_HOME = home;
process.env.SMOL_ASSETS = assets;
const env = { ...process.env, SMOL_HOME: home, SMOL_ASSETS: assets };
const MiB = 1024 * 1024;

interface BenchContext { kvm: boolean; svc: MachineService; scratch: string }
type Section = (c: BenchContext) => Promise<Row[]>;

/** Runs the CLI; returns its SMOL_TRACE phases (src/util/trace.ts), name → ms since the process started. */
const smol = (args: string[]): Map<string, number> => {
  const r = spawnSync(process.execPath, [path.join(root, 'bin/smol'), ...args], { env: { ...env, SMOL_TRACE: '1' }, stdio: ['ignore', 'ignore', 'pipe'] });
  if (r.status !== 0) throw new Error(`smol ${args.join(' ')} failed (${r.status}): ${r.stderr.toString().trim().split('\n').slice(-3).join(' ')}`);
  const phases = new Map<string, number>();
  for (const m of r.stderr.toString().matchAll(/^\[trace ([\d.]+)\] (.+)$/gm)) phases.set(m[2], Number(m[1]));
  return phases;
};

/** Where `smol run` spends its time, from one run's trace: [label, from phase, to phase]. */
const RUN_PHASES: [string, string, string][] = [
  ['  node start, up to the run', '', 'run: start'],
  ['  create, snapshot lookup', 'run: start', 'restore: start'],
  ['  launch (QEMU; with -v the RAM copy and virtiofsd beside it)', 'restore: start', 'qemu: launched'],
  ['  RAM copy wait + device state load', 'qemu: launched', 'restore: state loaded'],
  // the agent answers both CONFIGUREs (identity, then the volumes) after the mount: one read brings both in
  ['  agent connect + configure (with -v: the plug, and the agent\'s mount)', 'restore: state loaded', 'run: ready'],
  ['  the command (true)', 'run: ready', 'run: command done'],
  ['  teardown (QEMU, virtiofsd, files)', 'run: command done', 'run: removed'],
];
const phaseMs = (t: Map<string, number>, from: string, to: string): number | undefined => {
  const b = t.get(to);
  const a = from ? t.get(from) : 0;
  return a === undefined || b === undefined ? undefined : b - a;
};

function sink(): Writable & { text: string } {
  const w = new Writable({ write(chunk: Buffer, _e, cb) { w.text += chunk.toString(); cb(); } }) as Writable & { text: string };
  w.text = '';
  return w;
}

async function guest(ch: GuestChannel, script: string): Promise<string> {
  const out = sink();
  const err = sink();
  const r = await execOnChannel(ch, { argv: ['/bin/sh', '-c', script] }, { stdin: null, stdout: out, stderr: err });
  if (r.code !== 0) throw new Error(`guest: ${script} failed (${r.code}): ${err.text.trim()}`);
  return out.text;
}

function host(argv: string[]): string {
  const r = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${argv.join(' ')} failed: ${r.stderr}`);
  return r.stdout;
}

/** virtiofs figures, guest vs host, then the cost of a volume on `smol run`. */
const volumes: Section = async ({ svc, scratch }) => {
  const rows: Row[] = [];
  const share = path.join(scratch, 'share');
  fs.mkdirSync(path.join(share, 'many'), { recursive: true });
  const big = path.join(share, 'big');
  const block = Buffer.alloc(MiB);
  for (let i = 0; i < block.length; i += 4096) block.writeUInt32LE(i * 2654435761 >>> 0, i);
  const fd = fs.openSync(big, 'w');
  for (let i = 0; i < 256; i++) fs.writeSync(fd, block);
  fs.closeSync(fd);
  for (let d = 0; d < 100; d++) {
    const dir = path.join(share, 'many', String(d));
    fs.mkdirSync(dir);
    for (let f = 0; f < 100; f++) fs.writeFileSync(path.join(dir, `f${f}`), 'x');
  }
  const rec = await svc.create({ ...smolfileSchema.parse({}), volumes: [{ host: share, guest: '/work', readonly: true }] }, { ephemeral: true, name: `bench-io-${process.pid}` });
  try {
    const started = await svc.start(rec.id, { keepChannel: true });
    const { ch, release } = started.channel!;
    try {
      host(['dd', `if=${big}`, 'of=/dev/null', 'bs=1M']); // the host's page cache holds the file for both sides
      const count = Number((await guest(ch, 'busybox find /work/many -type f | wc -l')).trim());
      if (count !== 10_000) throw new Error(`guest sees ${count} files, expected 10000`);
      const gRead: number[] = [];
      const gDirect: number[] = [];
      const gDirect4: number[] = [];
      const hRead4: number[] = [];
      const gTmpfs: number[] = [];
      const hRead: number[] = [];
      const gFind: number[] = [];
      const gFindWarm: number[] = [];
      const hFind: number[] = [];
      const mibps = async (script: string, mib = 256) => {
        const t0 = performance.now();
        await guest(ch, script);
        return mib / ((performance.now() - t0) / 1000);
      };
      // the TCG ceiling of any buffered read: page cache to user space in the guest, no virtiofs involved (a
      // virtiofs file cannot serve: cache=auto drops its pages at each open, and 256 MiB exceeds the guest's RAM)
      // 64 MiB read 4 times: the initramfs root holds half the guest's RAM at most
      await guest(ch, 'dd if=/dev/zero of=/dev/shm/smol-bench bs=1M count=64 2>/dev/null');
      for (let i = 0; i < RUNS; i++) {
        await guest(ch, 'sync; echo 3 > /proc/sys/vm/drop_caches');
        gRead.push(await mibps('dd if=/work/big of=/dev/null bs=1M 2>/dev/null'));
        gTmpfs.push(await mibps('for i in 1 2 3 4; do dd if=/dev/shm/smol-bench of=/dev/null bs=1M 2>/dev/null; done'));
        await guest(ch, 'echo 3 > /proc/sys/vm/drop_caches');
        // O_DIRECT skips the guest page cache: virtiofsd writes straight into dd's buffer
        gDirect.push(await mibps('dd if=/work/big of=/dev/null bs=1M iflag=direct 2>/dev/null'));
        // bs=4M on both sides: at 1 MiB the host's dd buffer stays in the CPU's cache, which a copy into
        // guest RAM never does; larger direct reads also reach virtiofsd as several requests at once
        gDirect4.push(await mibps('dd if=/work/big of=/dev/null bs=4M iflag=direct 2>/dev/null'));
        for (const [bs, into] of [['1M', hRead], ['4M', hRead4]] as const) {
          const t0 = performance.now();
          host(['dd', `if=${big}`, 'of=/dev/null', `bs=${bs}`]);
          into.push(256 / ((performance.now() - t0) / 1000));
        }
        await guest(ch, 'echo 3 > /proc/sys/vm/drop_caches');
        const find = async () => {
          const t = performance.now();
          await guest(ch, 'busybox find /work/many -type f | wc -l >/dev/null');
          return performance.now() - t;
        };
        gFind.push(await find());
        gFindWarm.push(await find());
        const t1 = performance.now();
        spawnSync('/bin/sh', ['-c', `busybox find ${path.join(share, 'many')} -type f | wc -l >/dev/null`]);
        hFind.push(performance.now() - t1);
      }
      const host256 = median(hRead);
      rows.push({ metric: 'virtiofs sequential read (256 MiB, dd bs=1M)', unit: 'MiB/s', value: median(gRead), baseline: host256, baselineLabel: 'host dd, page cache', target: '≥0.30x' });
      rows.push({ metric: '  same, O_DIRECT (dd iflag=direct)', unit: 'MiB/s', value: median(gDirect), baseline: host256, baselineLabel: 'host dd, page cache' });
      rows.push({ metric: 'virtiofs sequential read, O_DIRECT (dd bs=4M iflag=direct)', unit: 'MiB/s', value: median(gDirect4), baseline: median(hRead4), baselineLabel: 'host dd bs=4M, page cache', target: '≥0.30x' });
      rows.push({ metric: '  TCG ceiling: guest tmpfs read (4 x 64 MiB)', unit: 'MiB/s', value: median(gTmpfs), baseline: host256, baselineLabel: 'host dd, page cache' });
      rows.push({ metric: 'virtiofs find over 10,000 files (cold guest cache)', unit: 'ms', value: median(gFind), baseline: median(hFind), baselineLabel: 'host busybox find' });
      rows.push({ metric: '  same, repeated at once (warm guest cache)', unit: 'ms', value: median(gFindWarm), baseline: median(hFind), baselineLabel: 'host busybox find' });
    } finally {
      ch.close();
      release();
    }
  } finally {
    await svc.remove(rec.id, { force: true });
  }
  smol(['run', '--', 'true']); // save the boot snapshot a plain run restores
  smol(['run', '-v', `${share}:/work:ro`, '--', 'true']); // and the one runs with volumes restore
  // interleaved, so both kinds see the same load on a shared host
  const plain: number[] = [];
  const withVol: number[] = [];
  const plainTraces: Map<string, number>[] = [];
  const volTraces: Map<string, number>[] = [];
  for (let i = 0; i < RUNS; i++) {
    let t0 = performance.now();
    plainTraces.push(smol(['run', '--', 'true']));
    plain.push(performance.now() - t0);
    t0 = performance.now();
    volTraces.push(smol(['run', '-v', `${share}:/work:ro`, '--', 'true']));
    withVol.push(performance.now() - t0);
  }
  const cold = await timeRuns(RUNS, async () => { smol(['run', '--cold-boot', '--', 'true']); });
  rows.push({ metric: 'smol run -v … -- true', unit: 'ms', value: median(withVol), baseline: median(plain), baselineLabel: 'smol run -- true', target: '≤1.15x' });
  for (const [label, from, to] of RUN_PHASES) {
    const of = (ts: Map<string, number>[]) => ts.map((t) => phaseMs(t, from, to)).filter((x): x is number => x !== undefined);
    const v = of(volTraces);
    const p = of(plainTraces);
    if (v.length) rows.push({ metric: label, unit: 'ms', value: median(v), baseline: p.length ? median(p) : undefined, baselineLabel: 'same, without -v' });
  }
  rows.push({ metric: '  cold boot without volumes', unit: 'ms', value: median(cold), baseline: median(withVol), baselineLabel: 'smol run -v … -- true' });
  return rows;
};

const ports: Section = () => portsSection();
const SECTIONS: Record<string, Section> = { volumes, ports };

async function main(): Promise<void> {
  const kvm = (await hostAccel()) === 'kvm';
  const svc = new MachineService({ home, store: new MachineStore(openMachineDb(dataPaths(home).machineDb)), engine: createQemuEngine(home) });
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-bench-io-data-'));
  const pick = (process.env.BENCH_IO ?? Object.keys(SECTIONS).join(',')).split(',').filter(Boolean);
  const rows: Row[] = [];
  try {
    for (const name of pick) {
      const section = SECTIONS[name];
      if (!section) throw new Error(`unknown BENCH_IO section "${name}" (have: ${Object.keys(SECTIONS).join(', ')})`);
      rows.push(...await section({ kvm, svc, scratch }));
    }
  } finally {
    fs.rmSync(scratch, { recursive: true, force: true });
    if (!process.env.SMOL_BENCH_HOME) fs.rmSync(home, { recursive: true, force: true });
  }
  printRows(`bench:io (${kvm ? 'KVM' : 'TCG'}, ${os.cpus().length} cores, load ${os.loadavg()[0].toFixed(1)}, ${RUNS} runs)`, rows);
}

main().catch((e) => { console.error(e); process.exit(1); });
