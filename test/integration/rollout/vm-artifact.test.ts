/**
 * Environments that travel by digest, on real QEMU (TCG) and Debian's docker-registry: a machine packed with its
 * memory on one host is pushed, and two fresh hosts (their own SMOL_HOME, one ledger) run a stage with
 * `isolation: {vm: {artifact: REGISTRY/NAME@sha256:…}}`. Each host pulls the artifact once however many workers
 * and attempts it has (counted at a proxy in front of the registry), and both run the same bytes. A tag-only
 * reference is refused at submit; a substituted blob and an unknown digest fail their items with the reason.
 * VM boots are few: one to build the source, one resume per host, then clones.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import Database from 'better-sqlite3';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BlobStore } from '../../../src/ledger/blobs.js';
import { SqliteLedger } from '../../../src/ledger/sqlite.js';
import { killQemuMentioning, qemuProcessesMentioning, scratchHome, sharedHome, smol as smolCli } from '../../helpers/cli.js';
import { hasRegistry, startRegistry, type TestRegistry } from '../../helpers/registry.js';
import { removeHomeShm } from '../../helpers/shm.js';
import { smol, smolRun, type Proc } from './procs.js';

const homes: string[] = [];
const procs: Proc[] = [];
let coord: string;
let registry: TestRegistry;
let proxy: { host: string; blobGets: string[]; close(): Promise<void> };

/** A forwarding proxy that counts the blob downloads passing through it. */
async function countingProxy(target: string): Promise<typeof proxy> {
  const [host, port] = target.split(':');
  const blobGets: string[] = [];
  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && /\/blobs\/sha256:/.test(req.url ?? '')) blobGets.push(req.url!);
    const up = http.request({ host, port: Number(port), path: req.url, method: req.method, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    host: `127.0.0.1:${(server.address() as AddressInfo).port}`, blobGets,
    close: () => new Promise((resolve) => { server.closeAllConnections(); server.close(() => resolve()); }),
  };
}

const newHome = (tag: string) => {
  const h = scratchHome(tag);
  homes.push(h);
  return h;
};
const envOf = (home: string): NodeJS.ProcessEnv => ({ SMOL_HOME: home, SMOL_ASSETS: sharedHome(), SMOL_LEDGER: path.join(coord, 'ledger.db'), SMOL_BLOBS: '' });

function manifest(name: string, ref: string, count: number): string {
  const file = path.join(coord, `${name}.yaml`);
  fs.writeFileSync(file, `apiVersion: smol/v1\nkind: Rollout\nname: ${name}\ndefaults: { maxAttempts: 1, timeout: 60s }\ngenerate: { count: ${count}, template: "in{i}" }\nstages:\n`
    + `  - name: look\n    kind: cpu\n    isolation: { vm: { artifact: "${ref}" } }\n    command: [sh, -c, 'echo "$(cat /root/env-marker) $(tr a-z A-Z)"']\n`);
  return file;
}

async function submit(file: string, home: string): Promise<void> {
  const r = await smolRun(['rollout', 'submit', file], envOf(home));
  expect(r.code, r.stderr).toBe(0);
}

function work(home: string, extra: string[] = []): Proc {
  // idle means nothing queued or leased anywhere (rollout/worker.ts): a short wait for it loses nothing
  const w = smol(['worker', '--json', '--isolation', 'vm', '--kind', 'cpu', '--exit-when-idle', '250ms', ...extra], envOf(home));
  procs.push(w);
  return w;
}

async function items(rolloutId: string): Promise<{ status: string; envVersion: string; lastError: string | null; output: string | null }[]> {
  const l = new SqliteLedger({ path: path.join(coord, 'ledger.db') });
  try {
    const blobs = new BlobStore(path.join(coord, 'blobs'));
    const results = new Map((await l.results({ rolloutId })).map((r) => [r.sampleId, r.outputRef]));
    return (await l.listItems(rolloutId)).map((i) => {
      const ref = results.get(i.sampleId);
      return { status: i.status, envVersion: i.envVersion, lastError: i.lastError, output: ref ? blobs.getText(ref) : null };
    });
  } finally {
    await l.close();
  }
}

