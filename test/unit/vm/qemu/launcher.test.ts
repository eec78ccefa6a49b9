import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { QemuLauncher, isRunning, selectLauncher } from '../../../../src/vm/qemu/select.js';
import { kvmUsable } from '../../../../src/vm/qemu/detect.js';
import { ValidationError } from '../../../../src/errors/index.js';

const tmp = mkdtempSync(path.join(os.tmpdir(), 'launcher-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
const spec = { machineDir: tmp, kernelPath: '/nonexistent/vmlinux', initrdPath: '/nonexistent/initrd', memoryMiB: 256, cpus: 1 };

describe('launcher selection', () => {
  it('explains why KVM is unusable', async () => {
    const r = await kvmUsable(path.join(tmp, 'no-kvm'));
    expect(r).toEqual({ ok: false, reason: `${path.join(tmp, 'no-kvm')} does not exist` });
  });

  it('falls back to TCG with a one-line notice when KVM is missing', async () => {
    const notices: string[] = [];
    const kvm = await kvmUsable();
    const b = await selectLauncher({ notice: (l) => notices.push(l) });
    expect(b).toBeInstanceOf(QemuLauncher);
    // with /dev/kvm present, a boot probe decides (test/integration/vm/kvm-probe.test.ts); TCG always says why
    if (!kvm.ok) expect(b.accel).toBe('tcg');
    expect(notices.some((n) => n.startsWith('KVM unusable') && !n.includes('\n'))).toBe(b.accel === 'tcg');
  });
});

describe('QemuLauncher', () => {
  const b = new QemuLauncher({ qemuPath: 'qemu-system-x86_64', accel: 'tcg', tscKhz: 2_000_000, vhostVsock: false });

  it('refuses socket paths the kernel cannot bind, before starting anything', async () => {
    const long = path.join(tmp, 'x'.repeat(120));
    await expect(b.launch({ ...spec, runDir: long })).rejects.toBeInstanceOf(ValidationError);
  });

  it('refuses vsock when the host has no /dev/vhost-vsock', async () => {
    await expect(b.launch({ ...spec, channel: 'vsock' })).rejects.toThrow(/vhost-vsock/);
  });

  it('reports QEMU start failures as BootError with QEMU\'s reason', async () => {
    await expect(b.launch(spec)).rejects.toThrow(/boot failed: QEMU exited with 1: .*nonexistent/);
  });

  it('tells live VMM processes from others by pid, never matching a recycled pid', () => {
    expect(isRunning(process.pid, 'node')).toBe(true);
    expect(isRunning(process.pid, 'qemu-system')).toBe(false);
    expect(b.isAlive(process.pid)).toBe(false);
    expect(isRunning(2 ** 22 + 12345, 'node')).toBe(false);
  });
});
