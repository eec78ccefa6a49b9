/**
 * `npm run bench:cloud`: the cloud plane of issue 28 on one throwaway PostgreSQL server (test/helpers/postgres.ts):
 *  - attempts/min with 1, 2 and 4 real `smol worker` processes on one PostgreSQL ledger, each with its own
 *    SMOL_HOME (as separate hosts: nothing shared but the database), for a process stage that waits 200 ms
 *    (`sleep 0.2`: I/O-bound, so the host's cores are not the limit); a manifest of N items submitted with
 *    `smol rollout submit`; ratios against 1 worker side by side. The worker counts run interleaved, a
 *    fresh database and fresh workers each time, so load from others falls on all alike.
 *  - blob put/get MiB/s through the PostgreSQL blob store, against psql's `\copy` (binary format, timed by
 *    psql's own \timing, so psql's start-up is not charged to it) of the same bytes into and out of a
 *    bytea table on the same server.
 * The clock of a worker run starts at the first claim and stops at the Nth completion: the workers'
 * start-up (node, the CLI's modules) is not in it. Workers run with a fixed --concurrency.
 * BENCH_RUNS (default 3; quick 1) runs per figure; BENCH_CONCURRENCY (default 1) attempts at once per worker;
 * BENCH_ROUNDS (default 40; quick 3) items per attempt slot, so a run lasts ~ROUNDS × 0.2 s at any worker count.
 * BENCH_ONLY=workers or blobs runs one of the two sections.
 * Children: this file re-executed with `--smol ARGS` runs the CLI (src/cli/main.ts) with ARGS.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { openLedger } from '../src/ledger/open.js';
import { findPgBin, pgUnavailableReason, startPostgres, type PgServer } from '../test/helpers/postgres.js';
import { quickMode } from './env.js';
import { median, printRows, type Row } from './stats.js';

const self = fileURLToPath(import.meta.url);
const RUNS = Number(process.env.BENCH_RUNS ?? (quickMode ? 1 : 3));
/**
 * One attempt at a time per worker by default: every simulated host shares this machine's cores, and an
 * attempt costs ~50 ms of CPU here (mostly the stage's spawn), so 4 workers × 2 slots would need ~2 cores
 * and measure the machine, not the ledger; BENCH_CONCURRENCY=2 shows that case.
 */
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 1);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (quickMode ? 3 : 40));
const WORKERS = quickMode ? [1, 2] : [1, 2, 4];
/** BENCH_ONLY=workers or BENCH_ONLY=blobs: one section. */
const ONLY = process.env.BENCH_ONLY ?? 'workers,blobs';
const MiB = 1024 * 1024;
const BLOB_SIZES = quickMode ? [64 * 1024, MiB] : [MiB, 64 * MiB];
/** A run that sees no worker event for this long is stuck: fail with the workers' stderr instead of hanging. */
const STALL_MS = 60_000;
const tmps: string[] = [];
const tmp = (tag: string) => { const d = fs.mkdtempSync(path.join(os.tmpdir(), `smol-bench-cloud-${tag}-`)); tmps.push(d); return d; };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A CLI process from this source tree: `smol ARGS` with its own SMOL_HOME (a host of its own). */
function smol(args: string[], home: string): ChildProcess {
  const env: NodeJS.ProcessEnv = { ...process.env, SMOL_HOME: home };
  delete env.SMOL_LEDGER;
  delete env.SMOL_BLOBS;
  const c = spawn(process.execPath, ['--import', 'tsx', self, '--smol', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(c);
  c.once('exit', () => children.delete(c));
  return c;
}
/** The CLI processes still running, for an interrupted bench to end before it stops the server. */
const children = new Set<ChildProcess>();

const exited = (c: ChildProcess) => new Promise<number | null>((resolve) => { if (c.exitCode !== null) resolve(c.exitCode); else c.once('exit', (code) => resolve(code)); });

/** utime + stime of a process in ms (/proc/PID/stat), with its reaped children's when `children`. */
function cpuMs(pid: number, children = false): number {
  try {
    const st = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = st.slice(st.lastIndexOf(')') + 2).split(' ');
    // fields 14..17 of stat (utime stime cutime cstime), counted after the command name
    const [u, s, cu, cs] = [11, 12, 13, 14].map((i) => Number(f[i]));
    return ((u + s + (children ? cu + cs : 0)) * 1000) / 100;
  } catch {
    return 0; // gone
  }
}

/** The PostgreSQL server's CPU so far: the postmaster, its live backends, and the backends it has reaped. */
function serverCpuMs(postmaster: number): number {
  let total = cpuMs(postmaster, true);
  for (const p of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(p)) continue;
    try {
      const st = fs.readFileSync(`/proc/${p}/stat`, 'utf8');
      if (Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]) === postmaster) total += cpuMs(Number(p));
    } catch { /* exited meanwhile */ }
  }
  return total;
}

