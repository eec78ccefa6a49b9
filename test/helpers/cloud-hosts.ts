/**
 * The hybrid rollout's two planes as hosts in network namespaces (netns.ts): a GPU host running PostgreSQL,
 * the stand-in upstream (on its own loopback) and `smol gateway` with a token file, and CPU hosts that run
 * `smol worker`. Every host has its own SMOL_HOME; nothing is shared but the database and the gateway's
 * URL, both reached across the switch. Processes are the real CLI from source (procs.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PostgresLedger } from '../../src/ledger/postgres.js';
import { root, smol, smolRun, type Proc } from '../integration/rollout/procs.js';
import { makeLan, startPostgresIn, type Host, type Lan, type NsPg } from './netns.js';

export interface Cloud {
  lan: Lan;
  pg: NsPg;
  gpu: Host;
  homes: Record<string, string>;
  /** http://GPU-ADDR:8470, served by the gateway in the GPU host's namespace. */
  gatewayUrl: string;
  token: string;
  on(host: string, args: string[], env?: NodeJS.ProcessEnv): Proc;
  runOn(host: string, args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }>;
  /** `smol worker --json` on a CPU host, with the gateway and the token file in that host's own home. */
  worker(host: string, args?: string[], env?: NodeJS.ProcessEnv): Proc;
  /** Writes a manifest into the GPU host's home and submits it from there. */
  submit(name: string, yaml: string): Promise<void>;
  /** The test's own look at the ledger, over PostgreSQL's Unix socket (opened per call: the server may restart). */
  view<T>(fn: (l: PostgresLedger) => Promise<T>): Promise<T>;
  /** SIGKILLs every process started on a host except the gateway (after each test, so none outlives it). */
  killWorkers(): Promise<void>;
  close(): Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Polls `cond` until it holds; a deadline for a hung run, not a timing assertion. A process in `watch` that
 * exits first fails the wait at once, with its exit code and the end of its stderr.
 */
export async function until(what: string, cond: () => Promise<boolean>, watch: Proc[] = [], timeoutMs = 60_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond().catch(() => false))) {
    const gone = watch.find((p) => p.child.exitCode !== null || p.child.signalCode !== null);
    if (gone) throw new Error(`waiting until ${what}: pid ${gone.child.pid} exited ${gone.child.exitCode ?? gone.child.signalCode}: ${gone.stderr.slice(-1500)}`);
    if (Date.now() > end) throw new Error(`timed out waiting until ${what}`);
    await sleep(200);
  }
}

function startUpstreamIn(h: Host): Promise<ChildProcess> {
  const c = spawn(h.exec[0], [...h.exec.slice(1), process.execPath, '--import', 'tsx', path.join(root, 'test/fixtures/upstream/server.ts'), '--port', '8000', '--delay-ms', '20'],
    { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    c.stdout!.once('data', () => resolve(c));
    c.once('exit', (code) => reject(new Error(`the upstream exited ${code}`)));
  });
}

export async function startCloud(workerHosts: string[]): Promise<Cloud> {
  const lan = makeLan(['gpu', ...workerHosts]);
  const procs: Proc[] = [];
  const homes: Record<string, string> = {};
  let pg: NsPg | undefined;
  let upstream: ChildProcess | undefined;
  const close = async () => {
    for (const p of procs) { p.kill('SIGCONT'); p.kill('SIGKILL'); }
    await Promise.all(procs.map((p) => p.exited));
    upstream?.kill('SIGKILL');
    pg?.stop();
    lan.destroy();
    for (const h of Object.values(homes)) fs.rmSync(h, { recursive: true, force: true });
  };
  try {
    const gpu = lan.hosts.gpu;
    pg = startPostgresIn(gpu);
    const token = crypto.randomBytes(32).toString('hex');
    for (const h of ['gpu', ...workerHosts]) {
      homes[h] = fs.mkdtempSync(path.join(os.tmpdir(), `smol-cloud-${h}-`));
      // each host holds its own copy of the token, as a cloud host would after provisioning
      fs.writeFileSync(path.join(homes[h], 'gateway.token'), `${token}\n`, { mode: 0o600 });
    }
    const envOf = (h: string): NodeJS.ProcessEnv => ({ SMOL_HOME: homes[h], SMOL_LEDGER: pg!.url, SMOL_BLOBS: '', SMOL_GATEWAY_TOKEN: '' });
    const on = (h: string, args: string[], env: NodeJS.ProcessEnv = {}) => {
      const p = smol(args, { ...envOf(h), ...env }, lan.hosts[h].exec);
      procs.push(p);
      return p;
    };
    upstream = await startUpstreamIn(gpu);
    const gw = on('gpu', ['gateway', '--json', '--listen', `${gpu.addr}:8470`, '--upstream', 'http://127.0.0.1:8000', '--token-file', path.join(homes.gpu, 'gateway.token'), '--batch-window', '20']);
    const gatewayUrl = String((await gw.waitFor((e) => typeof e.url === 'string')).url);
    const killWorkers = async () => {
      const others = procs.filter((p) => p !== gw);
      for (const p of others) { p.kill('SIGCONT'); p.kill('SIGKILL'); }
      await Promise.all(others.map((p) => p.exited));
    };
    return {
      lan, pg, gpu, homes, gatewayUrl, token, on, close, killWorkers,
      runOn: (h, args) => smolRun(args, envOf(h), lan.hosts[h].exec),
      worker: (h, args = [], env = {}) => on(h, ['worker', '--json', '--kind', 'all', '--gateway', gatewayUrl, '--gateway-token-file', path.join(homes[h], 'gateway.token'),
        '--window', '300ms', ...args], env),
      async submit(name, yaml) {
        const file = path.join(homes.gpu, `${name}.yaml`);
        fs.writeFileSync(file, yaml);
        const r = await smolRun(['rollout', 'submit', file, '--json'], envOf('gpu'), gpu.exec);
        if (r.code !== 0) throw new Error(`submit ${name}: ${r.stderr}`);
      },
      async view(fn) {
        const l = await PostgresLedger.connect({ url: pg!.socketUrl, max: 1 });
        try { return await fn(l); } finally { await l.close(); }
      },
    };
  } catch (err) {
    await close();
    throw err;
  }
}

/** A one-stage CPU rollout whose stage takes `seconds` (the window a test acts in) and echoes its input. */
export function cpuManifest(name: string, count: number, seconds: number): string {
  return `apiVersion: smol/v1\nkind: Rollout\nname: ${name}\nenvironment: { version: ${name}-env }\n`
    + `defaults: { maxAttempts: 4, backoff: 100ms, timeout: 60s }\ngenerate: { count: ${count}, template: "in{i}" }\n`
    + `stages:\n  - { name: work, kind: cpu, command: [sh, -c, 'sleep ${seconds}; cat'] }\n`;
}

/** The worker id a process on this machine uses (worker.ts: hostname and pid; namespaces share the hostname). */
export const workerIdOf = (p: Proc) => `${os.hostname()}:${p.child.pid}`;
