/**
 * `npm run bench:ledger`: the ledger and gateway figures from issue 4, each beside a baseline, medians of
 * several runs. Worker processes are real processes (this file re-executed with --child).
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'better-sqlite3';
import { BlobStore } from '../src/ledger/blobs.js';
import { SqliteLedger } from '../src/ledger/sqlite.js';
import type { NewItem } from '../src/ledger/types.js';
import { GatewayService } from '../src/rollout/gateway/service.js';
import { startGatewayServer } from '../src/rollout/gateway/server.js';
import { OpenAiCompletionsUpstream } from '../src/rollout/gateway/upstream.js';

const self = fileURLToPath(import.meta.url);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
/** BENCH_QUICK=1: a tenth of every count and duration, to check the bench works (scripts/bench.sh --quick). */
const Q = process.env.BENCH_QUICK === '1' ? 10 : 1;
/** Claimer processes in the latency runs: in a quick run 2 still contend for the lock, at a quarter of the tsx starts. */
const LATENCY_PROCS = Q === 1 ? 8 : 2;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const pct = (xs: number[], p: number) => { const s = [...xs].sort((a, b) => a - b); return s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)] ?? 0; };
const tmps: string[] = [];
const tmp = () => { const d = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-bench-')); tmps.push(d); return d; };
const fmt = (n: number, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });

function item(i: number, rollout = 'b'): NewItem {
  return { rolloutId: rollout, stage: 's', stageIndex: 0, kind: 'cpu', sampleId: `s${i}`, inputRef: 'sha256:' + '0'.repeat(64), inputVersion: 'v', envVersion: 'e', idempotencyKey: `${rollout}/s${i}`, maxAttempts: 3, timeoutMs: 60_000, backoffMs: 1000, deadlineAt: null };
}
function freshLedger(dir: string, opts: { sqliteBusyTimeoutMs?: number } = {}): SqliteLedger {
  const l = new SqliteLedger({ path: path.join(dir, 'l.db'), ...opts });
  l.db.prepare("INSERT OR IGNORE INTO manifests VALUES ('m', 'x', 0)").run();
  l.db.prepare("INSERT OR IGNORE INTO rollouts (id, name, manifest_digest, env_version, gpus, created_at) VALUES ('b', 'b', 'm', 'e', 1, 0)").run();
  return l;
}
function row(name: string, base: string, ours: string, ratio: string, target: string): void {
  process.stdout.write(`${name.padEnd(44)} ${base.padStart(22)} ${ours.padStart(22)} ${ratio.padStart(8)}   ${target}\n`);
}

// ---- child processes ------------------------------------------------------------------------------
interface ChildReport { done: number; claimMs: number[] }
/** Claims of kind 'gpu' each steady child makes before the clock starts (JIT, caches): the latency runs queue 'cpu' items. */
const WARM_UP = 20;
async function child(mode: string, db: string, batch: number, busyTimeout: number, lockQueue: 'fifo' | 'poll', steady: boolean): Promise<void> {
  const l = new SqliteLedger({ path: db, sqliteBusyTimeoutMs: busyTimeout, lockQueue });
  const claimMs: number[] = [];
  let done = 0;
  // what `smol worker` does as it starts; the write queue's thread joins at open
  l.prepareWrites();
  const q = l.tx.startQueue();
  for (let i = 0; i < 200 && q && !q.ready; i++) await new Promise((r) => setTimeout(r, 10));
  for (let i = 0; steady && i < WARM_UP; i++) {
    for (const c of l.claimSync({ worker: `w${process.pid}`, leaseMs: 60_000, limit: 1, kind: 'gpu' })) l.completeSync({ itemId: c.item.id, token: c.token, outputRef: 'sha256:o' });
  }
  process.stdout.write('ready\n');
  while (!fs.existsSync(`${db}.go`)) await new Promise((r) => setTimeout(r, 2));
  for (;;) {
    const t0 = performance.now();
    const cs = l.claimSync({ worker: `w${process.pid}`, leaseMs: 60_000, limit: batch, kind: 'cpu' });
    claimMs.push(performance.now() - t0);
    if (cs.length === 0) break;
    if (mode === 'batched') l.completeManySync(cs.map((c) => ({ itemId: c.item.id, token: c.token, outputRef: 'sha256:o' })));
    else for (const c of cs) l.completeSync({ itemId: c.item.id, token: c.token, outputRef: 'sha256:o' });
    done += cs.length;
  }
  process.stdout.write(JSON.stringify({ done, claimMs } satisfies ChildReport) + '\n');
  // steady: stay open until every child has drained, so no process exits (and no queue server hands off) mid-run
  while (steady && !fs.existsSync(`${db}.close`)) await new Promise((r) => setTimeout(r, 2));
  await l.close();
}