interface WorkerRun { perMin: number; workerCpuMs: number; serverCpuMs: number; cores: number; inAttemptMs: number; slotMs: number; pingMs: number; shares: number[]; attempts: number }

async function workerRun(server: PgServer, admin: pg.Client, postmaster: number, n: number, run: number): Promise<WorkerRun> {
  const db = `workers_${n}_${run}`;
  await admin.query(`CREATE DATABASE ${db}`);
  const url = server.url(db);
  // the schema first, from "host A", so the workers do not all migrate an empty database at once
  await (await openLedger(url, { ...process.env, SMOL_HOME: tmp('a') })).ledger.close();
  const items = n * CONCURRENCY * ROUNDS;
  const manifest = path.join(tmp('m'), 'manifest.yaml');
  fs.writeFileSync(manifest, `apiVersion: smol/v1\nkind: Rollout\nname: cloud-${n}-${run}\nenvironment: { version: e1 }\ndefaults: { maxAttempts: 1, timeout: 60s }\n`
    + `generate: { count: ${items}, template: "x{i}" }\nstages:\n  - name: wait\n    kind: cpu\n    command: ["sleep", "0.2"]\n`);

  const workers = Array.from({ length: n }, () => smol(['worker', '--ledger', `${url}?application_name=bench-worker`, '--kind', 'cpu', '--concurrency', String(CONCURRENCY), '--json'], tmp('w')));
  const stderr = workers.map(() => '');
  const done = workers.map(() => 0);
  let claims = 0, completed = 0, failed = 0, last = Date.now();
  let t0 = 0, t1 = 0;
  let cpu0: number[] = [], server0 = 0;
  const claimedAt = new Map<number, number>();
  const inAttempt: number[] = [];
  const pings: number[] = [];
  let probe: Promise<void> = Promise.resolve();
  let stopProbe = false;
  let finish: () => void = () => undefined;
  const finished = new Promise<void>((r) => { finish = r; });
  workers.forEach((w, i) => {
    let buf = '';
    w.stderr!.on('data', (d: Buffer) => { stderr[i] = (stderr[i] + d.toString()).slice(-4000); });
    w.stdout!.on('data', (d: Buffer) => {
      buf += d.toString();
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const e = JSON.parse(buf.slice(0, nl)) as { type: string; error?: string; itemId: number };
        buf = buf.slice(nl + 1);
        last = Date.now();
        if (e.type === 'claimed') claimedAt.set(e.itemId, performance.now());
        if (e.type === 'completed') inAttempt.push(performance.now() - claimedAt.get(e.itemId)!);
        if (e.type === 'claimed' && claims++ === 0) {
          t0 = performance.now();
          cpu0 = workers.map((x) => cpuMs(x.pid!));
          server0 = serverCpuMs(postmaster);
        }
        if (e.type === 'failed') { failed++; if (failed < 3) console.error(`bench: worker ${i}: ${e.error}`); }
        if (e.type === 'completed') { done[i]++; if (++completed === items) { t1 = performance.now(); finish(); } }
      }
    });
  });
  const fail = (why: string) => new Error(`${why}\n${stderr.map((s, i) => `worker ${i} stderr:\n${s}`).join('\n')}`);
  try {
    // ready: every worker has connected and is polling an empty queue (its pool keeps the connection)
    const readyBy = Date.now() + STALL_MS;
    for (;;) {
      const { rows } = await admin.query("SELECT count(DISTINCT client_port) AS c FROM pg_stat_activity WHERE datname = $1 AND application_name = 'bench-worker'", [db]);
      if (Number(rows[0].c) >= n) break;
      if (workers.some((w) => w.exitCode !== null)) throw fail('a worker exited before the run');
      if (Date.now() > readyBy) throw fail(`workers not connected after ${STALL_MS / 1000} s`);
      await sleep(100);
    }
    const submit = smol(['rollout', 'submit', manifest, '--ledger', url], tmp('a'));
    let out = '';
    submit.stderr!.on('data', (d: Buffer) => { out += d.toString(); });
    if ((await exited(submit)) !== 0) throw new Error(`smol rollout submit failed: ${out}`);
    last = Date.now();
    // how long a trivial round trip to the server takes meanwhile: the host's scheduling delay, seen from outside
    probe = (async () => {
      while (completed + failed < items && !stopProbe) {
        const t = performance.now();
        await admin.query('SELECT 1');
        if (claims > 0) pings.push(performance.now() - t);
        await sleep(50);
      }
    })();
    while (completed + failed < items) {
      await Promise.race([finished, sleep(500)]);
      if (Date.now() - last > STALL_MS) throw fail(`stalled at ${completed} of ${items} completed`);
      if (workers.some((w) => w.exitCode !== null)) throw fail('a worker exited mid-run');
    }
    if (failed) throw fail(`${failed} of ${items} attempts failed`);
  } finally {
    stopProbe = true;
    await probe;
    for (const w of workers) w.kill('SIGTERM');
  }
  const workerCpu = workers.reduce((a, w, i) => a + cpuMs(w.pid!) - cpu0[i], 0);
  const serverCpu = serverCpuMs(postmaster) - server0;
  await Promise.all(workers.map(exited));
  return { perMin: (items / ((t1 - t0) / 1000)) * 60, workerCpuMs: workerCpu / items, serverCpuMs: serverCpu / items, cores: (workerCpu + serverCpu) / (t1 - t0),
    inAttemptMs: median(inAttempt), slotMs: ((t1 - t0) * n * CONCURRENCY) / items, pingMs: median(pings), shares: done, attempts: items };
}

