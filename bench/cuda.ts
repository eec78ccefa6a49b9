/**
 * CUDA remoting overhead: the same driver calls made directly through koffi into the FAKE driver, and
 * remoted (koffi -> guest shim -> Unix socket -> the session's own process -> koffi -> FAKE driver), side by side.
 * The FAKE driver does almost no work per call, so the numbers are the remoting path's own cost. Then the
 * sync null call with spin-before-block off and on (SMOL_CUDA_SPIN_US), interleaved, from koffi and from C.
 *   npm run bench:cuda [-- --quick] [-- --spin-rounds N]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFile, execFileSync, spawn } from 'node:child_process';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { assetsHome } from '../src/util/paths.js';
import { startGpuDaemon, type GpuDaemon } from '../src/cuda/daemon/index.js';
import { DEFAULT_SPIN_US, spinUsFor } from '../src/cuda/daemon/server.js';
import { koffiModule } from '../src/cuda/daemon/driver/cuda.js';
import { buildGlibcRootfs } from '../test/helpers/glibc-rootfs.js';

const execFileAsync = promisify(execFile);

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const build = path.join(root, 'build');
const quick = process.argv.includes('--quick') || process.env.BENCH_QUICK === '1';
// --libcuda PATH benchmarks a real driver (on a GPU machine) instead of the FAKE one.
const libArg = process.argv.indexOf('--libcuda');
const driverPath = libArg > 0 ? process.argv[libArg + 1] : path.join(build, 'fake-cuda/libcuda.so.1');
const MiB = 1024 * 1024;

for (const dir of ['shims/cuda', 'test/fixtures/fake-cuda', 'test/fixtures/cuda-programs']) execFileSync('make', ['-s', '-C', path.join(root, dir), `OUT=${build}`]);

type F = (...a: unknown[]) => number;
interface Api { cuInit: F; cuCtxCreate: F; cuCtxGetDevice: F; cuCtxSynchronize: F; cuModuleLoadData: F; cuModuleGetFunction: F; cuLaunchKernel: F; cuMemAlloc: F; cuMemcpyHtoD: F; cuMemcpyDtoH: F; cuMemFree: F }
function bind(lib: string): Api {
  const k = koffiModule().load(lib);
  return {
    cuInit: k.func('int cuInit(unsigned int)'),
    cuCtxCreate: k.func('int cuCtxCreate_v2(_Out_ uint64_t *c, unsigned int f, int d)'),
    cuCtxGetDevice: k.func('int cuCtxGetDevice(_Out_ int *d)'),
    cuCtxSynchronize: k.func('int cuCtxSynchronize()'),
    cuModuleLoadData: k.func('int cuModuleLoadData(_Out_ uint64_t *m, const void *img)'),
    cuModuleGetFunction: k.func('int cuModuleGetFunction(_Out_ uint64_t *f, uint64_t m, const char *n)'),
    cuLaunchKernel: k.func('int cuLaunchKernel(uint64_t f, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int, uint64_t s, void *p, void *e)'),
    cuMemAlloc: k.func('int cuMemAlloc_v2(_Out_ uint64_t *p, uint64_t n)'),
    cuMemcpyHtoD: k.func('int cuMemcpyHtoD_v2(uint64_t d, const void *h, uint64_t n)'),
    cuMemcpyDtoH: k.func('int cuMemcpyDtoH_v2(void *h, uint64_t d, uint64_t n)'),
    cuMemFree: k.func('int cuMemFree_v2(uint64_t p)'),
  };
}
const ok = (r: number, what: string) => { if (r !== 0) throw new Error(`${what} failed: CUresult ${r}`); };
const pct = (xs: number[], p: number) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.floor(p * s.length))]; };
const median = (xs: number[]) => pct(xs, 0.5);

interface Result { initMs: number; nullP50: number; nullP99: number; launchesPerS: number; htod: number; dtoh: number }
/** In a gated child: says it is connected, then waits for the parent's go (a line on stdin). */
function gate(): void {
  if (!process.env.BENCH_GATE) return;
  process.stdout.write('BENCH ready 1\n');
  const b = Buffer.alloc(1);
  while (fs.readSync(0, b, 0, 1, null) === 1 && b[0] !== 10) { /* until the newline */ }
}

