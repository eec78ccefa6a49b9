import { randomBytes } from 'node:crypto';
import { readdir, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { run, spawn } from '../../../src/util/exec.js';
import { makeInputs, tempDir, type Inputs } from '../../unit/artifact/helpers.js';

const here = path.dirname(new URL(import.meta.url).pathname);
const smol = (args: string[], env: Record<string, string> = {}) =>
  run(process.execPath, ['--import', 'tsx', path.join(here, 'pack-cli.ts'), 'pack', ...args], { allowFailure: true, env });

// each case starts several tsx subprocesses (seconds each on a busy 2-core box), hence the long timeout
describe('smol pack (CLI, as a subprocess)', { timeout: 300_000 }, () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let inputs: Inputs;
  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
    inputs = await makeInputs(dir, { disk: true });
  });
  afterAll(() => cleanup());
  const files = () => ['--kernel', inputs.kernel, '--initrd', inputs.initrd, '--disk', inputs.disk!];

  it('keygen → create --sign (twice, SOURCE_DATE_EPOCH) → inspect --json → verify --key', async () => {
    const kg = await smol(['keygen', '-o', path.join(dir, 'k'), '--json']);
    expect(kg.exitCode).toBe(0);
    const keyId = (JSON.parse(kg.stdout) as { keyId: string }).keyId;
    expect((await stat(path.join(dir, 'k.key'))).mode & 0o777).toBe(0o600);
    expect(await readFile(path.join(dir, 'k.pub'), 'utf8')).toMatch(/^-----BEGIN PUBLIC KEY-----/);
    expect((await smol(['keygen', '-o', path.join(dir, 'k')])).exitCode).toBe(67);

    const env = { SOURCE_DATE_EPOCH: '1767225600' };
    for (const out of ['a', 'b']) {
      const r = await smol(['create', ...files(), '-o', path.join(dir, `${out}.smolmachine`), '--sign', path.join(dir, 'k.key')], env);
      expect(r.exitCode, r.stderr).toBe(0);
      expect(r.stdout).toMatch(new RegExp(`packed .*${out}\\.smolmachine .*signed by ${keyId}`));
    }
    // Buffer.equals: toEqual walks a buffer element by element, seconds per MiB
    expect((await readFile(path.join(dir, 'a.smolmachine'))).equals(await readFile(path.join(dir, 'b.smolmachine'))), 'byte-identical').toBe(true);

    const ins = await smol(['inspect', path.join(dir, 'a.smolmachine'), '--json']);
    const info = JSON.parse(ins.stdout) as { signed: boolean; keyId: string; manifest: { createdAt: string; entries: { name: string }[] } };
    expect(info).toMatchObject({ signed: true, keyId, manifest: { createdAt: '2026-01-01T00:00:00.000Z' } });
    expect(info.manifest.entries.map((e) => e.name)).toEqual(['disk.qcow2', 'kernel', 'initrd']);

    const v = await smol(['verify', path.join(dir, 'a.smolmachine'), '--key', path.join(dir, 'k.pub')]);
    expect(v.exitCode).toBe(0);
    expect(v.stdout).toMatch(/trusted \(key [0-9a-f]{16}\)/);
    expect(v.stdout).toMatch(/verified: .* MB\/s/);
  });

  it('verify exits 76 and names the corrupt entry; --json carries per-entry results', async () => {
    const good = path.join(dir, 'v.smolmachine');
    expect((await smol(['create', ...files(), '-o', good])).exitCode).toBe(0);
    const b = await readFile(good);
    const info = JSON.parse((await smol(['inspect', good, '--json'])).stdout) as { manifest: { entries: { stored: { size: number } }[] } };
    const manifestLength = Number(b.readBigUInt64LE(b.length - 160 + 24));
    const kernelData = 512 + Math.ceil(manifestLength / 512) * 512 + 512 + Math.ceil(info.manifest.entries[0].stored.size / 512) * 512 + 512;
    b[kernelData + 3] ^= 0xff;
    const bad = path.join(dir, 'bad.smolmachine');
    await writeFile(bad, b);
    const r = await smol(['verify', bad]);
    expect(r.exitCode).toBe(76);
    expect(r.stdout).toMatch(/kernel\s+kernel\s+.*CORRUPT/);
    expect(r.stderr).toMatch(/entry kernel is corrupt/);
    const j = await smol(['verify', bad, '--json']);
    expect(j.exitCode).toBe(76);
    expect(JSON.parse(j.stdout)).toMatchObject({ ok: false, failed: ['kernel'] });
    expect(JSON.parse(j.stderr)).toMatchObject({ error: { type: 'ArtifactError', exitCode: 76 } });
  });

  it('create: --from-vm names a missing machine (66); bad option combinations are validation errors (65)', async () => {
    const vm = await smol(['create', '--from-vm', 'web', '-o', path.join(dir, 'vm.smolmachine')], { SMOL_HOME: path.join(dir, 'home') });
    expect(vm.exitCode).toBe(66);
    expect(vm.stderr).toMatch(/no machine named "web"/);
    const both = await smol(['create', '--from-vm', 'web', ...files(), '-o', path.join(dir, 'x.smolmachine')]);
    expect(both.exitCode).toBe(65);
    expect(both.stderr).toMatch(/give exactly one of --from-vm, --image, -s or --kernel\/--initrd \(got --from-vm, --kernel\)/);
    const mem = await smol(['create', ...files(), '--with-memory', '-o', path.join(dir, 'y.smolmachine')]);
    expect(mem.stderr).toMatch(/--with-memory needs a running machine/);
  });

  it('kill -9 during pack leaves no file at the output path; a rerun succeeds', async () => {
    const big = path.join(dir, 'big.raw');
    await writeFile(big, randomBytes(96 << 20));
    const out = path.join(dir, 'killed.smolmachine');
    const { child } = await spawn(process.execPath, ['--import', 'tsx', path.join(here, 'pack-cli.ts'), 'pack', 'create', '--kernel', inputs.kernel, '--initrd', inputs.initrd, '--disk', big, '-o', out]);
    // kill once packing is under way (its staging directory exists), before it can finish
    for (let i = 0; i < 400 && !(await readdir(dir)).some((n) => n.startsWith('.killed.smolmachine.')); i++) await new Promise((r) => setTimeout(r, 25));
    child.kill('SIGKILL');
    await child;
    expect((await readdir(dir)).some((n) => n.startsWith('.killed.smolmachine.'))).toBe(true);
    await expect(stat(out)).rejects.toMatchObject({ code: 'ENOENT' });
    const again = await smol(['create', '--kernel', inputs.kernel, '--initrd', inputs.initrd, '--disk', big, '-o', out]);
    expect(again.exitCode, again.stderr).toBe(0);
    expect((await smol(['verify', out])).exitCode).toBe(0);
  });

  it('several processes racing on one cache extract once and share the result', async () => {
    const file = path.join(dir, 'race.smolmachine');
    expect((await smol(['create', ...files(), '-o', file])).exitCode).toBe(0);
    const cache = path.join(dir, 'cache');
    const rs = await Promise.all([1, 2, 3].map(() => run(process.execPath, ['--import', 'tsx', path.join(here, 'ensure-child.ts'), file, cache])));
    const parsed = rs.map((r) => JSON.parse(r.stdout) as { extracted: boolean; dir: string });
    expect(parsed.filter((p) => p.extracted)).toHaveLength(1);
    expect(new Set(parsed.map((p) => p.dir)).size).toBe(1);
    expect((await readdir(cache)).filter((n) => !n.endsWith('.lock'))).toHaveLength(1);
  });
});