/** One psql session: TRUNCATE, then the two \copy commands timed by psql (ms each). */
function psqlCopy(url: string, inFile: string, outFile: string): { inMs: number; outMs: number } {
  const bin = findPgBin();
  const psql = bin && fs.existsSync(path.join(bin, 'psql')) ? path.join(bin, 'psql') : 'psql';
  const script = `TRUNCATE copy_baseline;\n\\timing on\n\\copy copy_baseline(data) from '${inFile}' with (format binary)\n\\copy (SELECT data FROM copy_baseline) to '${outFile}' with (format binary)\n`;
  const out = execFileSync(psql, [url, '-X', '-q', '-v', 'ON_ERROR_STOP=1'], { input: script, encoding: 'utf8' });
  const times = [...out.matchAll(/Time: ([\d.]+) ms/g)].map((m) => Number(m[1]));
  if (times.length !== 2) throw new Error(`psql printed no timings for its \\copy commands: ${out}`);
  return { inMs: times[0], outMs: times[1] };
}

/** PostgreSQL's binary COPY file of one row holding `data` as its one bytea field. */
function copyFile(file: string, data: Buffer): void {
  const head = Buffer.alloc(19 + 6);
  Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1').copy(head, 0); // signature; flags and extension length stay 0
  head.writeInt16BE(1, 19); // fields in the tuple
  head.writeInt32BE(data.length, 21);
  const trailer = Buffer.alloc(2);
  trailer.writeInt16BE(-1);
  fs.writeFileSync(file, Buffer.concat([head, data, trailer]));
}