/**
 * `steady`: each process warms up before the clock starts and stays open until all have finished, so the
 * figures are the steady state; otherwise cold processes start and exit together inside the measurement.
 */
async function runWorkers(n: number, items: number, mode: string, batch: number, busyTimeout: number, lockQueue: 'fifo' | 'poll' = 'fifo', steady = false): Promise<{ rate: number; claimMs: number[] }> {
  const dir = tmp();
  const db = path.join(dir, 'l.db');
  const l = freshLedger(dir);
  l.enqueueSync(Array.from({ length: items }, (_, i) => item(i)));
  if (steady) l.enqueueSync(Array.from({ length: n * WARM_UP }, (_, i) => ({ ...item(items + i), kind: 'gpu' as const })));
  await l.close();
  const children = Array.from({ length: n }, () => spawn(process.execPath, ['--import', 'tsx', self, '--child', mode, db, String(batch), String(busyTimeout), lockQueue, steady ? 'steady' : 'cold'], { stdio: ['ignore', 'pipe', 'inherit'] }));
  const outs = children.map(() => '');
  const lines = (i: number) => outs[i].split('\n').length - 1;
  const waiters: (() => void)[] = [];
  children.forEach((c, i) => c.stdout.on('data', (d: Buffer) => { outs[i] += d.toString(); waiters.forEach((w) => w()); }));
  const allLines = (k: number) => new Promise<void>((resolve) => { const w = () => { if (children.every((_, i) => lines(i) >= k)) resolve(); }; waiters.push(w); w(); });
  const exits = children.map((c) => new Promise<void>((resolve, reject) => c.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`child exited ${code}`))))));
  await Promise.race([allLines(1), Promise.all(exits)]);
  const t0 = performance.now();
  fs.writeFileSync(`${db}.go`, ''); // all start together
  await Promise.race([allLines(2), Promise.all(exits)]);
  // process start-up is excluded: the clock runs from the start signal to the last completion
  const secs = (performance.now() - t0) / 1000;
  fs.writeFileSync(`${db}.close`, '');
  await Promise.all(exits);
  const all = outs.map((o) => JSON.parse(o.split('\n')[1]) as ChildReport);
  const total = all.reduce((a, r) => a + r.done, 0);
  fs.rmSync(dir, { recursive: true, force: true });
  if (total !== items) throw new Error(`claimed ${total} of ${items}`);
  return { rate: total / secs, claimMs: all.flatMap((r) => r.claimMs) };
}

/**
 * The gateway's load generator, a process of its own (a gateway's clients are other processes): plain
 * node:http with keep-alive, `conc` requests in flight, N in all. Prints the request rate it saw.
 */
