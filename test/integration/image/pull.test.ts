/**
 * Image pulls against Debian's docker-registry on loopback, with images this test builds and pushes
 * itself: whiteouts, a multi-platform index, zstd, corrupt blobs, a non-JSON manifest, a missing tag,
 * offline use, and the cache commands through the real CLI.
 */
import { readdir, readFile, rm, stat, writeFile, mkdtemp } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pullImage, listImages } from '../../../src/vm/image/index.js';
import { readRef } from '../../../src/vm/image/store.js';
import { parseImageReference } from '../../../src/registry/index.js';
import { layers, EXPECTED } from '../../fixtures/images/make-image-tarballs.js';
import { filesLayer, pushImage, pushIndex } from '../../helpers/oci-push.js';
import { hasRegistry, startRegistry, type TestRegistry } from '../../helpers/registry.js';
import { startProxy, type RegistryProxy } from '../../helpers/registry-proxy.js';
import { withRawBase } from '../../helpers/ext4-read.js';
import { smol } from '../../helpers/cli.js';

const why = hasRegistry() ? '' : ' (skipped: /usr/bin/docker-registry is not installed; scripts/setup.sh --test installs it)';

describe.skipIf(!hasRegistry())(`image pull from a real OCI registry${why}`, () => {
  let reg: TestRegistry;
  let proxy: RegistryProxy;
  let tmp: string;
  let assets: string;
  let env: NodeJS.ProcessEnv;
  const blobsIn = async (a: string) => (await readdir(path.join(a, 'images/blobs/sha256')).catch(() => [] as string[]));
  const cli = (args: string[], extra: Record<string, string> = {}) => smol(args, { home: path.join(tmp, 'home'), env: { SMOL_ASSETS: assets, DOCKER_CONFIG: path.join(tmp, 'docker'), ...extra }, timeoutMs: 120_000 });

  beforeAll(async () => {
    reg = await startRegistry();
    proxy = await startProxy(reg.host, { override: new Map([[`/v2/smol/broken/manifests/v1`, { body: Buffer.from('<html>not a manifest</html>'), contentType: 'application/vnd.oci.image.manifest.v1+json' }]]) });
    tmp = await mkdtemp(path.join(os.tmpdir(), 'smol-pull-test-'));
    assets = path.join(tmp, 'assets');
    env = { ...process.env, SMOL_HOME: path.join(tmp, 'home'), DOCKER_CONFIG: path.join(tmp, 'docker') };
  });
  afterAll(async () => {
    await proxy?.stop();
    await reg?.stop();
    if (tmp) await rm(tmp, { recursive: true, force: true });
  });

  it('pulls a two-layer Docker v2 image with whiteouts into an ext4 base; a second pull fetches nothing', async () => {
    const pushed = await pushImage(reg.host, 'smol/two', 'v1', layers(false).slice(0, 2), { format: 'docker', compression: 'gzip' });
    const ref = `${reg.host}/smol/two:v1`;
    const r = await pullImage(ref, assets, { env });
    expect(r.manifestDigest).toBe(pushed.digest);
    expect(r.fetchedBlobs).toBe(3); // config + two layers
    expect(r.layers.map((l) => l.cached)).toEqual([false, false]);
    await withRawBase(r.image!.basePath, async (read) => {
      expect(await read('/etc/smol-release')).toBe(EXPECTED.release);
      expect(await read('/keep/b.txt')).toBe('b\n');
      expect(await read('/opaque/new.txt')).toBe('new\n');
      for (const gone of ['/keep/a.txt', '/gone', '/opaque/old.txt', '/opaque/sub']) expect(await read(gone), gone).toBeNull();
    });
    expect(r.image!.config).toMatchObject({ env: ['PATH=/bin'], cmd: ['/bin/sh'] });
    const again = await pullImage(ref, assets, { env });
    expect(again).toMatchObject({ fetchedBlobs: 0, fetchedBytes: 0, imageId: r.imageId });
    expect(again.layers.every((l) => l.cached)).toBe(true);
    expect((await pullImage(`${reg.host}/smol/two@${pushed.digest}`, assets, { env })).fetchedBlobs).toBe(0);
  });

  it('picks linux/amd64 from a multi-platform index, and names the platforms when there is none', async () => {
    const amd = await pushImage(reg.host, 'smol/multi', 'amd64', [filesLayer({ arch: 'amd64\n' })], { format: 'oci', architecture: 'amd64' });
    const arm = await pushImage(reg.host, 'smol/multi', 'arm64', [filesLayer({ arch: 'arm64\n' })], { format: 'oci', architecture: 'arm64' });
    const index = await pushIndex(reg.host, 'smol/multi', 'v1', [{ image: arm, architecture: 'arm64' }, { image: amd, architecture: 'amd64' }], { format: 'oci' });
    const r = await pullImage(`${reg.host}/smol/multi:v1`, assets, { env });
    expect(r).toMatchObject({ indexDigest: index, manifestDigest: amd.digest, platform: 'linux/amd64' });
    await withRawBase(r.image!.basePath, async (read) => expect(await read('/arch')).toBe('amd64\n'));
    await pushIndex(reg.host, 'smol/multi', 'armonly', [{ image: arm, architecture: 'arm64' }]);
    const err = await pullImage(`${reg.host}/smol/multi:armonly`, assets, { env }).catch((e: unknown) => e) as { exitCode: number; message: string };
    expect(err.exitCode).toBe(66);
    expect(err.message).toMatch(/has no linux\/amd64 image \(it has: linux\/arm64\)/);
    const single = await pullImage(`${reg.host}/smol/multi:arm64`, assets, { env }).catch((e: unknown) => e) as { exitCode: number; message: string };
    expect(single.exitCode).toBe(66);
    expect(single.message).toContain('is a linux/arm64 image; this host runs linux/amd64 guests');
    expect(await readRef(assets, `${reg.host}/smol/multi:arm64`)).toBeNull();
  });

  it('applies zstd and uncompressed OCI layers', async () => {
    await pushImage(reg.host, 'smol/zstd', 'v1', [filesLayer({ 'z/a.txt': 'zstd layer\n', 'z/b.txt': 'b\n' }), async (d) => {
      await filesLayer({ 'z/.wh.b.txt': '', 'plain.txt': 'plain\n' })(d);
    }], { format: 'oci', compression: ['zstd', 'none'] });
    const r = await pullImage(`${reg.host}/smol/zstd:v1`, assets, { env });
    await withRawBase(r.image!.basePath, async (read) => {
      expect(await read('/z/a.txt')).toBe('zstd layer\n');
      expect(await read('/z/b.txt')).toBeNull();
      expect(await read('/plain.txt')).toBe('plain\n');
    });
  });

  it('refuses a blob whose bytes do not match its digest: exit 76, nothing cached', async () => {
    const pushed = await pushImage(reg.host, 'smol/corrupt', 'v1', [filesLayer({ 'c.txt': 'the real bytes\n' })], { compression: 'none' });
    const digest = pushed.layers[0].digest.slice(7);
    const data = path.join(reg.dir, 'data/docker/registry/v2/blobs/sha256', digest.slice(0, 2), digest, 'data');
    const orig = await readFile(data);
    await writeFile(data, Buffer.from(orig.toString('latin1').replace('the real bytes', 'the fake bytes'), 'latin1'));
    const r = await cli(['image', 'pull', `${reg.host}/smol/corrupt:v1`]);
    expect(r.code, r.stderr).toBe(76);
    expect(r.stderr).toContain(`blob sha256:${digest}`);
    const after = await blobsIn(assets);
    expect(after).not.toContain(digest);
    expect(after.filter((n) => n.startsWith('.tmp-'))).toEqual([]);
    expect(await readRef(assets, parseImageReference(`${reg.host}/smol/corrupt:v1`).canonical)).toBeNull();
  });

  it('refuses a manifest that is not JSON (exit 76) and names a missing tag (exit 66)', async () => {
    const bad = await cli(['image', 'pull', `${proxy.host}/smol/broken:v1`]);
    expect(bad.code, bad.stderr).toBe(76);
    expect(bad.stderr).toMatch(/manifest for .*smol\/broken:v1 is not a JSON object/);
    const missing = await cli(['image', 'pull', `${reg.host}/smol/two:nope`]);
    expect(missing.code, missing.stderr).toBe(66);
    expect(missing.stderr).toContain(`pull ${reg.host}/smol/two:nope`);
    expect(missing.stderr).toMatch(/not found/);
  });

  it('--offline uses only the cache and names what is missing', async () => {
    const miss = await cli(['image', 'pull', '--offline', `${reg.host}/smol/never:v1`]);
    expect(miss.code).toBe(66);
    expect(miss.stderr).toContain(`${reg.host}/smol/never:v1 is not in the local image cache (offline)`);
    const ok = await cli(['image', 'pull', '--offline', '--json', `${reg.host}/smol/two:v1`]);
    expect(ok.code, ok.stderr).toBe(0);
    expect(JSON.parse(ok.stdout)).toMatchObject({ fetchedBlobs: 0, ref: `${reg.host}/smol/two:v1` });
    // a blob gone from the cache is named
    const rec = (await readRef(assets, `${reg.host}/smol/two:v1`))!;
    await rm(path.join(assets, 'images/blobs/sha256', rec.layers[1].digest.slice(7)));
    const partial = await cli(['image', 'pull', '--offline', '--no-build', `${reg.host}/smol/two:v1`]);
    expect(partial.code).toBe(66);
    expect(partial.stderr).toContain(rec.layers[1].digest);
    expect((await cli(['image', 'pull', '--no-build', `${reg.host}/smol/two:v1`])).code).toBe(0); // fetches just that one back
  });

  it('a pull killed with -9 leaves no blob counted as present, and the next pull completes', async () => {
    const big = Buffer.alloc(3 << 20);
    for (let i = 0; i < big.length; i += 4096) big.write(`${i}\n`, i);
    const pushed = await pushImage(reg.host, 'smol/big', 'v1', [filesLayer({ 'big.bin': big.toString('latin1') })], { compression: 'none' });
    const slow = await startProxy(reg.host, { blobDelayMs: 30 });
    try {
      const { spawn } = await import('node:child_process');
      const { cliEnv, smolBin } = await import('../../helpers/cli.js');
      const child = spawn(process.execPath, [smolBin, 'image', 'pull', `${slow.host}/smol/big:v1`], { env: cliEnv({ home: path.join(tmp, 'home'), env: { SMOL_ASSETS: assets, DOCKER_CONFIG: path.join(tmp, 'docker') } }), stdio: 'ignore' });
      const layer = pushed.layers[0].digest.slice(7);
      const deadline = Date.now() + 60_000;
      while (!(await blobsIn(assets)).some((n) => n.startsWith(`.tmp-${child.pid}-`) && n.endsWith(layer))) {
        if (Date.now() > deadline) throw new Error('the pull never started writing the layer');
        await new Promise((r) => setTimeout(r, 50));
      }
      await new Promise((r) => setTimeout(r, 300));
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
      const left = await blobsIn(assets);
      expect(left).not.toContain(layer);
      expect(left.some((n) => n.startsWith(`.tmp-${child.pid}-`))).toBe(true); // the half blob, under a temp name only
      const r = await pullImage(`${reg.host}/smol/big:v1`, assets, { env, build: false });
      expect(r.layers[0].cached).toBe(false);
      const after = await blobsIn(assets);
      expect(after).toContain(layer);
      expect(after.some((n) => n.startsWith(`.tmp-${child.pid}-`))).toBe(false); // swept: its process is gone
      expect((await stat(path.join(assets, 'images/blobs/sha256', layer))).size).toBe(pushed.layers[0].size);
    } finally {
      await slow.stop();
    }
  });

  it('lists, removes and prunes through the CLI', async () => {
    const ls = await cli(['image', 'ls', '--json']);
    expect(ls.code, ls.stderr).toBe(0);
    const images = JSON.parse(ls.stdout) as { ref: string; kind: string; built: boolean; size: number }[];
    expect(images).toEqual(expect.arrayContaining([expect.objectContaining({ ref: `${reg.host}/smol/two:v1`, kind: 'registry', built: true })]));
    expect(images.every((i) => i.size > 0)).toBe(true);
    const two = (await listImages({ assets, home: path.join(tmp, 'home') })).find((i) => i.ref === `${reg.host}/smol/two:v1`)!;
    const rm1 = await cli(['image', 'rm', '--json', `${reg.host}/smol/two:v1`]);
    expect(rm1.code, rm1.stderr).toBe(0);
    // the digest-pinned reference of the same image keeps its base and blobs
    expect(JSON.parse(rm1.stdout).removed).toEqual([`${reg.host}/smol/two:v1`]);
    expect((await listImages({ assets, home: path.join(tmp, 'home') })).find((i) => i.id === two.id)).toMatchObject({ built: true, ref: expect.stringContaining('@sha256:') });
    expect((await cli(['image', 'rm', `${reg.host}/smol/two:v1`])).code).toBe(66);
    const rm2 = await cli(['image', 'rm', '--json', `${reg.host}/smol/two@${two.digest}`]);
    expect(JSON.parse(rm2.stdout).removed).toEqual(expect.arrayContaining([two.id, two.digest]));
    const beforeDry = (await cli(['image', 'ls', '--json'])).stdout;
    const dry = await cli(['image', 'prune', '--all', '--dry-run', '--json']);
    expect(dry.code).toBe(0);
    const plan = JSON.parse(dry.stdout) as { removed: { what: string }[]; bytes: number };
    expect(plan.removed.length).toBeGreaterThan(0);
    expect(plan.bytes).toBeGreaterThan(0);
    expect((await cli(['image', 'ls', '--json'])).stdout).toBe(beforeDry); // a dry run removes nothing
    const done = await cli(['image', 'prune', '--all', '--json']);
    expect(JSON.parse(done.stdout).bytes).toBe(plan.bytes);
    expect(JSON.parse((await cli(['image', 'ls', '--json'])).stdout)).toEqual([]);
    expect((await blobsIn(assets)).filter((n) => !n.startsWith('.'))).toEqual([]);
  });
});