async function blobRows(server: PgServer, admin: pg.Client): Promise<Row[]> {
  await admin.query('CREATE DATABASE blobs');
  const url = server.url('blobs');
  const { ledger, blobs } = await openLedger(url, { ...process.env, SMOL_HOME: tmp('blobs') });
  const dir = tmp('copy');
  const rows: Row[] = [];
  try {
    if (blobs.kind !== 'postgres') throw new Error(`a PostgreSQL ledger opened a ${blobs.kind} blob store`);
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    await c.query('CREATE TABLE copy_baseline (data bytea NOT NULL)');
    await c.end();
    for (const size of BLOB_SIZES) {
      const r = { put: [] as number[], get: [] as number[], copyIn: [] as number[], copyOut: [] as number[] };
      const mibs = (ms: number) => size / MiB / (ms / 1000);
      // one warm-up round each (connections, caches), then the measured runs; fresh bytes every time
      for (let i = -1; i < RUNS; i++) {
        const data = randomBytes(size);
        let t = performance.now();
        const digest = await blobs.put(data);
        const putMs = performance.now() - t;
        t = performance.now();
        const back = await blobs.get(digest);
        const getMs = performance.now() - t;
        if (!back.equals(data)) throw new Error(`blob ${digest} read back different bytes`);
        const inFile = path.join(dir, 'in.copy');
        const outFile = path.join(dir, 'out.copy');
        copyFile(inFile, data);
        const cp = psqlCopy(url, inFile, outFile);
        if (!fs.readFileSync(outFile).equals(fs.readFileSync(inFile))) throw new Error('psql \\copy read back different bytes');
        if (i < 0) continue;
        r.put.push(mibs(putMs));
        r.get.push(mibs(getMs));
        r.copyIn.push(mibs(cp.inMs));
        r.copyOut.push(mibs(cp.outMs));
      }
      const label = size >= MiB ? `${size / MiB} MiB` : `${size / 1024} KiB`;
      rows.push({ metric: `blob put, ${label}, PostgreSQL blob store`, unit: 'MiB/s', value: median(r.put), baseline: median(r.copyIn), baselineLabel: 'psql \\copy in', target: '≥ 0.5x' });
      rows.push({ metric: `blob get, ${label}, PostgreSQL blob store (verified)`, unit: 'MiB/s', value: median(r.get), baseline: median(r.copyOut), baselineLabel: 'psql \\copy out', target: '≥ 0.5x' });
    }
  } finally {
    await ledger.close();
  }
  return rows;
}