function measure(api: Api): Result {
  const o = [0];
  const t0 = process.hrtime.bigint();
  ok(api.cuInit(0), 'cuInit');
  const initMs = Number(process.hrtime.bigint() - t0) / 1e6;
  ok(api.cuCtxCreate(o, 0, 0), 'cuCtxCreate');
  // PTX is a C string: the real driver reads to the NUL (without one it answered 218, INVALID_PTX, on an H200)
  ok(api.cuModuleLoadData(o, Buffer.concat([fs.readFileSync(path.join(build, 'cuda-programs/kernels.ptx')), Buffer.alloc(1)])), 'cuModuleLoadData');
  const mod = o[0];
  ok(api.cuModuleGetFunction(o, mod, 'null_kernel'), 'cuModuleGetFunction');
  const fn = o[0];
  gate();

  const lat: number[] = [];
  const nNull = quick ? 5000 : 50_000;
  for (let i = 0; i < nNull; i++) {
    const t = process.hrtime.bigint();
    api.cuCtxGetDevice(o);
    lat.push(Number(process.hrtime.bigint() - t) / 1000);
  }
  const rates: number[] = [];
  const nLaunch = quick ? 50_000 : 200_000;
  for (let rep = 0; rep < 3; rep++) {
    const t = process.hrtime.bigint();
    for (let i = 0; i < nLaunch; i++) api.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, 0, null, null);
    ok(api.cuCtxSynchronize(), 'cuCtxSynchronize');
    rates.push(nLaunch / (Number(process.hrtime.bigint() - t) / 1e9));
  }
  const size = (quick ? 64 : 256) * MiB;
  const host = Buffer.allocUnsafeSlow(size).fill(7);
  ok(api.cuMemAlloc(o, size), 'cuMemAlloc');
  const dptr = o[0];
  const up: number[] = [], down: number[] = [];
  for (let rep = 0; rep < 3; rep++) {
    let t = process.hrtime.bigint();
    ok(api.cuMemcpyHtoD(dptr, host, size), 'HtoD');
    ok(api.cuCtxSynchronize(), 'sync');
    up.push(size / 2 ** 30 / (Number(process.hrtime.bigint() - t) / 1e9));
    t = process.hrtime.bigint();
    ok(api.cuMemcpyDtoH(host, dptr, size), 'DtoH');
    down.push(size / 2 ** 30 / (Number(process.hrtime.bigint() - t) / 1e9));
  }
  api.cuMemFree(dptr);
  return { initMs, nullP50: pct(lat, 0.5), nullP99: pct(lat, 0.99), launchesPerS: median(rates), htod: median(up), dtoh: median(down) };
}

async function main() {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-bench-cuda-'));
  const daemon = await startGpuDaemon({ listen: `unix:${path.join(dir, 'cuda.sock')}`, libcuda: driverPath });
  try {
    const direct = measure(bind(driverPath));
    // the shim's calls block the thread that makes them, and a session's admission is answered by the daemon's
    // event loop: the remoted side must run in a process of its own, as a guest's program does
    const stdout = await gated(daemon, process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), '--measure-remoted', ...(quick ? ['--quick'] : [])], {
      SMOL_CUDA_ENDPOINT: daemon.endpoint,
    });
    const remoted = JSON.parse(stdout.slice(stdout.indexOf('{'))) as Result;
    const rows: [string, number, number, string, string][] = [
      ['cuInit (remoted: connect + handshake + session start), ms', direct.initMs, remoted.initMs, 'lower', ''],
      ['sync null call p50 (cuCtxGetDevice), µs', direct.nullP50, remoted.nullP50, 'lower', '≤ 20'],
      ['sync null call p99, µs', direct.nullP99, remoted.nullP99, 'lower', '≤ 100'],
      ['fire-and-forget launches/s', direct.launchesPerS, remoted.launchesPerS, 'higher', '≥ 200000'],
      [`HtoD ${quick ? 64 : 256} MiB, GiB/s`, direct.htod, remoted.htod, 'higher', '≥ 1'],
      [`DtoH ${quick ? 64 : 256} MiB, GiB/s`, direct.dtoh, remoted.dtoh, 'higher', '≥ 1'],
    ];
    const fmt = (n: number) => (n >= 1000 ? Math.round(n).toString() : n.toFixed(2));
    console.log(`CUDA remoting (${libArg > 0 ? driverPath : 'FAKE driver'}, unix socket, ${os.cpus().length} cpus, spin-before-block ${spinUsFor()} µs; medians of runs)`);
    console.log(['metric'.padEnd(58), 'direct'.padStart(12), 'remoted'.padStart(12), 'remoted/direct'.padStart(15), 'target'.padStart(10)].join(''));
    for (const [name, a, b, , target] of rows) {
      console.log([name.padEnd(58), fmt(a).padStart(12), fmt(b).padStart(12), (b / a).toFixed(2).padStart(15), target.padStart(10)].join(''));
    }
    await spinRows(dir);
    await programRows(daemon, dir);
    console.log(`load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')} (other work on this machine skews these numbers)`);
  } finally {
    await daemon.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}
