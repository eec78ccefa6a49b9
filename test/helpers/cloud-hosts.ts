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
import { expect } from 'vitest';
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
  /** The running gateway process (replaced by startGateway). */
  gateway: Proc;
  /** Starts `smol gateway` again on the same address, as a restarted GPU host's service would be. */
  startGateway(): Promise<Proc>;
  on(host: string, args: string[], env?: NodeJS.ProcessEnv): Proc;
  runOn(host: string, args: string[], env?: NodeJS.ProcessEnv): Promise<{ code: number | null; stdout: string; stderr: string }>;
  /** `smol worker --json` on a CPU host, with the gateway and the token file in that host's own home. */
  worker(host: string, args?: string[], env?: NodeJS.ProcessEnv): Proc;
  /** Writes a manifest into the GPU host's home and submits it from there. */
  submit(name: string, yaml: string): Promise<void>;
  /** The test's own look at the ledger, over PostgreSQL's Unix socket (opened per call: the server may restart). */
  view<T>(fn: (l: PostgresLedger) => Promise<T>): Promise<T>;
  /** A host vanishes: SIGKILL to `proc` and every process below it (its stages), and its link down for good. */
  vanish(host: string, proc: Proc): Promise<void>;
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

function startUpstreamIn(h: Host, delayMs: number): Promise<ChildProcess> {
  const c = spawn(h.exec[0], [...h.exec.slice(1), process.execPath, '--import', 'tsx', path.join(root, 'test/fixtures/upstream/server.ts'), '--port', '8000', '--delay-ms', String(delayMs)],
    { cwd: root, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    c.stdout!.once('data', () => resolve(c));
    c.once('exit', (code) => reject(new Error(`the upstream exited ${code}`)));
  });
}

/** `pid` and its descendants, parents first (from /proc: the namespaces share one PID namespace). */
function processTree(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const d of fs.readdirSync('/proc').filter((x) => /^\d+$/.test(x))) {
    let stat: string;
    try { stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8'); } catch { continue; } // exited meanwhile
    const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
    children.set(ppid, [...(children.get(ppid) ?? []), Number(d)]);
  }
  const out: number[] = [];
  const walk = (p: number) => { out.push(p); for (const c of children.get(p) ?? []) walk(c); };
  walk(pid);
  return out;
}

/** `upstreamDelayMs`: how long the stand-in upstream takes per batch (long enough for a test to act mid-batch). */
export async function startCloud(workerHosts: string[], o: { upstreamDelayMs?: number } = {}): Promise<Cloud> {
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
    upstream = await startUpstreamIn(gpu, o.upstreamDelayMs ?? 20);
    const gateways: Proc[] = [];
    const startGateway = async () => {
      const gw = on('gpu', ['gateway', '--json', '--listen', `${gpu.addr}:8470`, '--upstream', 'http://127.0.0.1:8000', '--token-file', path.join(homes.gpu, 'gateway.token'), '--batch-window', '20']);
      gateways.push(gw);
      await gw.waitFor((e) => typeof e.url === 'string');
      return gw;
    };
    const first = await startGateway();
    const gatewayUrl = String((await first.waitFor((e) => typeof e.url === 'string')).url);
    const killWorkers = async () => {
      const others = procs.filter((p) => !gateways.includes(p));
      for (const p of others) { p.kill('SIGCONT'); p.kill('SIGKILL'); }
      await Promise.all(others.map((p) => p.exited));
    };
    return {
      lan, pg, gpu, homes, gatewayUrl, token, on, close, killWorkers, startGateway,
      get gateway() { return gateways[gateways.length - 1]; },
      async vanish(h, p) {
        // stopped first so that none of them can start another child between the listing and the kill
        const tree = processTree(p.child.pid!);
        for (const pid of tree) { try { process.kill(pid, 'SIGSTOP'); } catch { /* gone */ } }
        for (const pid of processTree(p.child.pid!)) { try { process.kill(pid, 'SIGKILL'); } catch { /* gone */ } }
        lan.cut(h);
        await p.exited;
      },
      runOn: (h, args, env = {}) => smolRun(args, { ...envOf(h), ...env }, lan.hosts[h].exec),
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

/**
 * Every item of the rollout done, one result per item, nothing done twice (one completed attempt per item,
 * the one whose result was kept) and `ledger check` clean; returns the items, results and each item's attempts.
 */
export async function settled(l: PostgresLedger, rollout: string, count: number) {
  const items = await l.listItems(rollout);
  expect(items).toHaveLength(count);
  expect(items.map((i) => i.status)).toEqual(Array(count).fill('done'));
  const results = await l.results({ rolloutId: rollout });
  expect(results.map((r) => r.idempotencyKey).sort()).toEqual(items.map((i) => i.idempotencyKey).sort());
  const attempts = new Map<number, { worker: string; outcome: string }[]>();
  for (const i of items) attempts.set(i.id, await l.attemptsOf(i.id));
  for (const i of items) expect(attempts.get(i.id)!.filter((a) => a.outcome === 'done')).toHaveLength(1);
  expect(await l.check()).toEqual([]);
  return { items, results, attempts };
}