async function main(): Promise<void> {
  const missing = pgUnavailableReason() ?? (findPgBin() && (fs.existsSync(path.join(findPgBin()!, 'psql')) || hasOnPath('psql')) ? null : 'psql not installed');
  if (missing) {
    const how = 'Install PostgreSQL (Debian: apt-get install postgresql postgresql-client) or put initdb, pg_ctl and psql on PATH.';
    if (quickMode) { console.log(`bench:cloud skipped: ${missing}. ${how}`); return; }
    console.error(`bench:cloud needs a PostgreSQL server to start: ${missing}. ${how}`);
    process.exitCode = 69;
    return;
  }
  // before the server starts, so an interrupt in its start-up does not leave it running
  let started: PgServer | undefined;
  const stop = () => {
    for (const c of children) c.kill('SIGKILL');
    started?.stop();
    process.exit(130);
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  const server = started = await startPostgres();
  const admin = new pg.Client({ connectionString: server.url() });
  await admin.connect();
  try {
    const load0 = os.loadavg();
    const backend = Number((await admin.query('SELECT pg_backend_pid() AS p')).rows[0].p);
    const st = fs.readFileSync(`/proc/${backend}/stat`, 'utf8');
    const postmaster = Number(st.slice(st.lastIndexOf(')') + 2).split(' ')[1]);

    const runs = new Map<number, WorkerRun[]>(WORKERS.map((n) => [n, []]));
    const loads: number[] = [];
    for (let run = 0; ONLY.includes('workers') && run < RUNS; run++) {
      for (const n of WORKERS) runs.get(n)!.push(await workerRun(server, admin, postmaster, n, run));
      loads.push(os.loadavg()[0]);
    }
    const rate = (n: number) => median(runs.get(n)!.map((r) => r.perMin));
    const measured = WORKERS.filter((n) => runs.get(n)!.length);
    const rows: Row[] = measured.map((n) => ({
      metric: `attempts/min, ${n} worker process${n > 1 ? 'es' : ''} (sleep 0.2, concurrency ${CONCURRENCY} each)`,
      unit: '/min', value: rate(n), ...(n > 1 ? { baseline: rate(1), baselineLabel: '1 worker' } : {}), target: n === 4 ? '≥ 3.5x' : n === 1 ? `≤ ${((CONCURRENCY * 60) / 0.2).toFixed(0)} (ideal)` : undefined,
    }));
    for (const n of measured) {
      const ms = (f: (r: WorkerRun) => number) => median(runs.get(n)!.map(f));
      rows.push({ metric: `  ${n} worker${n > 1 ? 's' : ''}: an attempt slot's time per attempt`, unit: 'ms', value: ms((r) => r.slotMs), target: '200 (ideal)' });
      rows.push({ metric: `  ${n} worker${n > 1 ? 's' : ''}: of which claimed → completed (sleep 200 ms, output, complete)`, unit: 'ms', value: ms((r) => r.inAttemptMs) });
      rows.push({ metric: `  ${n} worker${n > 1 ? 's' : ''}: a SELECT 1 round trip meanwhile (from this process)`, unit: 'ms', value: ms((r) => r.pingMs) });
      rows.push({ metric: `  ${n} worker${n > 1 ? 's' : ''}: CPU per attempt, the worker processes`, unit: 'ms', value: median(runs.get(n)!.map((r) => r.workerCpuMs)) });
      rows.push({ metric: `  ${n} worker${n > 1 ? 's' : ''}: CPU per attempt, the PostgreSQL server`, unit: 'ms', value: median(runs.get(n)!.map((r) => r.serverCpuMs)) });
      rows.push({ metric: `  ${n} worker${n > 1 ? 's' : ''}: cores busy with both (the sleeps not counted)`, unit: 'cores', value: median(runs.get(n)!.map((r) => r.cores)) });
    }
    if (ONLY.includes('blobs')) rows.push(...(await blobRows(server, admin)));
    printRows(`cloud plane on one PostgreSQL (${RUNS} run${RUNS > 1 ? 's' : ''} for medians, ${os.availableParallelism()} CPUs)`, rows);
    const last = measured.at(-1);
    if (last) console.log(`completions per worker, last run of ${last}: ${runs.get(last)!.at(-1)!.shares.join(' ')} (of ${runs.get(last)!.at(-1)!.attempts})`);
    const load1 = os.loadavg();
    console.log(`load average before ${load0.map((x) => x.toFixed(1)).join(' ')}, after ${load1.map((x) => x.toFixed(1)).join(' ')}; 1-min load after each round: ${loads.map((x) => x.toFixed(1)).join(' ')}`);
  } finally {
    await admin.end().catch(() => undefined);
    server.stop();
  }
}

function hasOnPath(cmd: string): boolean {
  return (process.env.PATH ?? '').split(':').some((d) => d && fs.existsSync(path.join(d, cmd)));
}

if (process.argv[2] === '--smol') {
  const { main: cli } = await import('../src/cli/main.js');
  process.exitCode = await cli([process.argv[0], 'smol', ...process.argv.slice(3)]);
} else {
  await main().catch((err: unknown) => {
    console.error(err);
    process.exitCode = 1;
  }).finally(() => {
    for (const d of tmps) fs.rmSync(d, { recursive: true, force: true });
  });
}