async function client(url: string, n: number, conc: number, tag: string): Promise<void> {
  const http = await import('node:http');
  const agent = new http.Agent({ keepAlive: true, maxSockets: conc });
  const u = new URL('/v1/infer', url);
  const post = (body: string) => new Promise<number>((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end(body);
  });
  let next = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: conc }, async () => {
    while (next < n) {
      const i = next++;
      const status = await post(JSON.stringify({
        apiVersion: 'v1', requestId: `q${i}`, rolloutId: 'r', idempotencyKey: `${tag}-${i}`, model: { name: 'm', version: '1' }, promptVersion: 'p', input: { text: `prompt ${i}` }, params: {}, deadline: Date.now() + 60_000,
      }));
      if (status !== 200) throw new Error(`gateway answered ${status}`);
    }
  }));
  process.stdout.write(JSON.stringify({ rate: n / ((performance.now() - t0) / 1000) }));
  agent.destroy();
}

// ---- sections -------------------------------------------------------------------------------------
function enqueue(): void {
  const base: number[] = [];
  const ours: number[] = [];
  for (let r = 0; r < RUNS; r++) {
    let dir = tmp();
    let l = freshLedger(dir);
    let t = performance.now();
    for (let i = 0; i < 5000 / Q; i++) l.enqueueSync([item(i)]);
    base.push(5000 / Q / ((performance.now() - t) / 1000));
    void l.close();
    dir = tmp();
    l = freshLedger(dir);
    const all = Array.from({ length: 200_000 / Q }, (_, i) => item(i));
    t = performance.now();
    for (let i = 0; i < all.length; i += 5000) l.enqueueSync(all.slice(i, i + 5000));
    ours.push(all.length / ((performance.now() - t) / 1000));
    void l.close();
  }
  row('enqueue (items/s)', `${fmt(median(base))} one/txn`, `${fmt(median(ours))} 5k/txn`, `${fmt(median(ours) / median(base), 1)}×`, 'target ≥ 100,000/s batched');
}

async function claimComplete(): Promise<void> {
  const base: number[] = [];
  const ours: number[] = [];
  for (let r = 0; r < RUNS; r++) {
    base.push((await runWorkers(4, 4000 / Q, 'single', 1, 5000)).rate);
    ours.push((await runWorkers(4, 40_000 / Q, 'batched', 64, 0)).rate);
  }
  row('claim+complete, 4 processes (items/s)', `${fmt(median(base))} 1/txn`, `${fmt(median(ours))} 64/txn`, `${fmt(median(ours) / median(base), 1)}×`, 'target ≥ 5,000/s');
}

/**
 * One claim per transaction (the worst case: the worker claims in batches), polling the lock vs queueing for
 * it: the steady state (warmed-up processes, none exiting mid-run), then the same with cold processes that
 * start and exit together inside the measurement.
 */
async function claimLatency(): Promise<void> {
  type Run = { p50: number; p99: number; max: number; rate: number };
  const runs: Record<string, Run[]> = {};
  for (let r = 0; r < RUNS; r++) {
    for (const steady of [true, false]) {
      for (const q of ['poll', 'fifo'] as const) {
        const x = await runWorkers(LATENCY_PROCS, 4000 / Q, 'single', 1, 0, q, steady);
        (runs[`${q}/${steady}`] ??= []).push({ p50: pct(x.claimMs, 0.5), p99: pct(x.claimMs, 0.99), max: Math.max(...x.claimMs), rate: x.rate });
      }
    }
  }
  const m = (q: string, k: keyof Run, steady = true) => median(runs[`${q}/${steady}`].map((x) => x[k]));
  const show = (q: string, steady = true) => `p99 ${m(q, 'p99', steady).toFixed(1)} max ${m(q, 'max', steady).toFixed(0)} ms`;
  row(`claim latency, ${LATENCY_PROCS} processes, 1/claim`, show('poll'), show('fifo'), '', 'target p99 ≤ 10 ms, max ≤ 100 ms');
  row('  p50; baseline polls, smol queues (FIFO)', `p50 ${m('poll', 'p50').toFixed(2)} ms`, `p50 ${m('fifo', 'p50').toFixed(2)} ms`, '', '');
  row('  claim+complete (items/s) in those runs', fmt(m('poll', 'rate')), fmt(m('fifo', 'rate')), `${fmt(m('fifo', 'rate') / m('poll', 'rate'), 1)}×`, '');
  row('  cold processes starting and exiting in it', show('poll', false), show('fifo', false), '', 'JIT warm-up, queue hand-off on exit');
}

