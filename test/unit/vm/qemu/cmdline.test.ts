import { describe, expect, it } from 'vitest';
import { BASE_CMDLINE, buildCmdline } from '../../../../src/vm/qemu/cmdline.js';

describe('buildCmdline', () => {
  it('starts from the trimmed, measured parameter list', () => {
    const c = buildCmdline({ accel: 'kvm' }).split(' ');
    expect(c).toEqual([...BASE_CMDLINE]);
    expect(c).toEqual(expect.arrayContaining(['console=ttyS0', 'quiet', 'cryptomgr.notests', 'mitigations=off', 'nokaslr', 'random.trust_cpu=on']));
  });

  it('adds the host TSC rate under TCG only', () => {
    expect(buildCmdline({ accel: 'tcg', tscKhz: 2095983 })).toContain('tsc_early_khz=2095983');
    expect(buildCmdline({ accel: 'kvm', tscKhz: 2095983 })).not.toContain('tsc_early_khz');
    expect(buildCmdline({ accel: 'tcg', tscKhz: null })).not.toContain('tsc_early_khz');
  });

  it('passes /init its switches', () => {
    const c = buildCmdline({ accel: 'tcg', net: true, root: 'vda', ports: 4, hostname: 'box-1', test: { marker: 'm1', sleepSeconds: 3 } }).split(' ');
    expect(c).toEqual(expect.arrayContaining(['smol.net=1', 'smol.root=vda', 'smol.ports=4', 'smol.hostname=box-1', 'smol.test=m1', 'smol.testsleep=3']));
    expect(buildCmdline({ accel: 'tcg', vsock: true, ports: 4 })).toContain('smol.vsock=1');
    expect(buildCmdline({ accel: 'tcg', virtiofs: true })).toContain('smol.virtiofs=1');
    expect(buildCmdline({ accel: 'tcg', vsock: true, ports: 4 })).not.toContain('smol.ports');
  });

  it('refuses values that would smuggle extra parameters', () => {
    expect(() => buildCmdline({ accel: 'tcg', hostname: 'a init=/bin/sh' })).toThrow(/hostname/);
    expect(() => buildCmdline({ accel: 'tcg', root: 'vda;x' })).toThrow(/root/);
    expect(() => buildCmdline({ accel: 'tcg', extra: ['loglevel=7', 'x y'] })).toThrow(/extra/);
  });
});
