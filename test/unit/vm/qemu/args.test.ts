import { describe, expect, it } from 'vitest';
import { buildQemuArgs, opt, sandboxArgs, tcgCpu, tcgTbMiB, type QemuArgsInput } from '../../../../src/vm/qemu/args.js';

const base: QemuArgsInput = {
  accel: 'tcg', kernelPath: '/k/vmlinux', initrdPath: '/k/initrd.cpio', cmdline: 'console=ttyS0',
  memoryMiB: 256, cpus: 1, channel: { kind: 'serial', socketPaths: ['/r/agent0.sock'] },
  qmpSocketPath: '/r/qmp.sock', consoleFd: 3,
};

/** The value following each occurrence of `flag`. */
const values = (a: string[], flag: string) => a.flatMap((x, i) => (x === flag ? [a[i + 1]] : []));

describe('buildQemuArgs', () => {
  it('builds a headless microvm booting the PVH kernel with the initramfs and cmdline', () => {
    const a = buildQemuArgs(base);
    expect(values(a, '-machine')).toEqual(['microvm,rtc=on,isa-serial=on']);
    expect(values(a, '-kernel')).toEqual(['/k/vmlinux']);
    expect(values(a, '-initrd')).toEqual(['/k/initrd.cpio']);
    expect(values(a, '-append')).toEqual(['console=ttyS0']);
    expect(a).toEqual(expect.arrayContaining(['-nodefaults', '-no-user-config', '-no-reboot']));
    expect(values(a, '-display')).toEqual(['none']);
    expect(values(a, '-m')).toEqual(['256M']);
    expect(values(a, '-serial')).toEqual(['chardev:con0']);
    expect(values(a, '-chardev')).toContain('file,id=con0,path=/dev/fdset/1,append=on');
    expect(values(a, '-qmp')).toEqual(['unix:/r/qmp.sock,server=on,wait=off']);
  });

  it('uses TCG without -cpu host, and KVM with it', () => {
    const tcg = buildQemuArgs(base);
    expect(values(tcg, '-accel')).toEqual(['tcg,tb-size=256']); // not QEMU's 1 GiB translation cache
    expect(values(tcg, '-cpu')).not.toContain('host');
    const kvm = buildQemuArgs({ ...base, accel: 'kvm' });
    expect(values(kvm, '-accel')).toEqual(['kvm']);
    expect(values(kvm, '-cpu')).toEqual(['host']);
  });

  it('publishes ports with hostfwd, and restricts a ports-only NIC to them', () => {
    const a = buildQemuArgs({ ...base, nic: { restrict: true, hostfwd: [{ protocol: 'tcp', address: '127.0.0.1', host: 8080, guest: 80 }, { protocol: 'udp', address: '0.0.0.0', host: 5353, guest: 53 }] } });
    expect(values(a, '-netdev')).toEqual(['user,id=net0,ipv6=off,restrict=on,hostfwd=tcp:127.0.0.1:8080-:80,hostfwd=udp:0.0.0.0:5353-:53']);
    expect(values(a, '-device')).toContain('virtio-net-device,netdev=net0');
    expect(values(a, '-nic')).toEqual([]);
  });

  it('has no NIC unless networking is asked for, then user-mode virtio-net', () => {
    const off = buildQemuArgs(base);
    expect(values(off, '-nic')).toEqual(['none']);
    expect(off.join(' ')).not.toContain('virtio-net');
    const on = buildQemuArgs({ ...base, net: true });
    expect(values(on, '-nic')).toEqual([]);
    expect(values(on, '-netdev')).toEqual(['user,id=net0,ipv6=off']);
    expect(values(on, '-device')).toContain('virtio-net-device,netdev=net0');
  });

  it('names one virtio-serial port per socket, smol.0 first', () => {
    const a = buildQemuArgs({ ...base, channel: { kind: 'serial', socketPaths: ['/r/a0.sock', '/r/a1.sock'] } });
    expect(values(a, '-device')).toEqual(expect.arrayContaining([
      'virtio-serial-device', 'virtserialport,chardev=ch0,name=smol.0', 'virtserialport,chardev=ch1,name=smol.1',
    ]));
    expect(values(a, '-chardev')).toContain('socket,id=ch1,path=/r/a1.sock,server=on,wait=off');
  });

  it('uses vhost-vsock-device for a vsock channel and rejects reserved CIDs', () => {
    const a = buildQemuArgs({ ...base, channel: { kind: 'vsock', cid: 7 } });
    expect(values(a, '-device')).toContain('vhost-vsock-device,guest-cid=7');
    expect(a.join(' ')).not.toContain('virtio-serial');
    expect(() => buildQemuArgs({ ...base, channel: { kind: 'vsock', cid: 2 } })).toThrow(/cid/);
  });

  it('attaches disks as virtio-blk-device with stable drive ids', () => {
    const a = buildQemuArgs({ ...base, disks: [{ path: '/m/disk.qcow2' }, { path: '/m/data.raw', format: 'raw', readOnly: true, id: 'data' }] });
    expect(values(a, '-drive')).toEqual([
      'id=disk0,file=/m/disk.qcow2,format=qcow2,if=none,cache=writeback,werror=report,rerror=report',
      'id=data,file=/m/data.raw,format=raw,if=none,cache=writeback,werror=report,rerror=report,read-only=on',
    ]);
    expect(values(a, '-device')).toEqual(expect.arrayContaining(['virtio-blk-device,drive=disk0', 'virtio-blk-device,drive=data']));
  });

  it('maps RAM from a shared file for forkable machines and can wait for an incoming migration', () => {
    const a = buildQemuArgs({ ...base, memoryBackend: { path: '/dev/shm/smol-x.mem', share: true }, incomingDefer: true });
    expect(values(a, '-object')).toEqual(['memory-backend-file,id=mem,size=256M,mem-path=/dev/shm/smol-x.mem,share=on']);
    expect(values(a, '-machine')).toEqual(['microvm,rtc=on,isa-serial=on,memory-backend=mem']);
    expect(values(a, '-incoming')).toEqual(['defer']);
    const clone = buildQemuArgs({ ...base, memoryBackend: { path: '/dev/shm/smol-x.mem', share: false } });
    expect(values(clone, '-object')[0]).toMatch(/share=off$/);
  });

  it('runs QEMU under its seccomp sandbox unless SMOL_QEMU_SANDBOX=off', () => {
    expect(values(buildQemuArgs(base), '-sandbox')).toEqual(['on,obsolete=deny,resourcecontrol=deny']);
    expect(sandboxArgs({ SMOL_QEMU_SANDBOX: 'off' })).toEqual([]);
  });

  it('daemonizes with a pidfile only when asked', () => {
    expect(buildQemuArgs(base)).not.toContain('-daemonize');
    const a = buildQemuArgs({ ...base, daemonize: true, pidfilePath: '/m/qemu.pid' });
    expect(a).toContain('-daemonize');
    expect(values(a, '-pidfile')).toEqual(['/m/qemu.pid']);
  });

  it('escapes commas in paths so they cannot inject options', () => {
    expect(opt('/a,b/c')).toBe('/a,,b/c');
    const a = buildQemuArgs({ ...base, qmpSocketPath: '/r,x/qmp.sock' });
    expect(values(a, '-qmp')).toEqual(['unix:/r,,x/qmp.sock,server=on,wait=off']);
  });

  it('writes the console into the keeper\'s pipe, never a file of its own', () => {
    // a guest may write its serial port forever: only the keeper (console-keeper.ts) bounds what reaches the disk
    const a = buildQemuArgs(base);
    expect(values(a, '-add-fd')).toEqual(['fd=3,set=1,opaque=console']);
    const chardev = values(a, '-chardev').filter((c) => c.includes('id=con0'));
    expect(chardev).toEqual(['file,id=con0,path=/dev/fdset/1,append=on']); // append: QEMU cannot truncate a pipe
    expect(() => buildQemuArgs({ ...base, consoleFd: 1 })).toThrow(/consoleFd/);
  });

  it('rejects nonsensical sizes', () => {
    expect(() => buildQemuArgs({ ...base, memoryMiB: 16 })).toThrow(/memoryMiB/);
    expect(() => buildQemuArgs({ ...base, cpus: 0 })).toThrow(/cpus/);
    expect(() => buildQemuArgs({ ...base, channel: { kind: 'serial', socketPaths: [] } })).toThrow(/at least one/);
  });
});

