/**
 * `npm run bench:vm`: machine lifecycle figures, medians over N runs, each beside a baseline:
 *  - `smol run -- true` end to end vs raw QEMU booting the same kernel+initramfs to poweroff (no smol)
 *  - a repeated `smol run --image DIR -- true` vs `smol run -- true`, alternating (target within 15 %): DIR is
 *    $BENCH_ROOTFS (e.g. a debootstrapped rootfs) or a generated tree of busybox and 11,000 small files
 *  - launch → agent ready (service API)
 *  - exec round trip in a running machine vs the same agent over a host unix socket (no VM)
 *  - stdout throughput guest → host, cp throughput both ways, host RSS per idle machine
 * Set BENCH_RUNS (default 5), BENCH_QUICK=1 for one run and fewer round trips. State goes to a scratch
 * home (or $SMOL_HOME); the kernel and images are the ones `smol` uses (bench/env.ts).
 */
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { AgentClient } from '../src/vm/agent/index.js';
import { findKernel } from '../src/vm/kernel/index.js';
import { ensureInitramfs } from '../src/vm/image/index.js';
import { buildCmdline } from '../src/vm/qemu/cmdline.js';
import { detectHostTscKhz } from '../src/vm/kernel/tsc.js';
import { MachineService } from '../src/vm/service.js';
import { MachineStore } from '../src/vm/store/machines.js';
import { openMachineDb } from '../src/vm/store/db.js';
import { createQemuEngine } from '../src/vm/qemu/engine.js';
import { execOnChannel } from '../src/vm/exec.js';
import { buildPaths, dataPaths } from '../src/util/paths.js';
import { benchHome, quickMode, requireGuest } from './env.js';
import { hostAccel, median, percentile, printRows, timeRuns, type Row } from './stats.js';
import { memoryUsage } from '../src/vm/usage.js';
import { tcgTbMiB } from '../src/vm/qemu/args.js';

const RUNS = Number(process.env.BENCH_RUNS ?? (quickMode ? 1 : 5));
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const { home, assets, ownHome } = benchHome('vm');
requireGuest(assets);
const env = { ...process.env, SMOL_HOME: home, SMOL_ASSETS: assets };
const kvm = (await hostAccel()) === 'kvm';
const MiB = 1024 * 1024;
/** Stream and copy sizes: a quick run only proves the paths work, so it moves an eighth and a quarter. */
const STREAM_MiB = quickMode ? 32 : 256;
const CP_MiB = quickMode ? 16 : 64;

function sink(): Writable & { bytes: number } {
  const w = new Writable({ write(chunk: Buffer, _e, cb) { (w as unknown as { bytes: number }).bytes += chunk.length; cb(); } }) as Writable & { bytes: number };
  w.bytes = 0;
  return w;
}

async function rawQemuBoot(): Promise<number> {
  const kernel = (await findKernel(assets))!;
  const initrd = await ensureInitramfs(assets, kernel);
  const tsc = await detectHostTscKhz();
  const cmdline = buildCmdline({ accel: kvm ? 'kvm' : 'tcg', tscKhz: tsc?.khz ?? null, test: { marker: 'bench' } });
  const t0 = performance.now();
  spawnSync('qemu-system-x86_64', ['-machine', 'microvm', '-accel', kvm ? 'kvm' : 'tcg', '-m', '256M', '-nodefaults', '-no-user-config',
    '-display', 'none', '-no-reboot', '-serial', 'null', '-kernel', kernel.vmlinux, '-initrd', initrd.path, '-append', cmdline], { stdio: 'ignore' });
  return performance.now() - t0;
}

/** A rootfs-sized tree: busybox, its applets, and 11,000 small files in 500 directories (a Debian minbase has ~11k entries). */
function generatedTree(dir: string): string {
  fs.mkdirSync(path.join(dir, 'bin'), { recursive: true });
  fs.copyFileSync('/bin/busybox', path.join(dir, 'bin/busybox'));
  fs.chmodSync(path.join(dir, 'bin/busybox'), 0o755);
  for (const a of ['sh', 'true']) fs.symlinkSync('busybox', path.join(dir, 'bin', a));
  for (const d of ['proc', 'sys', 'dev', 'run', 'tmp', 'etc']) fs.mkdirSync(path.join(dir, d), { recursive: true });
  for (let i = 0; i < 500; i++) {
    const sub = path.join(dir, 'usr/share/bench', `d${i}`);
    fs.mkdirSync(sub, { recursive: true });
    for (let j = 0; j < 22; j++) fs.writeFileSync(path.join(sub, `f${j}`), `${i}/${j}\n`);
  }
  return dir;
}

