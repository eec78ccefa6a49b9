/**
 * `npm run bench:api`: what the HTTP API costs on top of the machine service (issue #29 item 8).
 *  - exec `true` round trip, interleaved call by call on one running machine: in-process (execInMachine, what a
 *    route handler calls), the TypeScript SDK over the Unix socket, over TCP with a token, and the CLI
 *    (`smol machine exec`, a new node process each time); medians and p99 with ratios to in-process.
 *  - exec through bare node:http (the server's share without the SDK's), and GET /v1/health through the SDK and
 *    through bare node:http: the transport's own floor
 *  - 10 clients × 100 execs spread over 4 machines at once: errors (must be 0), p50 and p99.
 * Target: API overhead (socket p50 − in-process p50) ≤ 2 ms. The server is `smol serve` from dist/ (npm run build).
 * BENCH_QUICK=1: 3 rounds, 2 clients × 3 execs on 1 machine, only to check that the bench works.
 */
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { Smol, type Machine } from '../src/client/index.js';
import { execInMachine } from '../src/vm/api/exec.js';
import { createQemuEngine, MachineService, MachineStore, openMachineDb } from '../src/vm/api/machines.js';
import { dataPaths } from '../src/util/paths.js';
import { benchHome, quickMode, requireGuest } from './env.js';
import { hostAccel, median, percentile, printRows, type Row } from './stats.js';

const ROUNDS = Number(process.env.BENCH_RUNS ?? (quickMode ? 3 : 200));
const CLI_EVERY = 10; // the CLI costs a node start (~0.3 s): one CLI call per this many rounds
const [CLIENTS, PER_CLIENT, MACHINES] = quickMode ? [2, 3, 1] : [10, 100, 4];
const smolBin = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'bin', 'smol');
const { home, assets, ownHome } = benchHome('api');
requireGuest(assets);
const sink = () => new Writable({ write(_c, _e, cb) { cb(); } });

interface Served { socket: string; url: string; token: string; stop(): Promise<void> }

async function serve(): Promise<Served> {
  const token = randomBytes(24).toString('hex');
  const tokenFile = path.join(home, 'bench-tokens.txt');
  fs.writeFileSync(tokenFile, `${token}\n`, { mode: 0o600 });
  const child = spawn(process.execPath, [smolBin, 'serve', '--json', '--listen', '127.0.0.1:0', '--token-file', tokenFile], { stdio: ['ignore', 'pipe', 'inherit'] });
  const info = await new Promise<{ socket: string; url: string }>((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (d: Buffer) => {
      out += d.toString();
      if (out.includes('\n')) resolve(JSON.parse(out.slice(0, out.indexOf('\n'))) as { socket: string; url: string });
    });
    child.once('exit', (code) => reject(new Error(`smol serve exited ${code} (built? npm run build)`)));
  });
  return { ...info, token, stop: () => new Promise<void>((r) => { child.once('exit', () => r()); child.kill('SIGTERM'); }) };
}

/** One request over the socket with node's own client: the server's share of a round trip, without the SDK's. */
function bare(socketPath: string, p: string, body?: unknown): Promise<void> {
  return new Promise((resolve, reject) => {
    const req = http.request({ socketPath, path: p, agent: keepAlive, method: body ? 'POST' : 'GET', headers: body ? { 'content-type': 'application/json' } : {} }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 200 ? resolve() : reject(new Error(`${p} answered ${res.statusCode}`))));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end(body ? JSON.stringify(body) : undefined);
  });
}
const keepAlive = new http.Agent({ keepAlive: true });

const timed = async (fn: () => Promise<unknown>) => { const t0 = performance.now(); await fn(); return performance.now() - t0; };

