import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { bootProbe } from '../../../src/vm/qemu/kvm-probe.js';
import { accelFromEnv, chooseAccel } from '../../../src/vm/qemu/select.js';
import { findKernel } from '../../../src/vm/kernel/index.js';
import { findQemu } from '../../../src/vm/qemu/detect.js';
import { UserError } from '../../../src/errors/index.js';
import { sharedHome } from '../../helpers/cli.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'kvm-probe-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

async function guest(): Promise<{ qemu: string; kernel: string }> {
  const [q, k] = await Promise.all([findQemu(), findKernel(sharedHome())]);
  if (!q || !k) throw new Error('the test setup provides QEMU and the guest kernel');
  return { qemu: q.path, kernel: k.vmlinux };
}

describe('boot probe (real QEMU, real guest kernel)', () => {
  it('sees the kernel banner of a guest that runs (TCG runs everywhere)', async () => {
    const { qemu, kernel } = await guest();
    const r = await bootProbe(qemu, kernel, 'tcg', 60_000);
    expect(r).toMatchObject({ ok: true });
    expect(r.ms).toBeGreaterThan(0);
  }, 90_000);

  it('reports QEMU\'s own error when the guest cannot start', async () => {
    const { qemu } = await guest();
    const r = await bootProbe(qemu, path.join(tmp, 'no-such-kernel'), 'tcg', 60_000);
    expect(r.ok).toBe(false);
    expect(r.reason).toMatch(/^QEMU failed to run a TCG guest: .*no-such-kernel/);
  }, 90_000);

  it('gives up on a guest that prints nothing in time, and leaves no QEMU behind', async () => {
    const { qemu, kernel } = await guest();
    const r = await bootProbe(qemu, kernel, 'tcg', 1);
    expect(r).toEqual({ ok: false, reason: 'a TCG guest printed nothing within 0.001 s' });
  }, 30_000);

  it('picks TCG on this host unless a KVM guest really starts', async () => {
    const { qemu, kernel } = await guest();
    const notices: string[] = [];
    const accel = await chooseAccel(qemu, (l) => notices.push(l));
    const kvmWorks = fs.existsSync('/dev/kvm') && (await bootProbe(qemu, kernel, 'kvm')).ok;
    expect(accel).toBe(kvmWorks ? 'kvm' : 'tcg');
    expect(notices).toHaveLength(kvmWorks ? 0 : 1);
  }, 60_000);
});

describe('SMOL_ACCEL', () => {
  it('forces an accelerator, leaves auto to the probe, and refuses anything else', () => {
    expect(accelFromEnv({ SMOL_ACCEL: 'kvm' })).toBe('kvm');
    expect(accelFromEnv({ SMOL_ACCEL: 'tcg' })).toBe('tcg');
    expect(accelFromEnv({ SMOL_ACCEL: 'auto' })).toBeUndefined();
    expect(accelFromEnv({})).toBeUndefined();
    expect(() => accelFromEnv({ SMOL_ACCEL: 'hvf' })).toThrow(UserError);
  });
});
