import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killQemuMentioning, qemuProcessesMentioning, scratchHome, smol } from '../../helpers/cli.js';

// A data dir on a small tmpfs that the test fills: needs root (CI and these machines run as root).
let home: string;
let mounted = false;
const canMount = process.getuid?.() === 0;

const fill = (leaveKiB: number) => {
  const avail = Number(spawnSync('df', ['-k', '--output=avail', home], { encoding: 'utf8' }).stdout.trim().split('\n').pop());
  const n = Math.max(0, avail - leaveKiB);
  fs.writeFileSync(path.join(home, 'filler'), Buffer.alloc(n * 1024));
};
const unfill = () => fs.rmSync(path.join(home, 'filler'), { force: true });

beforeAll(() => {
  if (!canMount) return;
  home = scratchHome('full');
  mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', 'size=24m', 'tmpfs', home]).status === 0;
});
afterAll(() => {
  if (!home) return;
  killQemuMentioning(home);
  if (mounted) spawnSync('umount', ['-l', home]);
  fs.rmSync(home, { recursive: true, force: true });
});

describe.skipIf(!canMount)('disk full in the data dir (tmpfs SMOL_HOME; skipped when not root: mounting needs it)', () => {
  it('machine create fails with 73 and registers nothing', async () => {
    expect(mounted).toBe(true);
    expect((await smol(['machine', 'ls'], { home })).code).toBe(0); // registry exists before the disk fills
    fill(100);
    const r = await smol(['machine', 'create', 'full1'], { home });
    expect(r.code).toBe(73);
    expect(r.stderr).toMatch(/no space left/i);
    unfill();
    const ls = await smol(['machine', 'ls', '--json'], { home });
    expect(JSON.parse(ls.stdout)).toEqual([]);
    expect(fs.readdirSync(path.join(home, 'machines'))).toEqual([]);
  });

  it('a guest writing into a full data dir gets an I/O error, and the machine keeps running', async () => {
    expect((await smol(['machine', 'create', 'w1'], { home })).code).toBe(0);
    expect((await smol(['machine', 'start', 'w1'], { home })).code).toBe(0);
    fill(256);
    // the overlay must grow to take 8 MiB of new data: the host write fails and the guest sees it
    const w = await smol(['machine', 'exec', 'w1', '--timeout', '60s', '--', 'sh', '-c', 'dd if=/dev/urandom of=/root/big bs=1M count=8 conv=fsync 2>&1; echo "dd=$?"'], { home });
    expect(w.code).toBe(0);
    expect(w.stdout).toMatch(/dd=[1-9]/);
    unfill();
    const after = await smol(['machine', 'exec', 'w1', '--', 'echo', 'still here'], { home });
    expect(after.stdout).toBe('still here\n');
    expect((await smol(['machine', 'rm', '-f', 'w1'], { home })).code).toBe(0);
    expect(qemuProcessesMentioning(home)).toEqual([]);
  });

  it('a fork into a full data dir fails with 73, registers no clone, leaves no fork files, and the parent runs on', async () => {
    expect((await smol(['machine', 'create', 'f1'], { home })).code).toBe(0);
    expect((await smol(['machine', 'start', 'f1', '--forkable'], { home })).code).toBe(0);
    const shmBefore = fs.readdirSync('/dev/shm').filter((n) => n.startsWith('smol-fork-'));
    const dirsBefore = fs.readdirSync(path.join(home, 'machines')); // f1, and its warm spare's directory
    fill(64);
    const r = await smol(['fork', 'f1', '--count', '2'], { home });
    unfill();
    expect(r.code, r.stderr).toBe(73);
    expect(r.stderr).toMatch(/no space left/i);
    const ls = JSON.parse((await smol(['machine', 'ls', '--json'], { home })).stdout) as { name: string; state: string }[];
    expect(ls.map((m) => [m.name, m.state]), r.stderr).toEqual([['f1', 'running']]);
    // nothing new: whether the fork got as far as taking the spare (and removed it) depends on where the disk filled
    expect(fs.readdirSync(path.join(home, 'machines')).filter((d) => !dirsBefore.includes(d))).toEqual([]);
    expect(fs.existsSync(path.join(home, 'forks')) ? fs.readdirSync(path.join(home, 'forks')) : []).toEqual([]);
    // no new template left behind (the parent's warm spare, whose template was there before, went into the fork)
    expect(fs.readdirSync('/dev/shm').filter((n) => n.startsWith('smol-fork-') && !shmBefore.includes(n))).toEqual([]);
    expect((await smol(['machine', 'exec', 'f1', '--', 'echo', 'parent ok'], { home })).stdout).toBe('parent ok\n');
    // and with room again the same parent forks
    const again = await smol(['fork', 'f1', '--json'], { home });
    expect(again.code, again.stderr).toBe(0);
    expect((await smol(['machine', 'rm', '-f', '--cascade', 'f1'], { home })).code).toBe(0);
    expect(qemuProcessesMentioning(home)).toEqual([]);
  });
});