/**
 * Runs a client that says "BENCH ready" once connected and then waits for a line on stdin (BENCH_GATE), and lets
 * it measure only once the daemon's new spare session process is up: that start (a Node process loading the
 * driver) otherwise runs during the measurement and takes CPU from it. Its stdout.
 */
function gated(daemon: GpuDaemon, file: string, args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { env: { ...process.env, ...env, BENCH_GATE: '1' }, stdio: ['pipe', 'pipe', 'inherit'] });
    let out = '', released = false;
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (released || !out.includes('BENCH ready')) return;
      released = true;
      const until = Date.now() + 30_000;
      const poll = () => { if (daemon.status().spareReady || Date.now() > until) child.stdin.end('\n'); else setTimeout(poll, 20); };
      poll();
    });
    child.on('error', reject);
    child.on('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`${path.basename(file)} exited ${code}`))));
  });
}

/**
 * Spin-before-block off and on, side by side: two daemons (sessions polling 0 and S µs for the next frame) and
 * clients with SMOL_CUDA_SPIN_US 0 and S, alternated round by round (off-on, on-off, ...) so drift in the
 * machine's load falls on both. S is $SMOL_CUDA_SPIN_US when set above 0, else the default. Each run is one
 * process making only sync null calls, released when the daemon's new spare has started.
 */
async function spinRows(dir: string): Promise<void> {
  const envSpin = Number(process.env.SMOL_CUDA_SPIN_US);
  const on = envSpin > 0 ? Math.min(envSpin, 10_000) : DEFAULT_SPIN_US;
  const roundsArg = process.argv.indexOf('--spin-rounds');
  const rounds = roundsArg > 0 ? Number(process.argv[roundsArg + 1]) : quick ? 3 : 4;
  const calls = quick ? 5000 : 20_000;
  const modes = [0, on];
  const daemons = await Promise.all(modes.map((spinUs) => startGpuDaemon({ listen: `unix:${path.join(dir, `spin-${spinUs}.sock`)}`, libcuda: driverPath, spinUs })));
  const prog = path.join(build, 'cuda-programs', 'driver_bench');
  const ptx = path.join(build, 'cuda-programs', 'kernels.ptx');
  type Row = { p50: number[]; p99: number[] };
  const res = { ts: modes.map((): Row => ({ p50: [], p99: [] })), c: modes.map((): Row => ({ p50: [], p99: [] })) };
  try {
    for (let r = 0; r < rounds; r++) {
      for (const m of r % 2 ? [1, 0] : [0, 1]) {
        const env = { SMOL_CUDA_ENDPOINT: daemons[m].endpoint, SMOL_CUDA_SPIN_US: String(modes[m]) };
        const ts = JSON.parse((await gated(daemons[m], process.execPath, [...process.execArgv, fileURLToPath(import.meta.url), '--measure-null', String(calls)], env)).split('\n').find((l) => l.startsWith('{'))!) as { p50: number; p99: number };
        res.ts[m].p50.push(ts.p50); res.ts[m].p99.push(ts.p99);
        const c = parseBench(await gated(daemons[m], prog, [ptx, '0', String(calls), '0'], { ...env, LD_LIBRARY_PATH: build }));
        res.c[m].p50.push(c.null_p50_us); res.c[m].p99.push(c.null_p99_us);
      }
    }
  } finally {
    await Promise.all(daemons.map((d) => d.close()));
  }
  const mid = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b), h = s.length >> 1; return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2; };
  const f = (xs: number[]) => `${mid(xs).toFixed(1)} [${Math.min(...xs).toFixed(1)}–${Math.max(...xs).toFixed(1)}]`.padStart(24);
  console.log(`\nsync null call, spin-before-block off vs on (${on} µs, shim and session), ${rounds} interleaved rounds of ${calls} calls; µs, median [min–max] over rounds`);
  console.log(['client'.padEnd(18), 'p50 off'.padStart(24), 'p50 on'.padStart(24), 'p99 off'.padStart(24), 'p99 on'.padStart(24)].join(''));
  for (const [name, row] of [['TS (koffi)', res.ts], ['C (driver_bench)', res.c]] as const) {
    console.log([name.padEnd(18), f(row[0].p50), f(row[1].p50), f(row[0].p99), f(row[1].p99)].join(''));
  }
}

/** The remoted client of spinRows: sync null calls only. */
function measureNull(n: number): { p50: number; p99: number } {
  const api = bind(path.join(build, 'libcuda.so.1'));
  const o = [0];
  ok(api.cuInit(0), 'cuInit');
  ok(api.cuCtxCreate(o, 0, 0), 'cuCtxCreate');
  gate();
  for (let i = 0; i < 200; i++) api.cuCtxGetDevice(o);
  const lat = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const t = process.hrtime.bigint();
    api.cuCtxGetDevice(o);
    lat[i] = Number(process.hrtime.bigint() - t) / 1000;
  }
  const xs = [...lat];
  return { p50: pct(xs, 0.5), p99: pct(xs, 0.99) };
}

