/** The resume decision as the CLI and the start hook make it: the manifest against this host and the machine's spec. */
import { afterEach, describe, expect, it } from 'vitest';
import type { ArtifactManifest } from '../../../src/artifact/index.js';
import { mergeSpec } from '../../../src/smolfile/merge.js';
import { findQemu } from '../../../src/vm/qemu/detect.js';
import { qemuBuild, resumeNotice } from '../../../src/vm/resume.js';
import type { MachineService } from '../../../src/vm/service.js';

const fakeSvc = (fork = true) => ({
  engine: { fork: fork ? { identity: async (memoryMiB: number) => ({ qemu: '7.2.22', accel: 'tcg' as const, cpu: 'max', memoryMiB }) } : undefined },
}) as unknown as MachineService;

async function manifest(): Promise<ArtifactManifest> {
  return {
    resources: { cpus: 1, memoryMiB: 256 },
    resume: { qemuVersion: '7.2.22', qemuBuild: await qemuBuild(), accelerator: 'tcg', cpuModel: 'max', machineType: 'microvm', memoryBytes: 256 << 20, net: false, agentPorts: 4, agentPort: 3 },
    entries: [{ name: 'disk.qcow2', kind: 'disk', format: 'qcow2', size: 1, sha256: '0'.repeat(64), virtualSize: 64 << 20, stored: { compression: 'zstd', size: 1, sha256: '0'.repeat(64) } }],
  } as unknown as ArtifactManifest;
}
const spec = (o: Parameters<typeof mergeSpec>[2] = {}) => mergeSpec(undefined, undefined, { image: '/x/m.smolmachine', memory: 256, cpus: 1, ...o });

afterEach(() => { delete process.env.SMOL_TEST_RESUME_HOST; });

describe('resumeNotice', () => {
  it('is null for a machine of the packed shape on the same QEMU', async () => {
    // "QEMU emulator version 7.2.22 (Debian …)" is kept from the version on
    expect(await qemuBuild()).toMatch((await findQemu()) ? /^\d+\.\d+\.\d+/ : /^unknown$/);
    expect(await resumeNotice(fakeSvc(), 'm.smolmachine', await manifest(), spec())).toBeNull();
  });

  it('names what differs: the machine shape from the spec, the host from the engine', async () => {
    const m = await manifest();
    expect(await resumeNotice(fakeSvc(), 'm.smolmachine', m, spec({ net: true })))
      .toBe('cold-booting m.smolmachine: its saved memory state cannot be restored here (saved state needs networking off, this machine has on)');
    expect(await resumeNotice(fakeSvc(), 'm.smolmachine', m, spec({ memory: 512 }))).toMatch(/memory \(MiB\) 256, this machine has 512\)$/);
    expect(await resumeNotice(fakeSvc(false), 'm.smolmachine', m, spec())).toMatch(/this VM backend cannot restore saved memory state/);
    expect(await resumeNotice(fakeSvc(), 'm.smolmachine', { ...m, resume: undefined }, spec())).toBeNull();
  });

  it('SMOL_TEST_RESUME_HOST (TEST ONLY) overrides this host\'s identity', async () => {
    process.env.SMOL_TEST_RESUME_HOST = '{"cpuModel":"host"}';
    expect(await resumeNotice(fakeSvc(), 'm.smolmachine', await manifest(), spec())).toMatch(/saved state needs CPU model max, this host has host\)$/);
  });
});