describe('TCG translation cache size', () => {
  it('is 256 MiB unless SMOL_TCG_TB_MIB names a sane size', () => {
    expect(tcgTbMiB({})).toBe(256);
    expect(tcgTbMiB({ SMOL_TCG_TB_MIB: '64' })).toBe(64);
    expect(tcgTbMiB({ SMOL_TCG_TB_MIB: '0' })).toBe(256);
    expect(tcgTbMiB({ SMOL_TCG_TB_MIB: 'lots' })).toBe(256);
  });
});

describe('TCG CPU model', () => {
  it('hides ERMS and FSRM (TCG runs rep movsb a byte at a time) unless SMOL_TCG_CPU says otherwise', () => {
    expect(tcgCpu({})).toBe('max,erms=off,fsrm=off');
    expect(tcgCpu({ SMOL_TCG_CPU: 'max' })).toBe('max');
    const a = buildQemuArgs({
      accel: 'tcg', kernelPath: '/k', initrdPath: '/i', cmdline: 'c', memoryMiB: 256, cpus: 1,
      channel: { kind: 'serial', socketPaths: ['/r/a.sock'] }, qmpSocketPath: '/r/q.sock', consoleFd: 3,
    });
    expect(a[a.indexOf('-cpu') + 1]).toBe(tcgCpu());
  });
});