/** `--image DIR` after its first run (base built, digest cached, boot snapshot saved) vs the default image. */
async function imageDirRow(smol: (args: string[]) => unknown): Promise<Row> {
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-bench-dir-'));
  const dir = process.env.BENCH_ROOTFS ?? generatedTree(path.join(tmp, 'rootfs'));
  smol(['run', '--image', dir, '--', 'true']); // hashes the tree, builds its base, saves its boot snapshot
  const plain: number[] = [];
  const withDir: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    plain.push(...(await timeRuns(1, async () => { smol(['run', '--', 'true']); })));
    withDir.push(...(await timeRuns(1, async () => { smol(['run', '--image', dir, '--', 'true']); })));
  }
  // the generated tree's images go with it (a BENCH_ROOTFS of the user's stays cached, as a run leaves it)
  if (!process.env.BENCH_ROOTFS) smol(['image', 'rm', dir]);
  fs.rmSync(tmp, { recursive: true, force: true });
  const label = process.env.BENCH_ROOTFS ? path.basename(dir) : '11k-file tree';
  return { metric: `smol run --image DIR -- true (repeated, ${label})`, unit: 'ms', value: median(withDir), baseline: median(plain), baselineLabel: 'smol run -- true', target: '≤1.15x' };
}

async function main(): Promise<void> {
  const rows: Row[] = [];
  const smol = (args: string[]) => spawnSync(process.execPath, [path.join(root, 'bin/smol'), ...args], { env, stdio: 'ignore' });
  smol(['run', '--', 'true']); // warm caches (initramfs, probes, page cache) and save the boot snapshot
  const raw = await timeRuns(RUNS, async () => { await rawQemuBoot(); });
  const run = await timeRuns(RUNS, async () => { smol(['run', '--', 'true']); });
  const cold = await timeRuns(RUNS, async () => { smol(['run', '--cold-boot', '--', 'true']); });
  rows.push({ metric: 'smol run -- true (boot snapshot)', unit: 'ms', value: median(run), baseline: median(raw), baselineLabel: 'raw QEMU boot→poweroff', target: kvm ? '≤300 (KVM)' : '≤2000 (TCG)' });
  rows.push({ metric: 'smol run --cold-boot -- true', unit: 'ms', value: median(cold), baseline: median(raw), baselineLabel: 'raw QEMU boot→poweroff' });
  rows.push(await imageDirRow(smol));

  const svc = new MachineService({ home, store: new MachineStore(openMachineDb(dataPaths(home).machineDb)), engine: createQemuEngine(home) });
  const ready: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    const rec = await svc.create({ ...(await import('../src/smolfile/schema.js')).smolfileSchema.parse({}) }, { ephemeral: true });
    const t0 = performance.now();
    await svc.start(rec.id);
    ready.push(performance.now() - t0);
    await svc.remove(rec.id, { force: true });
  }
  rows.push({ metric: 'launch → agent ready', unit: 'ms', value: median(ready), baseline: median(raw), baselineLabel: 'raw QEMU boot→poweroff' });

  // a persistent machine for the steady-state figures
  const spec = (await import('../src/smolfile/schema.js')).smolfileSchema.parse({});
  const rec = await svc.create(spec, { name: `bench-${process.pid}` });
  await svc.start(rec.id);
  const { ch, release } = await svc.channel(rec.id);
  const none = { stdin: null, stdout: sink(), stderr: sink() };
  for (let i = 0; i < 20; i++) await execOnChannel(ch, { argv: ['true'] }, none);
  const rtt: number[] = [];
  for (let i = 0; i < (quickMode ? 20 : 200); i++) {
    const t0 = performance.now();
    await execOnChannel(ch, { argv: ['true'] }, none);
    rtt.push(performance.now() - t0);
  }
  // baseline: the same agent binary on the host over a unix socket
  const sockDir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-bench-agent-'));
  const sock = path.join(sockDir, 'a.sock');
  const agent = spawn(buildPaths.agent, ['--listen', `unix:${sock}`], { stdio: 'ignore' });
  for (let i = 0; i < 100 && !fs.existsSync(sock); i++) await new Promise((r) => setTimeout(r, 20));
  const host = await AgentClient.connectUnix(sock);
  const hostRtt: number[] = [];
  for (let i = 0; i < (quickMode ? 20 : 200); i++) {
    const t0 = performance.now();
    await host.run({ argv: ['true'] });
    hostRtt.push(performance.now() - t0);
  }
  rows.push({ metric: 'exec round trip (true) p50', unit: 'ms', value: median(rtt), baseline: median(hostRtt), baselineLabel: 'agent on host, unix socket', target: '≤10' });
  rows.push({ metric: 'exec round trip (true) p99', unit: 'ms', value: percentile(rtt, 99), baseline: percentile(hostRtt, 99), baselineLabel: 'agent on host' });

  // dd writes 1 MiB blocks; busybox `head -c` manages only ~17 MiB/s inside a TCG guest even into /dev/null,
  // so it measured itself rather than the channel
  const producer = (size: number) => ['sh', '-c', `dd if=/dev/zero bs=1M count=${size / MiB} 2>/dev/null`];
  const tput = async (c: { exec: typeof ch.exec } | null, size: number, argv = producer(size)) => {
    const out = sink();
    const t0 = performance.now();
    if (c) await execOnChannel(ch, { argv }, { stdin: null, stdout: out, stderr: sink() });
    else { const r = host.exec({ argv }); r.stdin.end(); r.stdout.pipe(out); await r.exit; await new Promise((res) => setImmediate(res)); }
    return ((c ? size : out.bytes) / MiB) / ((performance.now() - t0) / 1000);
  };
  const vmT: number[] = [];
  const hostT: number[] = [];
  const pipeT: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    vmT.push(await tput(ch, STREAM_MiB * MiB));
    hostT.push(await tput(null, STREAM_MiB * MiB));
    // the same bytes through one pipe inside the guest, never leaving it: what the guest alone costs
    pipeT.push(await tput(ch, STREAM_MiB * MiB, ['sh', '-c', `${producer(STREAM_MiB * MiB)[2]} | cat >/dev/null`]));
  }
  rows.push({ metric: `stdout guest→host (${STREAM_MiB} MiB)`, unit: 'MiB/s', value: median(vmT), baseline: median(hostT), baselineLabel: 'agent on host', target: '≥100' });
  rows.push({ metric: '  same bytes, guest pipe only (dd | cat)', unit: 'MiB/s', value: median(pipeT), baseline: median(vmT), baselineLabel: 'stdout guest→host' });

  const file = path.join(sockDir, 'blob');
  fs.writeFileSync(file, Buffer.alloc(CP_MiB * MiB, 1));
  const putT: number[] = [];
  const getT: number[] = [];
  for (let i = 0; i < RUNS; i++) {
    let t0 = performance.now();
    await ch.putFile(fs.createReadStream(file), '/tmp/blob', 0o644);
    putT.push(CP_MiB / ((performance.now() - t0) / 1000));
    t0 = performance.now();
    const g = await ch.getFile('/tmp/blob');
    const s = sink();
    await new Promise<void>((res) => { g.stream.pipe(s); g.stream.on('end', () => res()); });
    getT.push(CP_MiB / ((performance.now() - t0) / 1000));
  }
  rows.push({ metric: `cp host→guest (${CP_MiB} MiB)`, unit: 'MiB/s', value: median(putT) });
  rows.push({ metric: `cp guest→host (${CP_MiB} MiB)`, unit: 'MiB/s', value: median(getT) });
  ch.close();
  release();
  const cur = svc.store.get(rec.id);
  const rss = Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${cur.pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;
  rows.push({ metric: 'host RSS per idle machine (QEMU)', unit: 'MiB', value: rss, baseline: spec.memory, baselineLabel: 'guest memory size' });
  // what the machine costs the host after the work above, TCG's translated code included (capped: args.ts)
  const pss = memoryUsage(cur.pid)?.pssMiB ?? 0;
  rows.push({ metric: `host PSS per machine after this bench's work${kvm ? '' : ` (TCG cache ≤ ${tcgTbMiB()} MiB)`}`, unit: 'MiB', value: pss, baseline: spec.memory, baselineLabel: 'guest memory size' });
  await svc.remove(rec.id, { force: true });
  host.close();
  agent.kill('SIGKILL');
  fs.rmSync(sockDir, { recursive: true, force: true });
  if (ownHome) fs.rmSync(home, { recursive: true, force: true });
  printRows(`bench:vm (${kvm ? 'KVM' : 'TCG'}, ${os.cpus().length} cores, load ${os.loadavg()[0].toFixed(1)}, ${RUNS} runs)`, rows);
}

main().catch((e) => { console.error(e); process.exit(1); });