function renewals(): void {
  const base: number[] = [];
  const ours: number[] = [];
  for (let r = 0; r < RUNS; r++) {
    const l = freshLedger(tmp());
    l.enqueueSync(Array.from({ length: 2000 }, (_, i) => item(i)));
    const leases = l.claimSync({ worker: 'w', leaseMs: 60_000, limit: 2000 }).map((c) => ({ itemId: c.item.id, token: c.token }));
    let t = performance.now();
    for (const x of leases) l.renewSync([x], 60_000);
    base.push(leases.length / ((performance.now() - t) / 1000));
    t = performance.now();
    for (let k = 0; k < 10; k++) for (let i = 0; i < leases.length; i += 200) l.renewSync(leases.slice(i, i + 200), 60_000);
    ours.push((10 * leases.length) / ((performance.now() - t) / 1000));
    void l.close();
  }
  row('lease renewals (renewals/s)', `${fmt(median(base))} one/txn`, `${fmt(median(ours))} 200/txn`, `${fmt(median(ours) / median(base), 1)}×`, 'target ≥ 10,000/s');
}

async function walGrowth(): Promise<void> {
  const measure = async (longReader: boolean): Promise<{ peak: number; after: number }> => {
    const dir = tmp();
    const file = path.join(dir, 'l.db');
    const l = freshLedger(dir);
    const reader = new Database(file, { readonly: true });
    if (longReader) { reader.exec('BEGIN'); reader.prepare('SELECT count(*) FROM items').get(); }
    let peak = 0;
    const wal = () => (fs.existsSync(`${file}-wal`) ? fs.statSync(`${file}-wal`).size : 0);
    const until = performance.now() + 4000 / Q;
    let i = 0;
    while (performance.now() < until) {
      l.enqueueSync(Array.from({ length: 500 }, () => item(i++)));
      const cs = l.claimSync({ worker: 'w', leaseMs: 60_000, limit: 500 });
      l.completeManySync(cs.map((c) => ({ itemId: c.item.id, token: c.token, outputRef: 'sha256:o' })));
      if (!longReader) l.stats(); // our reads: short statements, no pinned snapshot
      peak = Math.max(peak, wal());
    }
    if (longReader) reader.exec('COMMIT');
    reader.close();
    l.enqueueSync([item(i++)]); // a write after the reader lets the autocheckpoint reset and truncate
    l.checkpoint();
    const after = wal();
    void l.close();
    fs.rmSync(dir, { recursive: true, force: true });
    return { peak, after };
  };
  const b = await measure(true);
  const o = await measure(false);
  const mb = (n: number) => `${(n / 1048576).toFixed(1)} MB`;
  row(`WAL peak, ${4 / Q} s of writes (~MB)`, `${mb(b.peak)} long reader`, `${mb(o.peak)} ledger reads`, '', 'target ≤ 64 MB');
  row('  WAL after the reader ends + checkpoint', mb(b.after), mb(o.after), '', '');
}

