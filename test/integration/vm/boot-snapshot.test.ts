import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killQemuMentioning, qemuProcessesMentioning, scratchHome, sharedHome, smol } from '../../helpers/cli.js';

// its own assets dir (kernel and images linked from the shared one), so these tests own the snapshot cache
let home: string;
let assets: string;
const snapshots = () => path.join(assets, 'cache', 'boot-snapshots');
const entries = () => (fs.existsSync(snapshots()) ? fs.readdirSync(snapshots()).filter((n) => !n.startsWith('.')) : []);
const run = (args: string[]) => smol(['run', ...args], { home, env: { SMOL_ASSETS: assets, SMOL_VERBOSE: '1' } });
const FACTS = ['--', 'sh', '-c', 'hostname; cat /etc/machine-id; head -c 16 /dev/urandom | od -An -tx1 | tr -d " \\n"; echo; cat /proc/sys/kernel/random/boot_id'];

beforeAll(() => {
  home = scratchHome('warm');
  assets = path.join(home, 'assets');
  fs.mkdirSync(assets);
  for (const d of ['kernel', 'images']) fs.symlinkSync(path.join(sharedHome(), d), path.join(assets, d));
});
afterAll(() => {
  killQemuMentioning(home);
  fs.rmSync(home, { recursive: true, force: true });
});

describe('smol run boot snapshots (real QEMU)', () => {
  it('boots cold and saves a snapshot the first time, then restores from it with a fresh identity', async () => {
    const first = await run(FACTS);
    expect(first.code).toBe(0);
    expect(first.stderr).toMatch(/saving the boot snapshot/);
    expect(entries()).toHaveLength(1);
    const restored = [await run(FACTS), await run(FACTS)];
    for (const r of restored) {
      expect(r.code).toBe(0);
      expect(r.stderr).toMatch(/restoring the boot snapshot/);
      expect(r.stderr).not.toMatch(/booting/);
    }
    const facts = [first, ...restored].map((r) => r.stdout.trim().split('\n'));
    for (const f of facts) expect(f).toHaveLength(4);
    // hostname, machine-id, RNG output and boot id all differ between the three machines
    for (let i = 0; i < 4; i++) expect(new Set(facts.map((f) => f[i])).size).toBe(3);
    expect(qemuProcessesMentioning(home)).toEqual([]);
  });

  it('runs the command in the restored machine with its exit code, stdin and environment', async () => {
    const r = await smol(['run', '-e', 'X=from-host', '--', 'sh', '-c', 'cat; echo "$X" >&2; exit 5'], { home, input: 'piped\n', env: { SMOL_ASSETS: assets, SMOL_VERBOSE: '1' } });
    expect(r.stderr).toMatch(/restoring the boot snapshot/);
    expect(r.stdout).toBe('piped\n');
    expect(r.stderr).toContain('from-host\n');
    expect(r.code).toBe(5);
  });

  it('--cold-boot boots the kernel even with a snapshot saved', async () => {
    const r = await run(['--cold-boot', '--', 'true']);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/booting/);
    expect(r.stderr).not.toMatch(/restoring the boot snapshot/);
  });

  it('replaces a snapshot whose state does not load, and the run still succeeds', async () => {
    const [key] = entries();
    fs.writeFileSync(path.join(snapshots(), key, 'state'), 'not a QEMU migration stream');
    const r = await run(['--', 'echo', 'ok']);
    expect(r.stdout).toBe('ok\n');
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/boot snapshot unusable/);
    expect(r.stderr).toMatch(/saving the boot snapshot/);
    const again = await run(['--', 'echo', 'ok']);
    expect(again.stderr).toMatch(/restoring the boot snapshot/);
    expect(again.stdout).toBe('ok\n');
    expect(qemuProcessesMentioning(home)).toEqual([]);
  });

  it('a disk snapshot that fails to open after its overlay was taken falls back to a cold boot on the bare disk', async () => {
    const rootfs = path.join(home, 'rootfs');
    fs.mkdirSync(path.join(rootfs, 'bin'), { recursive: true });
    fs.copyFileSync('/bin/busybox', path.join(rootfs, 'bin', 'busybox'));
    fs.chmodSync(path.join(rootfs, 'bin', 'busybox'), 0o755);
    for (const a of ['sh', 'echo', 'true']) fs.symlinkSync('busybox', path.join(rootfs, 'bin', a));
    const before = new Set(entries());
    expect((await run(['--image', rootfs, '--', 'true'])).code).toBe(0);
    const [key] = entries().filter((e) => !before.has(e));
    expect(fs.existsSync(path.join(snapshots(), key, 'disk.qcow2'))).toBe(true);
    // as if pruned and replaced between lookup and launch: the file is there, QEMU cannot open it
    fs.writeFileSync(path.join(snapshots(), key, 'disk.qcow2'), 'not a qcow2 image');
    const r = await run(['--image', rootfs, '--', 'echo', 'ok']);
    expect(r.stderr).toMatch(/boot snapshot unusable/);
    expect(r.stdout).toBe('ok\n');
    expect(r.code).toBe(0);
    expect(qemuProcessesMentioning(home)).toEqual([]);
    for (const e of entries().filter((x) => !before.has(x))) fs.rmSync(path.join(snapshots(), e), { recursive: true, force: true });
  });

  it('keys snapshots by machine shape: another memory size gets its own', async () => {
    const r = await run(['--mem', '192', '--', 'true']);
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/saving the boot snapshot/);
    expect(entries()).toHaveLength(2);
  });

  it('SMOL_BOOT_SNAPSHOTS=0 turns snapshots off', async () => {
    const r = await smol(['run', '--', 'true'], { home, env: { SMOL_ASSETS: assets, SMOL_VERBOSE: '1', SMOL_BOOT_SNAPSHOTS: '0' } });
    expect(r.code).toBe(0);
    expect(r.stderr).not.toMatch(/snapshot/);
  });
});
