/**
 * bench:io, section ports (bench/io.ts runs it): 1,000 HTTP requests over one keep-alive connection through a published port (p50, p99) vs the same
 *    server binary on the host's loopback; a 100 MiB download through the port (MiB/s, sha256 checked) vs the
 *    host. Ports-only (QEMU hostfwd, restrict=on) always; through the --net path (socat into the machine's
 *    namespace) too when run as root.
 * Uses $SMOL_ASSETS (default: smol's data dir, as set up by scripts/setup.sh) and a temporary $SMOL_HOME.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { median, percentile, type Row } from './stats.js';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
// bench/io.ts points SMOL_HOME at its scratch home and SMOL_ASSETS at smol's assets before any section runs
const quick = process.env.BENCH_QUICK === '1';
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? (quick ? 100 : 1000));
const MiB = 2 ** 20;
const BIG = (quick ? 8 : 100) * MiB;

const smol = (args: string[]) => {
  const r = spawnSync(process.execPath, [path.join(root, 'bin/smol'), ...args], { env: process.env, encoding: 'utf8', maxBuffer: 16 * MiB });
  if (r.status !== 0) throw new Error(`smol ${args.join(' ')} failed (${r.status}): ${r.stderr}`);
  return r.stdout;
};

function freePort(): Promise<number> {
  const s = http.createServer();
  return new Promise((resolve) => s.listen(0, '127.0.0.1', () => {
    const { port } = s.address() as AddressInfo;
    s.close(() => resolve(port));
  }));
}

/** The keep-alive server both sides run (bench/fixtures/keepalive-httpd.c), built static so the guest can run it. */
function buildServer(dir: string): string {
  const out = path.join(dir, 'keepalive-httpd');
  const r = spawnSync('gcc', ['-static', '-O2', '-o', out, path.join(root, 'bench/fixtures/keepalive-httpd.c')], { encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`building the bench server failed: ${r.stderr}`);
  return out;
}

function get(agent: http.Agent, port: number, p: string, onData?: (b: Buffer) => void): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: p, agent }, (res) => {
      let n = 0;
      res.on('data', (b: Buffer) => { n += b.length; onData?.(b); });
      res.on('end', () => resolve(n));
      res.on('error', reject);
    });
    req.on('error', reject);
  });
}

async function waitServing(port: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    try {
      const agent = new http.Agent({ keepAlive: false });
      if ((await get(agent, port, '/small')) === 3) return;
    } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`nothing answered on 127.0.0.1:${port}`);
}

/** p50/p99 of REQUESTS sequential requests on one keep-alive socket, and one BIG download (MiB/s, sha256). */
async function measure(port: number): Promise<{ p50: number; p99: number; mibs: number; sha: string }> {
  await waitServing(port);
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  for (let i = 0; i < 20; i++) await get(agent, port, '/small'); // warm-up (TCG translation, caches)
  const lat: number[] = [];
  for (let i = 0; i < REQUESTS; i++) {
    const t0 = performance.now();
    await get(agent, port, '/small');
    lat.push(performance.now() - t0);
  }
  const h = crypto.createHash('sha256');
  const t0 = performance.now();
  const n = await get(agent, port, '/big', (b) => h.update(b));
  const s = (performance.now() - t0) / 1000;
  agent.destroy();
  if (n !== BIG) throw new Error(`the ${BIG / MiB} MiB download brought ${n} bytes`);
  return { p50: median(lat), p99: percentile(lat, 99), mibs: n / MiB / s, sha: h.digest('hex') };
}

/** Published ports: keep-alive latency and bulk throughput through the port vs the host's loopback. */
export async function portsSection(): Promise<Row[]> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-bench-io-ports-'));
  const server = buildServer(dir);
  const bigFile = path.join(dir, 'big');
  fs.writeFileSync(bigFile, crypto.randomBytes(BIG));
  const want = crypto.createHash('sha256').update(fs.readFileSync(bigFile)).digest('hex');
  const rows: Row[] = [];
  let hostSrv: ChildProcess | undefined;
  try {
    const hp = await freePort();
    hostSrv = spawn(server, [String(hp), bigFile], { stdio: 'ignore' });
    const host = await measure(hp);
    hostSrv.kill();
    const modes: { label: string; flags: string[] }[] = [{ label: 'port', flags: [] }];
    if (process.getuid?.() === 0) modes.push({ label: 'port under --net', flags: ['--net'] });
    for (const m of modes) {
      const port = await freePort();
      const name = `bench-io-${m.flags.length ? 'net' : 'port'}`;
      smol(['machine', 'create', name, '--mem', '512M', '-p', `${port}:8080`, ...m.flags, '--start']);
      try {
        smol(['machine', 'exec', name, '--', 'sh', '-c', 'mkdir -p /srv && mount -t tmpfs -o size=300m tmpfs /srv']);
        smol(['machine', 'cp', server, `${name}:/srv/keepalive-httpd`]);
        smol(['machine', 'cp', bigFile, `${name}:/srv/big`]);
        smol(['machine', 'exec', name, '--', 'sh', '-c', 'chmod +x /srv/keepalive-httpd && (setsid /srv/keepalive-httpd 8080 /srv/big </dev/null >/dev/null 2>&1 &)']);
        const g = await measure(port);
        if (g.sha !== want || host.sha !== want) throw new Error('sha256 of the download does not match the file');
        rows.push(
          { metric: `HTTP keep-alive p50 (${m.label})`, unit: 'ms', value: g.p50, baseline: host.p50, baselineLabel: 'host loopback' },
          { metric: `HTTP keep-alive p99 (${m.label})`, unit: 'ms', value: g.p99, baseline: host.p99, baselineLabel: 'host loopback' },
          { metric: `${BIG / MiB} MiB download (${m.label}, sha256 ok)`, unit: 'MiB/s', value: g.mibs, baseline: host.mibs, baselineLabel: 'host loopback' },
        );
      } finally {
        smol(['machine', 'rm', '-f', name]);
      }
    }
  } finally {
    hostSrv?.kill();
    fs.rmSync(dir, { recursive: true, force: true });
  }
  return rows;
}