/** What a host saved from the artifact: the point's recorded image id, and the SHA-256 of the disk it clones over. */
function pointOf(home: string, point: string): { imageId: string; baseDisk: string } {
  const db = new Database(path.join(home, 'smol.db'), { readonly: true });
  try {
    const row = db.prepare('SELECT source FROM fork_points WHERE name = ?').get(point) as { source: string } | undefined;
    expect(row, `no fork point ${point} in ${home}`).toBeDefined();
    const src = JSON.parse(row!.source) as { imageId: string };
    const cache = path.join(home, 'cache', 'artifacts');
    const dir = fs.readdirSync(cache).find((d) => fs.statSync(path.join(cache, d)).isDirectory() && fs.existsSync(path.join(cache, d, 'manifest.json')))!;
    const disk = fs.readdirSync(path.join(cache, dir)).find((f) => f.endsWith('.qcow2'))!;
    return { imageId: src.imageId, baseDisk: crypto.createHash('sha256').update(fs.readFileSync(path.join(cache, dir, disk))).digest('hex') };
  } finally {
    db.close();
  }
}

const available = hasRegistry();
let ref = '';
let point = '';

beforeAll(async () => {
  if (!available) return;
  coord = newHome('art-coord');
  registry = await startRegistry();
  proxy = await countingProxy(registry.host);
  // the source host: a machine with a marker on its disk, packed running with its memory, pushed by tag
  const src = newHome('art-src');
  const o = { home: src, timeoutMs: 240_000 };
  const created = await smolCli(['machine', 'create', 'env', '--forkable', '--start'], o);
  expect(created.code, created.stderr).toBe(0);
  expect((await smolCli(['machine', 'exec', 'env', '--', 'sh', '-c', 'echo env-v1 > /root/env-marker'], o)).code).toBe(0);
  const art = path.join(src, 'env.smolmachine');
  const packed = await smolCli(['pack', 'create', '--from-vm', 'env', '--with-memory', '-o', art], o);
  expect(packed.code, packed.stderr).toBe(0);
  expect((await smolCli(['machine', 'rm', '--force', 'env'], o)).code).toBe(0);
  const pushed = await smolCli(['pack', 'push', art, `${registry.host}/smol/env:v1`, '--json'], o);
  expect(pushed.code, pushed.stderr).toBe(0);
  const digest = (JSON.parse(pushed.stdout) as { manifestDigest: string }).manifestDigest;
  ref = `${proxy.host}/smol/env@${digest}`;
  point = `art-${digest.slice(7, 19)}`;
}, 600_000);

afterAll(async () => {
  for (const p of procs) p.kill('SIGKILL');
  for (const h of homes) {
    killQemuMentioning(h);
    removeHomeShm(h);
    fs.rmSync(h, { recursive: true, force: true });
  }
  await proxy?.close();
  await registry?.stop();
});

