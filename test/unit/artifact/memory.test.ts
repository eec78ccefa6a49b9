import { randomBytes } from 'node:crypto';
import { open, readFile, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { canResume, extractArtifact, packArtifact, prepareFromArtifact, type ArtifactManifest } from '../../../src/artifact/index.js';
import { makeInputs, tempDir, type Inputs } from './helpers.js';

const resume = { qemuVersion: '7.2.22', qemuBuild: 'sha256:abc', accelerator: 'tcg' as const, cpuModel: 'max', machineType: 'microvm' };

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

  it('canResume: only on the recorded QEMU build, accelerator, CPU model and machine type', () => {
    const host = { qemuBuild: 'sha256:abc', accelerator: 'tcg' as const, cpuModel: 'max', machineType: 'microvm' };
    expect(canResume(manifest, host)).toEqual({ ok: true });
    expect(canResume(manifest, { ...host, accelerator: 'kvm' })).toEqual({ ok: false, reason: 'saved state needs accelerator tcg, this host has kvm' });
    expect(canResume(manifest, { ...host, qemuBuild: 'sha256:def' })).toMatchObject({ ok: false, reason: expect.stringMatching(/QEMU build/) });
    expect(canResume({ ...manifest, resume: undefined }, host)).toEqual({ ok: false, reason: 'the artifact carries no memory state' });
  });

  it('prepareFromArtifact resumes on a matching host and cold-boots with a notice elsewhere', async () => {
    const cacheDir = path.join(dir, 'cache');
    const host = { qemuBuild: 'sha256:abc', accelerator: 'tcg' as const, cpuModel: 'max', machineType: 'microvm' };
    const warm = await prepareFromArtifact(out, { cacheDir, host });
    expect(warm).toMatchObject({ resume: true, extracted: true });
    expect(warm.notice).toBeUndefined();
    const cold = await prepareFromArtifact(out, { cacheDir, host: { ...host, accelerator: 'kvm' } });
    expect(cold).toMatchObject({ resume: false, extracted: false, dir: warm.dir });
    expect(cold.notice).toMatch(/cold-booting .*saved state needs accelerator tcg, this host has kvm/);
  });
});