/** `BENCH name value` lines of test/fixtures/cuda-programs/driver_bench, as numbers. */
async function runProgram(file: string, args: string[], env: NodeJS.ProcessEnv): Promise<Record<string, number>> {
  const { stdout } = await execFileAsync(file, args, { env: { ...process.env, ...env }, maxBuffer: 1 << 20 });
  return parseBench(stdout);
}
const parseBench = (stdout: string): Record<string, number> => Object.fromEntries([...stdout.matchAll(/^BENCH (\S+) (\S+)/gm)].map((m) => [m[1], Number(m[2])]));

/**
 * The same measurements from inside a C program: against the FAKE driver directly, through the shim to the
 * daemon on this host, and through the shim inside a microVM (guest socket -> agent -> virtio-serial -> smol
 * -> daemon). The VM row needs the guest kernel and images `smol` uses (installed by scripts/setup.sh).
 */
async function programRows(daemon: GpuDaemon, dir: string): Promise<void> {
  const progs = path.join(build, 'cuda-programs');
  const ptx = path.join(progs, 'kernels.ptx');
  const prog = path.join(progs, 'driver_bench');
  const [mib, calls, launches] = quick ? ['16', '500', '5000'] : ['64', '2000', '20000'];
  const direct = await runProgram(prog, [ptx, mib, calls, launches], { LD_LIBRARY_PATH: path.dirname(driverPath) });
  const shim = parseBench(await gated(daemon, prog, [ptx, mib, calls, launches], { LD_LIBRARY_PATH: build, SMOL_CUDA_ENDPOINT: daemon.endpoint }));
  const assets = assetsHome();
  let vm: Record<string, number> | null = null;
  let why = '';
  if (libArg > 0) why = 'not with --libcuda';
  else if (!fs.existsSync(path.join(assets, 'kernel'))) why = `no guest kernel in ${assets} (run bash scripts/setup.sh)`;
  else {
    const rootfs = path.join(dir, 'rootfs');
    await buildGlibcRootfs(rootfs, [prog], [ptx]);
    // smaller counts: every call crosses the emulated machine
    const env = { SMOL_HOME: path.join(dir, 'home'), SMOL_ASSETS: assets, SMOL_LIBCUDA: driverPath };
    try {
      vm = await runProgram(process.execPath, [path.join(root, 'bin', 'smol'), 'run', '--gpu', '--image', rootfs, '--', '/opt/bin/driver_bench', '/opt/bin/kernels.ptx', '16', '500', '2000'], env);
    } finally {
      // the image built from the temp rootfs would otherwise stay in the user's assets, one per bench run
      await execFileAsync(process.execPath, [path.join(root, 'bin', 'smol'), 'image', 'rm', rootfs], { env: { ...process.env, ...env } }).catch(() => undefined);
    }
  }
  const metrics: [string, string, string][] = [
    ['null_p50_us', 'sync null call p50, µs', '≤ 20'], ['null_p99_us', 'sync null call p99, µs', '≤ 100'],
    ['launches_per_s', 'fire-and-forget launches/s', '≥ 200000'], ['htod_gib_s', 'HtoD GiB/s', '≥ 1'], ['dtoh_gib_s', 'DtoH GiB/s', '≥ 1'],
  ];
  console.log(`\nfrom a C program (driver_bench): direct FAKE driver | shim -> unix socket -> daemon | shim inside a microVM (TCG)${vm ? '' : ` [VM: skipped, ${why}]`}`);
  console.log(['metric'.padEnd(34), 'direct'.padStart(12), 'host shim'.padStart(12), 'in VM'.padStart(12), 'VM/host shim'.padStart(14), 'target'.padStart(10)].join(''));
  const fmt = (n: number | undefined) => (n === undefined ? '-' : n >= 1000 ? Math.round(n).toString() : n.toFixed(2));
  for (const [k, name, target] of metrics) {
    console.log([name.padEnd(34), fmt(direct[k]).padStart(12), fmt(shim[k]).padStart(12), fmt(vm?.[k]).padStart(12), (vm ? (vm[k] / shim[k]).toFixed(2) : '-').padStart(14), target.padStart(10)].join(''));
  }
}

const nullArg = process.argv.indexOf('--measure-null');
if (process.argv.includes('--measure-remoted')) process.stdout.write(JSON.stringify(measure(bind(path.join(build, 'libcuda.so.1')))));
else if (nullArg > 0) process.stdout.write(JSON.stringify(measureNull(Number(process.argv[nullArg + 1]))) + '\n');
else main().catch((err) => { console.error(err); process.exit(1); });