/** The test upstream in its own process, as a model server would be; resolves with its URL and a stop(). */
async function upstreamProcess(): Promise<{ url: string; close: () => Promise<void> }> {
  const file = fileURLToPath(new URL('../test/fixtures/upstream/server.ts', import.meta.url));
  const c = spawn(process.execPath, ['--import', 'tsx', file, '--delay-ms', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const url = await new Promise<string>((resolve, reject) => {
    let o = '';
    c.stdout.on('data', (d: Buffer) => { o += d.toString(); if (o.includes('\n')) resolve(o.trim()); });
    c.on('exit', (code) => reject(new Error(`upstream exited ${code}`)));
  });
  return { url, close: () => new Promise<void>((resolve) => { c.once('exit', () => resolve()); c.kill('SIGTERM'); }) };
}

async function gateway(): Promise<void> {
  const up = await upstreamProcess();
  const once = async (maxBatch: number) => {
    const dir = tmp();
    const ledger = new SqliteLedger({ path: path.join(dir, 'l.db') });
    const blobs = new BlobStore(path.join(dir, 'blobs'));
    const svc = new GatewayService({ ledger, blobs, upstream: new OpenAiCompletionsUpstream(up.url), envVersion: 'bench', limits: { maxOutstanding: 4096, maxPerRollout: 4096 }, batch: { maxBatch, windowMs: 2 } });
    const srv = await startGatewayServer(svc, blobs, { host: '127.0.0.1', port: 0 });
    const N = 4000 / Q;
    const cpu0 = process.cpuUsage();
    const out = await new Promise<string>((resolve, reject) => {
      const c = spawn(process.execPath, ['--import', 'tsx', self, '--client', srv.url, String(N), '128', `k${maxBatch}-${Date.now()}`], { stdio: ['ignore', 'pipe', 'inherit'] });
      let o = '';
      c.stdout.on('data', (d: Buffer) => { o += d.toString(); });
      c.on('exit', (code) => (code === 0 ? resolve(o) : reject(new Error(`client exited ${code}`))));
    });
    const rate = (JSON.parse(out) as { rate: number }).rate;
    // CPU per request is the gateway's own cost; the rate also depends on what else gets the two cores
    const cpu = process.cpuUsage(cpu0);
    const st = svc.stats();
    await srv.close();
    await ledger.close();
    blobs.close();
    fs.rmSync(dir, { recursive: true, force: true });
    return { rate, batch: st.meanBatchSize ?? 0, cpuUs: (cpu.user + cpu.system) / N };
  };
  const base: { rate: number; batch: number; cpuUs: number }[] = [];
  const ours: { rate: number; batch: number; cpuUs: number }[] = [];
  for (let r = 0; r < RUNS; r++) { base.push(await once(1)); ours.push(await once(64)); }
  const mb = median(base.map((x) => x.rate));
  const mo = median(ours.map((x) => x.rate));
  row('gateway, instant upstream (req/s)', `${fmt(mb)} batch 1`, `${fmt(mo)} batch ≤64`, `${fmt(mo / mb, 1)}×`, 'target ≥ 2,000/s; client, upstream: other processes');
  row('  mean upstream batch size', fmt(median(base.map((x) => x.batch)), 1), fmt(median(ours.map((x) => x.batch)), 1), '', '');
  row('  gateway CPU per request (µs)', fmt(median(base.map((x) => x.cpuUs))), fmt(median(ours.map((x) => x.cpuUs))), '', '');
  await up.close();
}

async function main(): Promise<void> {
  if (process.argv[2] === '--child') return child(process.argv[3], process.argv[4], Number(process.argv[5]), Number(process.argv[6]), process.argv[7] === 'poll' ? 'poll' : 'fifo', process.argv[8] === 'steady');
  if (process.argv[2] === '--client') return client(process.argv[3], Number(process.argv[4]), Number(process.argv[5]), process.argv[6]);
  process.stdout.write(`bench:ledger — better-sqlite3, ${os.availableParallelism()} CPUs, load ${os.loadavg()[0].toFixed(1)}, medians of ${RUNS} runs\n`);
  row('', 'baseline', 'smol', 'ratio', '');
  const only = process.env.BENCH_ONLY?.split(',');
  const sections: [string, () => unknown][] = [['enqueue', enqueue], ['claim', claimComplete], ['latency', claimLatency], ['renew', renewals], ['wal', walGrowth], ['gateway', gateway]];
  try {
    for (const [name, fn] of sections) if (!only || only.includes(name)) await fn();
  } finally {
    for (const d of tmps) fs.rmSync(d, { recursive: true, force: true });
  }
}

await main();
