/**
 * Memory-carrying .smolmachine artifacts on real QEMU (TCG here): pack a running forkable machine with its
 * RAM, resume it with `pack run` and `machine create --from` (state that lives only in RAM survives: a file
 * on a tmpfs and a running process), cold-boot with a notice where the state cannot load, refuse what
 * cannot be packed, and catch a tampered memory entry.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killQemuMentioning, qemuProcessesMentioning, scratchHome, smol } from '../../helpers/cli.js';
import { removeHomeShm } from '../../helpers/shm.js';

let home: string;
let art: string;

beforeAll(() => {
  home = scratchHome('packmem');
  art = path.join(home, 'warm.smolmachine');
});
afterAll(() => {
  killQemuMentioning(home);
  removeHomeShm(home);
  fs.rmSync(home, { recursive: true, force: true });
});

const sh = async (m: string, script: string) => {
  const r = await smol(['machine', 'exec', m, '--', 'sh', '-c', script], { home });
  expect(r.code, `${m}: ${script}\n${r.stderr}`).toBe(0);
  return r.stdout;
};
// RAM-only evidence: a file on a tmpfs mounted over /tmp, and a process; the disk marker is on ext4
const PROBE = 'cat /tmp/marker 2>/dev/null || echo no-ram-file; ps | grep -c "[s]leep 4242"; cat /root/disk-marker; hostname';

describe('memory-carrying artifacts (real QEMU)', () => {
  it('packs a running forkable machine with its memory; the machine runs on', async () => {
    expect((await smol(['machine', 'create', 'src', '--forkable', '--start'], { home })).code).toBe(0);
    await sh('src', 'mount -t tmpfs tmpfs /tmp && echo ram-state > /tmp/marker && echo disk-state > /root/disk-marker && sync; (setsid sleep 4242 </dev/null >/dev/null 2>&1 &)');
    const r = await smol(['pack', 'create', '--from-vm', 'src', '--with-memory', '-o', art, '--json'], { home });
    expect(r.code, r.stderr).toBe(0);
    const out = JSON.parse(r.stdout);
    expect(out.manifest.resume).toMatchObject({ accelerator: 'tcg', cpuModel: 'max', machineType: 'microvm', memoryBytes: 256 << 20, net: false, agentPorts: 4 });
    expect(out.manifest.resume.qemuBuild).toMatch(/^\d+\.\d+\.\d+/);
    expect(out.manifest.entries.map((e: { name: string }) => e.name)).toEqual(['disk.qcow2', 'kernel', 'initrd', 'memory.ram', 'device-state']);
    expect(out.captured.pausedMs).toBeGreaterThan(0);
    expect(await sh('src', PROBE)).toBe('ram-state\n1\ndisk-state\nsrc\n');
  });

  it('pack run resumes it: the RAM-only file and the process are there, under a new hostname', async () => {
    const r = await smol(['pack', 'run', art, '--', 'sh', '-c', PROBE], { home });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).not.toMatch(/cold-booting/);
    const [file, procs, disk, host] = r.stdout.split('\n');
    expect([file, procs, disk]).toEqual(['ram-state', '1', 'disk-state']);
    expect(host).toMatch(/^run-/);
  });

  it('machine create --from resumes at its first start only; later starts boot the disk', async () => {
    expect((await smol(['machine', 'create', 'cp', '--from', art], { home })).code).toBe(0);
    expect((await smol(['machine', 'start', 'cp'], { home })).code).toBe(0);
    expect(await sh('cp', PROBE)).toBe('ram-state\n1\ndisk-state\ncp\n');
    await sh('cp', 'echo after-resume > /root/disk-marker; sync');
    expect((await smol(['machine', 'stop', 'cp'], { home })).code).toBe(0);
    expect((await smol(['machine', 'start', 'cp'], { home })).code).toBe(0);
    expect(await sh('cp', PROBE)).toBe('no-ram-file\n0\nafter-resume\ncp\n');
  });

  it('cold-boots the disk with a one-line notice where the saved state cannot load', async () => {
    // TEST ONLY override: this host pretends to run KVM, so the TCG state must not be loaded
    const r = await smol(['pack', 'run', art, '--', 'sh', '-c', PROBE], { home, env: { SMOL_TEST_RESUME_HOST: '{"accelerator":"kvm"}' } });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout.split('\n').slice(0, 3)).toEqual(['no-ram-file', '0', 'disk-state']);
    const notices = r.stderr.split('\n').filter((l) => /cold-booting/.test(l));
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatch(/^smol: cold-booting .*warm\.smolmachine: its saved memory state cannot be restored here \(saved state needs accelerator tcg, this host has kvm\)$/);
  });

  it('refuses an existing output before pausing anything, a machine not started forkable, and a stopped one', async () => {
    const exists = await smol(['pack', 'create', '--from-vm', 'src', '--with-memory', '-o', art], { home });
    expect(exists.code).toBe(67);
    expect(exists.stderr).toMatch(/warm\.smolmachine already exists/);
    const src = JSON.parse((await smol(['machine', 'status', 'src', '--json'], { home })).stdout);
    expect(fs.readdirSync(path.join(home, 'machines', src.id)).filter((n) => /^disk.*\.qcow2$/.test(n))).toHaveLength(2); // its own + the one packing moved it to
    const plain = await smol(['pack', 'create', '--from-vm', 'cp', '--with-memory', '-o', path.join(home, 'x.smolmachine')], { home });
    expect(plain.code).toBe(67);
    expect(plain.stderr).toMatch(/not started forkable[\s\S]*--forkable/);
    expect((await smol(['machine', 'stop', 'cp'], { home })).code).toBe(0);
    const stopped = await smol(['pack', 'create', '--from-vm', 'cp', '--with-memory', '-o', path.join(home, 'x.smolmachine')], { home });
    expect(stopped.code).toBe(67);
    expect(stopped.stderr).toMatch(/is stopped; --with-memory packs a running machine[\s\S]*smol machine start cp --forkable/);
    expect(fs.existsSync(path.join(home, 'x.smolmachine'))).toBe(false);
  });

  it('verify rejects a flipped byte in the memory entry, naming it (exit 76)', async () => {
    const b = fs.readFileSync(art);
    const at = b.indexOf(Buffer.from('memory.ram.zst\0')) + 512 + 1000;
    b[at] ^= 0x01;
    const bad = path.join(home, 'bad.smolmachine');
    fs.writeFileSync(bad, b);
    const r = await smol(['pack', 'verify', bad], { home });
    expect(r.code).toBe(76);
    expect(r.stdout).toMatch(/memory\.ram\s+memory\s+.*CORRUPT/);
    expect(r.stdout).toMatch(/device-state\s+device-state\s+.*ok/);
  });
});

describe('memory-carrying artifacts: a state that fails to load', () => {
  it('boots the disk instead, leaving no QEMU of the failed restore behind', async () => {
    // damage the extracted (already verified) device state in the cache: only the restore itself can notice
    const cache = path.join(home, 'cache', 'artifacts');
    const [dir] = fs.readdirSync(cache).filter((n) => /^[0-9a-f]{64}$/.test(n));
    const state = path.join(cache, dir, 'device-state');
    fs.writeFileSync(state, Buffer.alloc(fs.statSync(state).size, 0x5a));
    const r = await smol(['machine', 'create', 'broken', '--from', art, '--start'], { home, env: { SMOL_VERBOSE: '1' } });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/resuming .*warm\.smolmachine failed \(.*\); booting its disk/);
    expect((await sh('broken', PROBE)).split('\n').slice(0, 3)).toEqual(['no-ram-file', '0', 'disk-state']);
    const { id, pid } = JSON.parse((await smol(['machine', 'status', 'broken', '--json'], { home })).stdout) as { id: string; pid: number };
    expect(qemuProcessesMentioning(id)).toEqual([pid]);
  });
});