describe.skipIf(!available)('stages from registry artifacts pinned by digest (real QEMU, real registry)', () => {
  it('refuses a tag-only reference at submit, saying how to pin it', async () => {
    const r = await smolRun(['rollout', 'submit', manifest('tagged', `${proxy.host}/smol/env:v1`, 1)], envOf(coord));
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(`"${proxy.host}/smol/env:v1" is pinned by tag only, and a tag can move: pin it by digest, ${proxy.host}/smol/env@sha256:<64 hex>`);
  });

  it('a fresh host pulls once for two workers and three attempts, resumes the packed memory and clones per attempt', async () => {
    const a = newHome('art-host-a');
    await submit(manifest('on-a', ref, 3), a);
    const [w1, w2] = [work(a, ['--concurrency', '2']), work(a, ['--concurrency', '1'])];
    expect(await w1.exited, w1.stderr).toBe(0);
    expect(await w2.exited, w2.stderr).toBe(0);
    const got = await items('on-a');
    expect(got.map((i) => [i.status, i.output]).sort()).toEqual([['done', 'env-v1 IN0\n'], ['done', 'env-v1 IN1\n'], ['done', 'env-v1 IN2\n']]);
    // the digest is the environment version on every item
    expect(new Set(got.map((i) => i.envVersion))).toEqual(new Set([ref.slice(ref.indexOf('@') + 1)]));
    expect(proxy.blobGets.filter((u) => !u.includes('44136fa355b3678a'))).toHaveLength(1);
    const notices = (w1.stderr + w2.stderr).split('\n').filter((l) => /^smol: (pulled|saved) /.test(l));
    expect(notices).toEqual([expect.stringMatching(/^smol: pulled .* MiB, blob sha256:/), `smol: saved fork point ${point} from ${ref} (resumed its packed memory)`]);
    // the machine it was made from is gone; the point stays for the next worker, with no clone left on it
    const ls = JSON.parse((await smolCli(['machine', 'ls', '--json'], { home: a })).stdout) as unknown[];
    expect(ls).toEqual([]);
    const points = JSON.parse((await smolCli(['snapshot', 'ls', '--json'], { home: a })).stdout) as { name: string; clones: string[] }[];
    expect(points.map((p) => [p.name, p.clones])).toEqual([[point, []]]);
    expect(qemuProcessesMentioning(a)).toEqual([]);
  }, 600_000);

  it('a second host runs the same bytes (same disk, recorded image and output), clearing a half-made machine', async () => {
    const [a, b] = [homes.find((h) => h.includes('art-host-a-'))!, newHome('art-host-b')];
    await submit(manifest('on-b', ref, 1), b);
    // what a worker killed while preparing leaves: a machine of the point's name (made, not started: no boot)
    expect((await smolCli(['machine', 'create', point], { home: b })).code).toBe(0);
    const w = work(b);
    expect(await w.exited, w.stderr).toBe(0);
    expect((await items('on-b')).map((i) => [i.status, i.output])).toEqual([['done', 'env-v1 IN0\n']]);
    expect(proxy.blobGets.filter((u) => !u.includes('44136fa355b3678a'))).toHaveLength(2); // one pull per host
    const [pa, pb] = [pointOf(a, point), pointOf(b, point)];
    expect(pa.imageId).toMatch(/^artifact-[0-9a-f]{24}$/);
    expect(pb).toEqual(pa);
    expect(JSON.parse((await smolCli(['machine', 'ls', '--json'], { home: b })).stdout)).toEqual([]);
    expect(qemuProcessesMentioning(b)).toEqual([]);
  }, 600_000);

  it('a substituted blob and an unknown digest fail their items with the reason, and nothing is saved', async () => {
    const blobs = path.join(registry.dir, 'data', 'docker', 'registry', 'v2', 'blobs', 'sha256');
    const layer = fs.readdirSync(blobs).flatMap((p) => fs.readdirSync(path.join(blobs, p)).map((d) => path.join(blobs, p, d, 'data')))
      .sort((x, y) => fs.statSync(y).size - fs.statSync(x).size)[0]; // the artifact: the largest blob
    const fh = fs.openSync(layer, 'r+');
    fs.writeSync(fh, Buffer.from('tampered'), 0, 8, 4096); // same size: only the digest can tell
    fs.closeSync(fh);
    const c = newHome('art-host-c');
    await submit(manifest('tampered', ref, 1), c);
    const unknown = `${proxy.host}/smol/env@sha256:${'0'.repeat(64)}`;
    await submit(manifest('unknown', unknown, 1), c);
    const w = work(c);
    expect(await w.exited, w.stderr).toBe(0);
    const [bad] = await items('tampered');
    expect(bad.status).toBe('dead');
    expect(bad.lastError).toMatch(/environment not ready: pull .*: blob sha256:[0-9a-f]{64} arrived as sha256:[0-9a-f]{64}/);
    const [missing] = await items('unknown');
    expect(missing.status).toBe('dead');
    expect(missing.lastError).toMatch(/environment not ready: pull .*sha256:0{64}/);
    expect(JSON.parse((await smolCli(['snapshot', 'ls', '--json'], { home: c })).stdout)).toEqual([]);
    expect(fs.existsSync(path.join(c, 'cache', 'pulled')) ? fs.readdirSync(path.join(c, 'cache', 'pulled')) : []).toEqual([]);
    expect(qemuProcessesMentioning(c)).toEqual([]);
  }, 300_000);
});