async function main(): Promise<void> {
  const load0 = os.loadavg();
  const srv = await serve();
  const sock = new Smol({ socketPath: srv.socket });
  const tcp = new Smol({ url: srv.url, token: srv.token });
  const svc = new MachineService({ home, store: new MachineStore(openMachineDb(dataPaths(home).machineDb)), engine: createQemuEngine(home) });
  const machines: Machine[] = [];
  try {
    // settled one by one, so a failed create still leaves the others to be removed below
    const made = await Promise.allSettled(Array.from({ length: MACHINES }, (_, i) => sock.machines.create({ name: `api${i}` })));
    for (const r of made) if (r.status === 'fulfilled') machines.push(r.value);
    const failed = made.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    const m = machines[0];
    const mTcp = await tcp.machines.get(m.name);
    const ways: Record<string, () => Promise<unknown>> = {
      'in-process': () => execInMachine(svc, m.name, { argv: ['true'] }, { stdin: null, stdout: sink(), stderr: sink() }),
      'SDK, Unix socket': () => m.exec(['true']),
      'SDK, TCP + token': () => mTcp.exec(['true']),
      'node:http, Unix socket': () => bare(srv.socket, `/v1/machines/${m.name}/exec`, { argv: ['true'] }),
      // the floor under the exec rows: one request that does nothing, through the SDK and through bare node:http
      'GET /v1/health: SDK, socket': () => sock.health(),
      'GET /v1/health: node:http, socket': () => bare(srv.socket, '/v1/health'),
      CLI: async () => {
        const r = spawnSync(process.execPath, [smolBin, 'machine', 'exec', m.name, '--', 'true'], { env: process.env, stdio: 'ignore' });
        if (r.status !== 0) throw new Error(`smol machine exec exited ${r.status}`);
      },
    };
    // one exec each, interleaved, so a change in host load falls on every way alike
    const ms: Record<string, number[]> = Object.fromEntries(Object.keys(ways).map((k) => [k, []]));
    for (const fn of Object.values(ways)) await fn(); // warm: connections open, modules loaded
    for (let i = 0; i < ROUNDS; i++) {
      for (const [k, fn] of Object.entries(ways)) if (k !== 'CLI' || i % CLI_EVERY === 0) ms[k].push(await timed(fn));
    }
    const base = median(ms['in-process']);
    const rows: Row[] = [];
    for (const [k, xs] of Object.entries(ms)) {
      rows.push({ metric: k.startsWith('GET') ? k : `exec true: ${k}`, unit: 'ms', value: median(xs), baseline: base, baselineLabel: 'in-process', target: k === 'SDK, Unix socket' ? '≤ in-process + 2 ms' : undefined });
      rows.push({ metric: `  p99 (${xs.length} runs)`, unit: 'ms', value: percentile(xs, 99), baseline: percentile(ms['in-process'], 99), baselineLabel: 'in-process' });
    }

    // many clients at once, each its own connection pool, spread over the machines
    const clients = Array.from({ length: CLIENTS }, () => new Smol({ socketPath: srv.socket }));
    const lat: number[] = [];
    let errors = 0;
    const t0 = performance.now();
    await Promise.all(clients.map(async (c, ci) => {
      for (let j = 0; j < PER_CLIENT; j++) {
        const name = machines[(ci + j) % MACHINES].name;
        try {
          const t = performance.now();
          const r = await c.machines.get(name).then((x) => x.exec(['true']));
          lat.push(performance.now() - t);
          if (r.exitCode !== 0) errors++;
        } catch (err) {
          errors++;
          console.error(`client ${ci}: ${(err as Error).message}`);
        }
      }
    }));
    const wall = performance.now() - t0;
    await Promise.all(clients.map((c) => c.close()));
    rows.push({ metric: `${CLIENTS} clients × ${PER_CLIENT} execs, ${MACHINES} machines: errors`, unit: 'count', value: errors, target: '0' });
    rows.push({ metric: '  get + exec p50', unit: 'ms', value: median(lat), baseline: base, baselineLabel: 'in-process, alone' });
    rows.push({ metric: '  get + exec p99', unit: 'ms', value: percentile(lat, 99) });
    rows.push({ metric: '  throughput', unit: 'exec/s', value: (lat.length / wall) * 1000 });
    const load1 = os.loadavg();
    printRows(`API exec round trip (${await hostAccel()}; load ${load0[0].toFixed(1)} → ${load1[0].toFixed(1)}; API overhead p50 ${(median(ms['SDK, Unix socket']) - base).toFixed(2)} ms over in-process)`, rows);
    if (errors) process.exitCode = 1;
  } finally {
    await Promise.all(machines.map((x) => x.remove().catch(() => undefined)));
    await sock.close();
    await tcp.close();
    await srv.stop();
    if (ownHome) fs.rmSync(home, { recursive: true, force: true });
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exitCode = 1;
});
