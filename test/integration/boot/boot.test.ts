/**
 * Real boots under QEMU (TCG here: no /dev/kvm): the kernel and initramfs from `smol setup`, the /init test
 * hook for what the guest sees, and the agent over virtio-serial when it is built. Every QEMU started here
 * is killed in afterAll by its pidfile, whatever happened.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { selectLauncher, waitForConsole, type LaunchResult, type LaunchSpec, type QemuLauncher } from '../../../src/vm/qemu/select.js';
import { ensureKernel, type KernelInfo } from '../../../src/vm/kernel/index.js';
import { createOverlay, ensureInitramfs, resolveImage, type Initramfs } from '../../../src/vm/image/index.js';
import { AgentClient } from '../../../src/vm/agent/client.js';
import { QmpClient } from '../../../src/vm/qemu/qmp.js';
import { sharedHome } from '../../helpers/cli.js';
import { ciOrLong } from '../../helpers/long.js';
import { writeDockerSave } from '../../fixtures/images/make-image-tarballs.js';

const assets = sharedHome();
const tmp = mkdtempSync(path.join(os.tmpdir(), 'smol-boot-'));
let qemu: QemuLauncher;
let kernel: KernelInfo;
let initrd: Initramfs;
const launched: LaunchResult[] = [];
let seq = 0;

beforeAll(async () => {
  qemu = await selectLauncher();
  kernel = await ensureKernel(assets);
  initrd = await ensureInitramfs(assets, kernel);
});

afterAll(async () => {
  for (const r of launched) {
    // QEMU deletes its pidfile on a clean exit; the launch result still has the pid
    const fromFile = existsSync(r.pidfilePath) ? Number(readFileSync(r.pidfilePath, 'utf8').trim()) : NaN;
    await qemu.kill(Number.isInteger(fromFile) ? fromFile : r.pid, 500);
  }
  rmSync(tmp, { recursive: true, force: true });
});

async function launch(extra: Partial<LaunchSpec> = {}): Promise<{ r: LaunchResult; t0: number }> {
  const machineDir = path.join(tmp, `m${seq++}`);
  mkdirSync(machineDir);
  const t0 = performance.now();
  const r = await qemu.launch({ machineDir, kernelPath: kernel.vmlinux, initrdPath: initrd.path, memoryMiB: 256, cpus: 1, ...extra });
  launched.push(r);
  return { r, t0 };
}

/** Boot with the test hook and return the facts /init printed, plus launch→marker milliseconds. */
async function bootToMarker(extra: Partial<LaunchSpec> = {}): Promise<{ facts: Record<string, string>; ms: number; r: LaunchResult }> {
  const { r, t0 } = await launch({ testHook: { marker: 'boot' }, ...extra });
  const m = await waitForConsole(r.consoleLogPath, /SMOL_MARKER_BEGIN boot\r?\n([\s\S]*?)SMOL_MARKER_END/, { timeoutMs: 30_000, alive: () => qemu.isAlive(r.pid) });
  const ms = performance.now() - t0;
  const facts = Object.fromEntries(m[1].trim().split(/\r?\n/).map((l) => [l.slice(0, l.indexOf(':')), l.slice(l.indexOf(':') + 1).trim()]));
  expect(await qemu.waitExit(r.pid, 10_000)).toBe(true); // the hook powers off; -no-reboot makes QEMU exit
  return { facts, ms, r };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

describe('booting microVMs', () => {
  it('boots the kernel and initramfs to /init with the channel port and no NIC', async () => {
    const { facts, ms, r } = await bootToMarker();
    console.log(`launch→marker ${ms.toFixed(0)} ms, guest uptime at marker ${facts.uptime} s (${qemu.accel}) cmdline: ${r.cmdline}`);
    expect(Number(facts.uptime)).toBeGreaterThan(0);
    expect(facts.net.split(' ')).toEqual(['lo']);
    expect(facts.routes).toBe('');
    expect(facts.ports.split(' ')).toEqual(['smol.0']);
    expect(facts.modules.split(' ')).toEqual(expect.arrayContaining(['virtio_console', 'virtio_blk', 'virtio_mmio']));
    expect(facts.modules).not.toContain('virtio_net'); // optional groups load only on request
    if (qemu.accel === 'tcg') expect(r.cmdline).toMatch(/tsc_early_khz=\d+/);
  });

  it('brings up user-mode networking only when asked', async () => {
    const { facts } = await bootToMarker({ net: true });
    expect(facts.net.split(' ').sort()).toEqual(['eth0', 'lo']);
    expect(facts.routes).toContain('default via 10.0.2.2 dev eth0');
    expect(facts.modules.split(' ')).toContain('virtio_net');
  });

  it('keeps guest time at host speed (tsc_early_khz is the real TSC rate)', async () => {
    const { r, t0 } = await launch({ testHook: { marker: 'clock', sleepSeconds: 3 } });
    const alive = () => qemu.isAlive(r.pid);
    await waitForConsole(r.consoleLogPath, /SMOL_MARKER_BEGIN clock/, { timeoutMs: 30_000, alive });
    const tBegin = performance.now();
    const m = await waitForConsole(r.consoleLogPath, /epoch: (\d+)[\s\S]*SMOL_MARKER_SLEPT 3/, { timeoutMs: 30_000, alive });
    const hostSeconds = (performance.now() - tBegin) / 1000;
    console.log(`guest sleep 3 s took ${hostSeconds.toFixed(2)} s of host time (boot ${((tBegin - t0) / 1000).toFixed(2)} s)`);
    expect(hostSeconds).toBeGreaterThan(2.2); // a guest clock running 2x fast would finish in ~1.5 s
    expect(hostSeconds).toBeLessThan(10); // loose: a loaded CI host delays the console, not the guest clock
    expect(Math.abs(Number(m[1]) - Date.now() / 1000)).toBeLessThan(30); // RTC seeds the wall clock
  });

  it('switches root into a default-image disk overlay, and into a docker save image', async () => {
    const def = await resolveImage('default', assets);
    const overlay = path.join(tmp, 'default-overlay.qcow2');
    await createOverlay(def.basePath, overlay);
    const a = await bootToMarker({ disks: [{ path: overlay }], rootDisk: true });
    expect(a.facts.root).toBe('smol default image (busybox)');
    expect(a.facts.ports.split(' ')).toEqual(['smol.0']);

    const tarball = path.join(tmp, 'fixture.tar');
    await writeDockerSave(tarball, { busybox: true });
    const img = await resolveImage(tarball, path.join(tmp, 'images-home'));
    const overlay2 = path.join(tmp, 'docker-overlay.qcow2');
    await createOverlay(img.basePath, overlay2);
    const b = await bootToMarker({ disks: [{ path: overlay2 }], rootDisk: true, net: true });
    expect(b.facts.root).toBe('smol docker fixture');
    expect(b.facts.resolv).toBe('nameserver 10.0.2.3'); // replaced the image's absolute symlink, not followed it
  });

  it('boots with its RAM in a shared file (fork template) and can wait paused for an incoming migration', async () => {
    const mem = path.join('/dev/shm', `smol-boot-test-${process.pid}.mem`);
    try {
      const { facts } = await bootToMarker({ memoryBackend: { path: mem, share: true } });
      expect(facts.ports).toBe('smol.0');
      expect(statSync(mem).size).toBe(256 * 1024 * 1024);
    } finally {
      rmSync(mem, { force: true });
    }
    const { r } = await launch({ incomingDefer: true });
    const qmp = await QmpClient.connect(r.qmpPath, 10_000);
    const status = await qmp.execute<{ status: string; running: boolean }>('query-status');
    expect(status).toMatchObject({ status: 'inmigrate', running: false });
    qmp.close();
    // a guest that escapes into QEMU meets its seccomp filter (-sandbox on): mode 2 is a filter in force
    expect(readFileSync(`/proc/${r.pid}/status`, 'utf8')).toMatch(/^Seccomp:\s+2$/m);
    await qemu.quit(r.qmpPath, r.pid, 5000);
    expect(qemu.isAlive(r.pid)).toBe(false);
  });

  // every other test file boots too, hundreds of times in a suite run; SMOL_TEST_LONG=1 makes this 10
  const boots = ciOrLong(4, 10);
  it(`boots ${boots} times in a row without a hang`, async () => {
    const times: number[] = [];
    for (let i = 0; i < boots; i++) times.push((await bootToMarker()).ms);
    console.log(`${boots} boots launch→marker: median ${median(times).toFixed(0)} ms, min ${Math.min(...times).toFixed(0)}, max ${Math.max(...times).toFixed(0)}`);
    expect(times).toHaveLength(boots);
  }, 400_000);
});

const agentBuilt = () => initrd?.hasAgent ?? existsSync(path.join(process.cwd(), 'build', 'smol-agent'));

describe('booting with the agent', () => {
  it.skipIf(!existsSync(path.join(process.cwd(), 'build', 'smol-agent')))('hands PID 1 to the agent on every serial port, in the initramfs and after switch_root (skipped when build/smol-agent is not built)', async () => {
    expect(agentBuilt()).toBe(true);
    const { r, t0 } = await launch({ ports: 2 });
    const c0 = await AgentClient.connectUnix(r.channelPaths[0], { timeoutMs: 30_000 });
    console.log(`launch→agent HELLO ${(performance.now() - t0).toFixed(0)} ms`);
    const pid1 = await c0.run({ argv: ['/bin/cat', '/proc/1/cmdline'] });
    expect(pid1.stdout.toString().split('\0')[0]).toBe('/sbin/smol-agent');
    const c1 = await AgentClient.connectUnix(r.channelPaths[1], { timeoutMs: 10_000 });
    expect((await c1.run({ argv: ['/bin/echo', 'port1'] })).stdout.toString()).toBe('port1\n');
    c0.close();
    c1.close();
    await qemu.quit(r.qmpPath, r.pid, 5000);
    expect(qemu.isAlive(r.pid)).toBe(false);

    const def = await resolveImage('default', assets);
    const overlay = path.join(tmp, 'agent-overlay.qcow2');
    await createOverlay(def.basePath, overlay);
    const d = await launch({ disks: [{ path: overlay }], rootDisk: true });
    const c = await AgentClient.connectUnix(d.r.channelPaths[0], { timeoutMs: 30_000 });
    const rel = await c.run({ argv: ['/.smol/busybox', 'sh', '-c', 'cat /etc/smol-release; cat /proc/1/cmdline | tr "\\0" " "; echo persisted > /root/note; sync'] });
    const [release, pid1cmd] = rel.stdout.toString().split('\n');
    expect(release).toBe('smol default image (busybox)');
    expect(pid1cmd.startsWith('/.smol/smol-agent --port smol.0')).toBe(true);
    c.close();
    await qemu.quit(d.r.qmpPath, d.r.pid, 5000);
    expect(qemu.isAlive(d.r.pid)).toBe(false);
  });
});
