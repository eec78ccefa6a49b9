import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BootError, ExitCode, NotFoundError, ValidationError } from '../../../../src/errors/index.js';
import { checkVolumes, parseVolumeFlag } from '../../../../src/vm/volumes/spec.js';
import { mountsOf, removeStage } from '../../../../src/vm/volumes/virtiofsd.js';
import { mountInGuest, READ_AHEAD_LINE, VIRTIOFS_READ_AHEAD_KB } from '../../../../src/vm/volumes/hotplug.js';
import type { GuestChannel } from '../../../../src/vm/engine.js';
import { INIT_SCRIPT } from '../../../../src/vm/image/init-script.js';
import { parseSmolfile } from '../../../../src/smolfile/load.js';
import { mergeSpec } from '../../../../src/smolfile/merge.js';
import { buildQemuArgs, HOTPLUG_PORT, type QemuArgsInput } from '../../../../src/vm/qemu/args.js';
import { buildCmdline } from '../../../../src/vm/qemu/cmdline.js';
import { specFromFlags } from '../../../../src/cli/machine-options.js';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-vol-unit-'));
const dir = path.join(tmp, 'src');
fs.mkdirSync(dir);
const file = path.join(tmp, 'file.txt');
fs.writeFileSync(file, 'x');
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function thrown(f: () => unknown): Error & { exitCode?: number; issues?: { path: string; message: string }[] } {
  try {
    f();
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected an error');
}

describe('-v HOST:GUEST[:ro]', () => {
  it('parses the Docker forms, resolving a relative host path against cwd', () => {
    expect(parseVolumeFlag('./src:/work', tmp)).toEqual({ host: dir, guest: '/work', readonly: false });
    expect(parseVolumeFlag('/data:/data:ro')).toEqual({ host: '/data', guest: '/data', readonly: true });
    expect(parseVolumeFlag('/data:/srv/x/:rw')).toEqual({ host: '/data', guest: '/srv/x', readonly: false });
    // the guest path holds no colon, so the host path may
    expect(parseVolumeFlag('/a:b:/w')).toEqual({ host: '/a:b', guest: '/w', readonly: false });
  });

  it.each([
    ['no guest path', '/data', /HOST:GUEST/],
    ['empty guest path', '/data:', /HOST:GUEST/],
    ['a relative guest path', '/data:work', /must be absolute/],
    ['the guest root', '/data:/', /cannot be mounted on \//],
    ['a .. component', '/data:/work/../etc', /\.\./],
    ['a reserved guest dir', '/data:/proc/x', /under \/proc/],
    ['a space in the guest path', '/data:/my dir', /may only hold/],
  ])('refuses %s with exit 65 naming -v', (_what, v, msg) => {
    const e = thrown(() => parseVolumeFlag(v));
    expect(e).toBeInstanceOf(ValidationError);
    expect(e.exitCode).toBe(ExitCode.invalidInput);
    expect(e.issues![0].path).toBe('-v');
    expect(e.issues![0].message).toMatch(msg);
  });

  it('checkVolumes: a missing host path is 66, a file or a duplicate guest path 65, each named', () => {
    const missing = thrown(() => checkVolumes([{ host: path.join(tmp, 'nope'), guest: '/w', readonly: false }]));
    expect(missing).toBeInstanceOf(NotFoundError);
    expect(missing.exitCode).toBe(ExitCode.notFound);
    expect(missing.message).toContain(path.join(tmp, 'nope'));
    expect((missing as NotFoundError).where).toBe(`-v ${path.join(tmp, 'nope')}:/w`);
    const isFile = thrown(() => checkVolumes([{ host: file, guest: '/w', readonly: true }]));
    expect(isFile).toBeInstanceOf(ValidationError);
    expect(isFile.issues![0]).toEqual({ path: `-v ${file}:/w:ro`, message: expect.stringMatching(/not a directory/) });
    const dup = thrown(() => checkVolumes([{ host: dir, guest: '/w', readonly: false }, { host: tmp, guest: '/w/', readonly: false }]));
    expect(dup.issues![0].message).toMatch(/already used by -v/);
    expect(() => checkVolumes([{ host: dir, guest: '/w', readonly: false }, { host: tmp, guest: '/w/sub', readonly: true }])).not.toThrow();
  });

  it('specFromFlags names the flag and makes nothing for bad input', () => {
    const e = thrown(() => specFromFlags({ volume: [`${dir}:/w`, `${tmp}:/w`] }));
    expect(e.exitCode).toBe(ExitCode.invalidInput);
    expect(e.issues![0].path).toBe(`-v ${tmp}:/w`);
    expect(specFromFlags({ volume: [`${dir}:/w:ro`] }).volumes).toEqual([{ host: dir, guest: '/w', readonly: true }]);
  });
});

describe('Smolfile volumes:', () => {
  it('parses entries with readonly defaulting to false, and resolves host paths against the Smolfile dir', () => {
    const s = parseSmolfile('volumes:\n  - host: ./src\n    guest: /work\n  - {host: /abs, guest: /data/, readonly: true}\n');
    expect(s.volumes).toEqual([{ host: './src', guest: '/work', readonly: false }, { host: '/abs', guest: '/data', readonly: true }]);
    const merged = mergeSpec(s, tmp, { volumes: [{ host: '/x', guest: '/x', readonly: false }] });
    expect(merged.volumes.map((v) => v.host)).toEqual([dir, '/abs', '/x']);
  });

  it('is strict and checks guest paths, with the line', () => {
    const issues = (text: string) => thrown(() => parseSmolfile(text, 'Smolfile')).issues!;
    expect(issues('volumes:\n  - host: ./a\n    guest: /w\n    ro: true\n')[0]).toEqual({ path: 'Smolfile:4 volumes.0.ro', message: expect.stringContaining('unknown key') });
    expect(issues('volumes:\n  - host: ./a\n    guest: w\n')[0]).toEqual({ path: 'Smolfile:3 volumes.0.guest', message: expect.stringMatching(/absolute/) });
    expect(issues('volumes:\n  - {host: ./a, guest: /}\n')[0].message).toMatch(/cannot be mounted on \//);
    expect(issues('volumes:\n  - {host: ./a, guest: /w}\n  - {host: ./b, guest: /w}\n')[0].message).toMatch(/two volumes on guest path \/w/);
  });
});

const base: QemuArgsInput = {
  accel: 'tcg', kernelPath: '/k', initrdPath: '/i', cmdline: 'c', memoryMiB: 256, cpus: 1,
  channel: { kind: 'serial', socketPaths: ['/r/a.sock'] }, qmpSocketPath: '/r/q.sock', consoleFd: 3,
};

describe('QEMU and kernel command line for volumes', () => {
  it('adds a vhost-user-fs device on shared memfd RAM and modern virtio-mmio', () => {
    const a = buildQemuArgs({ ...base, sharedFs: { socketPath: '/r/fs.sock', tag: 'smol' } }).join(' ');
    expect(a).toContain('-object memory-backend-memfd,id=mem,size=256M,share=on');
    expect(a).toContain('memory-backend=mem');
    expect(a).toContain('-global virtio-mmio.force-legacy=false');
    expect(a).toContain('-chardev socket,id=fs0,path=/r/fs.sock -device vhost-user-fs-device,chardev=fs0,tag=smol');
    expect(buildQemuArgs(base).join(' ')).not.toMatch(/memfd|vhost-user-fs|force-legacy/);
  });
  it('refuses private (copy-on-write) RAM with a vhost-user device', () => {
    expect(() => buildQemuArgs({ ...base, memoryBackend: { path: '/dev/shm/m', share: false }, sharedFs: { socketPath: '/r/fs.sock', tag: 'smol' } })).toThrow(/shared guest memory/);
  });
  it('tells /init what to mount', () => {
    const c = buildCmdline({ accel: 'kvm', volumes: [{ index: 0, guest: '/work', readonly: false }, { index: 1, guest: '/data/x', readonly: true }] });
    expect(c).toContain('smol.virtiofs=1');
    expect(c).toContain('smol.vols=0:/work,1:/data/x:ro');
    expect(() => buildCmdline({ accel: 'kvm', volumes: [{ index: 0, guest: '/a b', readonly: false }] })).toThrow(/volume guest path/);
  });
});

describe('volumes plugged in after a restore (hotplug.ts)', () => {
  it('boots with an empty PCIe root port, shared RAM and no virtiofs device', () => {
    const a = buildQemuArgs({ ...base, pciHotplug: true }).join(' ');
    expect(a).toMatch(/-machine microvm,[^ ]*pcie=on/);
    expect(a).toContain(`-device pcie-root-port,id=${HOTPLUG_PORT},bus=pcie.0`);
    expect(a).toContain('-object memory-backend-memfd,id=mem,size=256M,share=on');
    expect(a).not.toMatch(/vhost-user-fs/);
    expect(() => buildQemuArgs({ ...base, pciHotplug: true, memoryBackend: { path: '/dev/shm/m', share: false } })).toThrow(/shared guest memory/);
    const c = buildCmdline({ accel: 'kvm', pciHotplug: true });
    expect(c).toContain('smol.pcihp=1');
    expect(a).toContain('power_controller_present=off'); // always powered: the guest's rescan sees the device
    expect(c).not.toContain('pcie_ports=native'); // no pciehp: its link waits cost ~0.15 s
    expect(c).toContain('smol.virtiofs=1');
    expect(c).not.toContain('smol.vols=');
  });
  it('asks the agent to mount outer volumes before inner ones, :ro ones read-only, and fails the run with its reason', async () => {
    const mounts = mountsOf([
      { host: '/h/c', guest: '/work/cache', readonly: true }, { host: '/h/w', guest: '/work', readonly: false },
    ]);
    expect(mounts).toEqual([{ index: 1, guest: '/work', readonly: false }, { index: 0, guest: '/work/cache', readonly: true }]);
    const asked: unknown[] = [];
    // only configure is reached; the agent's side runs for real in test/integration/agent/configure.test.ts
    const ch = { configure: async (c: unknown) => { asked.push(c); return { released: null }; } } as unknown as GuestChannel;
    await mountInGuest(ch, { tag: 'smol', mounts }, 'm1');
    expect(asked).toEqual([{ volumes: { tag: 'smol', attempts: 2000, readAheadKb: VIRTIOFS_READ_AHEAD_KB, mounts } }]);
    const failing = { configure: async () => { throw new Error('configure volumes failed: cannot mount volume 1 on /work: Not a directory'); } } as unknown as GuestChannel;
    const err = await mountInGuest(failing, { tag: 'smol', mounts }, 'm1').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(BootError);
    expect((err as Error).message).toBe('boot failed: the volumes of machine "m1" could not be mounted after restore: configure volumes failed: cannot mount volume 1 on /work: Not a directory');
  });
  it('raises the virtiofs readahead after the mount, at boot and after a restore (FUSE caps it at 128 KiB)', () => {
    expect(READ_AHEAD_LINE).toContain(`echo ${VIRTIOFS_READ_AHEAD_KB} >"/sys/class/bdi/$d/read_ahead_kb"`);
    expect(VIRTIOFS_READ_AHEAD_KB).toBeGreaterThan(128);
    const init = INIT_SCRIPT.split('\n').map((l) => l.trim());
    expect(init.indexOf(READ_AHEAD_LINE)).toBe(init.findIndex((l) => /^mount -t virtiofs -o nosuid,nodev smol/.test(l)) + 1);
    // the line finds the mount's bdi in a real mountinfo line (field 3) and never fails the script
    const fake = path.join(tmp, 'mountinfo');
    fs.writeFileSync(fake, '36 25 0:25 / /run/smol/vol rw,relatime - virtiofs smol rw\n40 36 0:25 /0 /w rw - virtiofs smol rw\n');
    const r = spawnSync('/bin/sh', ['-c', READ_AHEAD_LINE.replace('/proc/self/mountinfo', fake).replace('/sys/class/bdi/', `${tmp}/bdi-`) + '; echo "status $?"'], { encoding: 'utf8' });
    expect(r.stdout.trim()).toBe('status 0');
    fs.mkdirSync(path.join(tmp, 'bdi-0:25'), { recursive: true });
    spawnSync('/bin/sh', ['-c', READ_AHEAD_LINE.replace('/proc/self/mountinfo', fake).replace('/sys/class/bdi/', `${tmp}/bdi-`)]);
    expect(fs.readFileSync(path.join(tmp, 'bdi-0:25', 'read_ahead_kb'), 'utf8')).toBe(`${VIRTIOFS_READ_AHEAD_KB}\n`);
  });
});

describe('the volume stage', () => {
  it('is removed with rmdir only: a stage holding files (a leaked mount) is left alone', () => {
    const stage = path.join(tmp, 'stage');
    fs.mkdirSync(path.join(stage, '0'), { recursive: true });
    fs.mkdirSync(path.join(stage, '1'));
    expect(removeStage(stage)).toBe(true);
    expect(fs.existsSync(stage)).toBe(false);
    fs.mkdirSync(path.join(stage, '0'), { recursive: true });
    fs.writeFileSync(path.join(stage, '0', 'user-file'), 'precious');
    expect(removeStage(stage)).toBe(false);
    expect(fs.readFileSync(path.join(stage, '0', 'user-file'), 'utf8')).toBe('precious');
    expect(removeStage(path.join(tmp, 'never-made'))).toBe(true);
  });
});
