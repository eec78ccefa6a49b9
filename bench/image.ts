/**
 * `npm run bench:image`: registry pulls from Debian's docker-registry on loopback, against `curl` of the
 * same blobs in the same run, and the cost of a cached reference at `smol run` time.
 *  - pull: a two-layer image of ~100 MiB (8 MiB with BENCH_QUICK=1): the busybox fixture plus random
 *    (incompressible) data, gzip layers. Each run pulls into an empty cache: in process (pullImage, no disk
 *    build) and through the CLI (`smol image pull --no-build`, node startup included), vs one `curl`
 *    process fetching the manifest, config and layers to files. Target: ≥ 70 % of curl's MiB/s. A ceiling
 *    row adds `node -e 0` to curl's time: no Node CLI can do better than that.
 *  - run: `smol run --image REF -- true` (a cached reference) vs `--image DIR` (the same tree as a
 *    directory), both warm (base built, boot snapshot taken), alternating. Target: within 15 %.
 * BENCH_IMAGE=pull or BENCH_IMAGE=run measures one half.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { copyFile, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { listImages, pullImage, removeImage } from '../src/vm/image/index.js';
import { applyLayer } from '../src/vm/image/layers.js';
import { blobPath } from '../src/vm/image/store.js';
import { layers } from '../test/fixtures/images/make-image-tarballs.js';
import { pushImage } from '../test/helpers/oci-push.js';
import { hasRegistry, makeTlsCerts, startRegistry } from '../test/helpers/registry.js';
import { benchHome, quickMode, requireGuest } from './env.js';
import { median, printRows, type Row } from './stats.js';

const RUNS = Number(process.env.BENCH_RUNS ?? (quickMode ? 1 : 5));
const MiB = 1 << 20;
const HALF = quickMode ? 4 * MiB : 50 * MiB;
const only = process.env.BENCH_IMAGE;
const smolBin = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'bin', 'smol');

function cli(args: string[], env: NodeJS.ProcessEnv): number {
  return timed(process.execPath, [smolBin, ...args], env).ms;
}

/** Wall time, and CPU time (user + sys) from GNU time: the load-independent half of the comparison. */
function timed(file: string, args: string[], env: NodeJS.ProcessEnv = process.env): { ms: number; cpuMs: number } {
  const t0 = performance.now();
  const r = spawnSync('/usr/bin/time', ['-f', 'SMOLCPU %U %S', file, ...args], { env, stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
  const ms = performance.now() - t0;
  if (r.status !== 0) throw new Error(`${path.basename(file)} ${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  const m = /SMOLCPU ([\d.]+) ([\d.]+)/.exec(r.stderr);
  return { ms, cpuMs: m ? (Number(m[1]) + Number(m[2])) * 1000 : Number.NaN };
}

async function main(): Promise<void> {
  if (!hasRegistry()) { console.error('bench: /usr/bin/docker-registry is missing (bash scripts/setup.sh --test installs it)'); process.exit(69); }
  const { home, assets, ownHome } = benchHome('image');
  requireGuest(assets);
  const tmp = await mkdtemp(path.join(os.tmpdir(), 'smol-bench-image-'));
  const reg = await startRegistry();
  try {
    const base = layers(true)[0];
    const builds = [
      async (d: string) => { await base(d); await symlink('busybox', path.join(d, 'bin/true')); await writeFile(path.join(d, 'data-a.bin'), randomBytes(HALF)); },
      async (d: string) => { await mkdir(path.join(d, 'data'), { recursive: true }); await writeFile(path.join(d, 'data/b.bin'), randomBytes(HALF)); },
    ];
    const pushed = await pushImage(reg.host, 'bench/img', 'v1', builds, { format: 'oci', compression: 'gzip' });
    const ref = `${reg.host}/bench/img:v1`;
    const blobs = [pushed.config, ...pushed.layers];
    const bytes = blobs.reduce((n, b) => n + b.size, 0);
    const mibs = (ms: number) => bytes / MiB / (ms / 1000);

    const inProc: number[] = [];
    const inProcCpu: number[] = [];
    const load0 = os.loadavg()[0];
    const viaCli: number[] = [];
    const curl: number[] = [];
    const cliCpu: number[] = [];
    const curlCpu: number[] = [];
    const nodeStart: number[] = [];
    for (let i = 0; i < (only === 'run' ? 0 : RUNS); i++) {
      const a = path.join(tmp, `pull-${i}`);
      const t0 = performance.now();
      const c0 = process.cpuUsage();
      await pullImage(ref, a, { build: false });
      inProc.push(performance.now() - t0);
      const c = process.cpuUsage(c0);
      inProcCpu.push((c.user + c.system) / 1000);
      await rm(a, { recursive: true, force: true });
      const c1 = timed(process.execPath, [smolBin, 'image', 'pull', '--no-build', ref], { ...process.env, SMOL_ASSETS: a });
      viaCli.push(c1.ms);
      cliCpu.push(c1.cpuMs);
      await rm(a, { recursive: true, force: true });
      nodeStart.push(timed(process.execPath, ['-e', '0']).ms);
      const out = path.join(tmp, `curl-${i}`); // curl last, the CLI and in-process pulls before it: A, B, C, A, B, C
      await mkdir(out);
      const args = ['-sf', '-H', `Accept: ${pushed.mediaType}`, '-o', path.join(out, 'manifest'), `${reg.url}/v2/bench/img/manifests/v1`];
      for (const b of blobs) args.push('-o', path.join(out, b.digest.slice(7)), `${reg.url}/v2/bench/img/blobs/${b.digest}`);
      const c2 = timed('curl', args);
      curl.push(c2.ms);
      curlCpu.push(c2.cpuMs);
      await rm(out, { recursive: true, force: true });
    }

    const rows: Row[] = only === 'run' ? [] : [
      { metric: `pull ${(bytes / MiB).toFixed(0)} MiB, in process (pullImage)`, unit: 'MiB/s', value: mibs(median(inProc)), baseline: mibs(median(curl)), baselineLabel: 'curl', target: '>= 0.70x' },
      { metric: 'pull, CLI (smol image pull --no-build)', unit: 'MiB/s', value: mibs(median(viaCli)), baseline: mibs(median(curl)), baselineLabel: 'curl', target: '>= 0.70x' },
      { metric: 'pull, CLI wall time', unit: 'ms', value: median(viaCli), baseline: median(curl), baselineLabel: 'curl' },
      // no Node program can beat its own start-up plus the transfer: the most any Node CLI could reach here
      { metric: '  ceiling for any Node CLI (node -e 0, then curl\'s time)', unit: 'MiB/s', value: mibs(median(nodeStart) + median(curl)), baseline: mibs(median(curl)), baselineLabel: 'curl' },
      { metric: '  node -e 0', unit: 'ms', value: median(nodeStart), baseline: median(curl), baselineLabel: 'curl' },
      { metric: 'pull, CLI CPU time (user+sys)', unit: 'ms', value: median(cliCpu), baseline: median(curlCpu), baselineLabel: 'curl' },
      { metric: 'pull, in process CPU time (user+sys)', unit: 'ms', value: median(inProcCpu), baseline: median(curlCpu), baselineLabel: 'curl' },
    ];
    const loadPull = `load ${load0.toFixed(1)} -> ${os.loadavg()[0].toFixed(1)}`;
    const runR = only === 'pull' ? [] : await runRows(ref, assets, tmp);
    // last: the HTTPS registry shares the first one's storage and removes it when it stops
    const tlsR = only === 'run' ? [] : await httpsRows(reg.dir, pushed.layers.map((l) => l.digest), mibs, tmp);
    rows.push(...tlsR, ...runR);
    printRows(`image pulls (${RUNS} runs interleaved; loopback docker-registry; pulls at ${only === 'run' ? '-' : loadPull}, end load ${os.loadavg()[0].toFixed(1)})`, rows);
  } finally {
    await reg.stop();
    await rm(tmp, { recursive: true, force: true });
    if (ownHome) await rm(home, { recursive: true, force: true });
  }
}

/**
 * The same image over HTTPS: a second docker-registry with a test CA's certificate on the same storage,
 * trusted through $SMOL_HOME/certs.d; pullImage vs `curl --cacert` of the same blobs, interleaved.
 */
async function httpsRows(storage: string, layerDigests: string[], mibs: (ms: number) => number, tmp: string): Promise<Row[]> {
  const certsDir = path.join(tmp, 'certs');
  await mkdir(certsDir);
  const tlsReg = await startRegistry({ dir: storage, tls: await makeTlsCerts(certsDir) });
  try {
    const home = path.join(tmp, 'tls-home');
    await mkdir(path.join(home, 'certs.d', tlsReg.host), { recursive: true });
    await copyFile(path.join(certsDir, 'ca.crt'), path.join(home, 'certs.d', tlsReg.host, 'ca.crt'));
    const env = { ...process.env, SMOL_HOME: home };
    const ref = `${tlsReg.host}/bench/img:v1`;
    const smolMs: number[] = [];
    const curlMs: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const a = path.join(tmp, `tls-pull-${i}`);
      const t0 = performance.now();
      const r = await pullImage(ref, a, { build: false, env });
      smolMs.push(performance.now() - t0);
      await rm(a, { recursive: true, force: true });
      const out = path.join(tmp, `tls-curl-${i}`);
      await mkdir(out);
      const args = ['-sf', '--cacert', path.join(certsDir, 'ca.crt')];
      for (const d of [r.manifestDigest, ...layerDigests]) args.push('-o', path.join(out, d.slice(7)), `${tlsReg.url}/v2/bench/img/${d === r.manifestDigest ? 'manifests' : 'blobs'}/${d}`);
      curlMs.push(timed('curl', args).ms);
      await rm(out, { recursive: true, force: true });
    }
    return [{ metric: 'pull over HTTPS, in process (test CA)', unit: 'MiB/s', value: mibs(median(smolMs)), baseline: mibs(median(curlMs)), baselineLabel: 'curl', target: '>= 0.70x' }];
  } finally {
    await tlsReg.stop();
  }
}

/** The reference (pulled once into the real assets) vs the same tree as a directory, at `smol run`. */
async function runRows(ref: string, assets: string, tmp: string): Promise<Row[]> {
  {
    const buildMs = cli(['image', 'pull', ref], process.env);
    const rec = await pullImage(ref, assets, { offline: true, build: false });
    const dir = path.join(tmp, 'rootfs');
    await mkdir(dir);
    for (const l of rec.layers) await applyLayer(dir, blobPath(assets, l.digest));
    for (const d of ['proc', 'sys', 'dev', 'run', 'tmp']) await mkdir(path.join(dir, d), { recursive: true });
    const runRef: number[] = [];
    const runDir: number[] = [];
    cli(['run', '--image', ref, '--', 'true'], process.env); // warm: snapshot for each
    cli(['run', '--image', dir, '--', 'true'], process.env);
    for (let i = 0; i < Math.max(RUNS, quickMode ? 1 : 7); i++) {
      runRef.push(cli(['run', '--image', ref, '--', 'true'], { ...process.env, SMOL_OFFLINE: '1' }));
      runDir.push(cli(['run', '--image', dir, '--', 'true'], process.env));
    }
    cli(['image', 'rm', ref], process.env);
    for (const img of (await listImages()).filter((x) => x.ref === dir)) await removeImage(img.id);
    return [
      { metric: 'pull + ext4 base build (once, CLI)', unit: 'ms', value: buildMs },
      { metric: 'smol run --image REF -- true (cached)', unit: 'ms', value: median(runRef), baseline: median(runDir), baselineLabel: '--image DIR', target: '<= 1.15x' },
    ];
  }
}

await main();
