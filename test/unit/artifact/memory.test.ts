import { randomBytes } from 'node:crypto';
import { open, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canResume, extractArtifact, packArtifact, prepareFromArtifact, verifyArtifact, type ArtifactManifest, type HostQemu } from '../../../src/artifact/index.js';
import { makeInputs, tempDir, type Inputs } from './helpers.js';

const resume = { qemuVersion: '7.2.22', qemuBuild: '7.2.22 (Debian 1)', accelerator: 'tcg' as const, cpuModel: 'max', machineType: 'microvm', net: false, agentPorts: 4, agentPort: 3 };
const host: HostQemu = {
  qemuVersion: '7.2.22', qemuBuild: '7.2.22 (Debian 1)', accelerator: 'tcg', cpuModel: 'max', machineType: 'microvm', memoryMiB: 64, cpus: 1, net: false, agentPorts: 4,
};

describe('memory-carrying artifacts', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let inputs: Inputs;
  let ram: string;
  let state: string;
  let manifest: ArtifactManifest;
  let out: string;
  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
    inputs = await makeInputs(dir, { disk: true });
    // a 64 MiB guest RAM file that is mostly zeros, with a few touched pages, as memory-backend-file leaves it
    ram = path.join(dir, 'ram');
    const fh = await open(ram, 'w');
    await fh.truncate(64 << 20);
    for (const off of [0, 5 << 20, 33 << 20]) await fh.write(randomBytes(8192), 0, 8192, off);
    await fh.close();
    state = path.join(dir, 'state');
    await writeFile(state, randomBytes(62_000));
    out = path.join(dir, 'warm.smolmachine');
    manifest = (await packArtifact({ ...inputs, memory: { ram, deviceState: state, resume }, out, memoryMiB: 64 })).manifest;
  });
  afterAll(() => cleanup());

  it('records the QEMU build, accelerator, CPU model and machine type the state needs', () => {
    expect(manifest.resume).toEqual({ ...resume, memoryBytes: 64 << 20 });
    expect(manifest.resources.memoryMiB).toBe(64);
    expect(manifest.entries.map((e) => [e.name, e.kind, e.format])).toEqual([
      ['disk.qcow2', 'disk', 'qcow2'], ['kernel', 'kernel', 'elf'], ['initrd', 'initrd', 'cpio'],
      ['memory.ram', 'memory', 'qemu-ram'], ['device-state', 'device-state', 'qemu-migration'],
    ]);
    expect(manifest.entries.find((e) => e.kind === 'memory')!.stored.size).toBeLessThan(1 << 20);
  });

  it('extracts RAM as a sparse file with identical content', async () => {
    const x = await extractArtifact(out, path.join(dir, 'x'));
    // Buffer.equals, not toEqual: deep equality over 64 Mi elements is far too slow
    expect((await readFile(x.files.memory!)).equals(await readFile(ram))).toBe(true);
    expect((await readFile(x.files['device-state']!)).equals(await readFile(state))).toBe(true);
    const st = await stat(x.files.memory!);
    expect(st.size).toBe(64 << 20);
    expect(st.blocks * 512).toBeLessThan(4 << 20);
  });

  it('canResume: only on the recorded QEMU version and build, accelerator, CPU model, machine type and machine shape', () => {
    expect(canResume(manifest, host)).toEqual({ ok: true });
    expect(canResume(manifest, { ...host, accelerator: 'kvm' })).toEqual({ ok: false, reason: 'saved state needs accelerator tcg, this host has kvm' });
    expect(canResume(manifest, { ...host, qemuBuild: '7.2.22 (Debian 2)' })).toEqual({ ok: false, reason: 'saved state needs QEMU build 7.2.22 (Debian 1), this host has 7.2.22 (Debian 2)' });
    expect(canResume(manifest, { ...host, qemuVersion: '8.0.0' })).toMatchObject({ ok: false, reason: expect.stringMatching(/QEMU version 7\.2\.22, this host has 8\.0\.0/) });
    expect(canResume(manifest, { ...host, cpuModel: 'host' })).toMatchObject({ ok: false, reason: expect.stringMatching(/CPU model max/) });
    expect(canResume(manifest, { ...host, memoryMiB: 128 })).toEqual({ ok: false, reason: 'saved state needs memory (MiB) 64, this machine has 128' });
    expect(canResume(manifest, { ...host, cpus: 2 })).toMatchObject({ ok: false, reason: expect.stringMatching(/vCPUs 1, this machine has 2/) });
    expect(canResume(manifest, { ...host, net: true })).toMatchObject({ ok: false, reason: expect.stringMatching(/networking off, this machine has on/) });
    expect(canResume(manifest, { ...host, diskBytes: 128 << 20 })).toMatchObject({ ok: false, reason: expect.stringMatching(/disk size/) });
    expect(canResume(manifest, { ...host, diskBytes: 64 << 20 })).toEqual({ ok: true });
    expect(canResume({ ...manifest, resume: undefined }, host)).toEqual({ ok: false, reason: 'the artifact carries no memory state' });
  });

  it('refuses a RAM file whose size is not the declared memory size', async () => {
    await expect(packArtifact({ ...inputs, memory: { ram, deviceState: state, resume }, out: path.join(dir, 'bad.smolmachine'), memoryMiB: 128 }))
      .rejects.toMatchObject({ exitCode: 65, issues: [{ path: 'memoryMiB', message: expect.stringMatching(/67108864 bytes, but the machine is declared with 128 MiB/) }] });
  });

  it('verify names a tampered memory entry', async () => {
    const b = await readFile(out);
    const mem = manifest.entries.find((e) => e.kind === 'memory')!;
    // the stored memory.ram.zst data: find its tar header by name, the data follows it
    const at = b.indexOf(Buffer.from('memory.ram.zst\0')) + 512;
    expect(at).toBeGreaterThan(512);
    b[at + Math.floor(mem.stored.size / 2)] ^= 0x01;
    const bad = path.join(dir, 'tampered.smolmachine');
    await writeFile(bad, b);
    const r = await verifyArtifact(bad);
    expect(r.ok).toBe(false);
    expect(r.entries.filter((e) => !e.ok).map((e) => e.name)).toEqual(['memory.ram']);
    await expect(extractArtifact(bad, path.join(dir, 'never'))).rejects.toThrow(/^entry memory.ram (is corrupt|is not valid zstd data)/);
    await expect(stat(path.join(dir, 'never'))).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('prepareFromArtifact resumes on a matching host and cold-boots with a notice elsewhere', async () => {
    const cacheDir = path.join(dir, 'cache');
    const warm = await prepareFromArtifact(out, { cacheDir, host });
    expect(warm).toMatchObject({ resume: true, extracted: true });
    expect(warm.notice).toBeUndefined();
    const cold = await prepareFromArtifact(out, { cacheDir, host: { ...host, accelerator: 'kvm' } });
    expect(cold).toMatchObject({ resume: false, extracted: false, dir: warm.dir });
    expect(cold.notice).toMatch(/cold-booting .*saved state needs accelerator tcg, this host has kvm/);
  });
});
