/**
 * `machine cp` out of a guest whose root turned hostile (#31.1, .3, .7): it answers archive requests with
 * crafted tar streams (a `sh` placed first on PATH catches `tar -cf` and cats /root/evil.tar instead) and
 * offers files that are setuid, symlinks to /dev/zero or FIFOs. Nothing may land outside the target, keep
 * privileged bits or guest owners, fill the disk, hang, or leave a `.smol-part` behind.
 */
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { scratchHome, smol, smolSpawn } from '../../helpers/cli.js';
import { craftTar, type TarMember } from '../../helpers/craft-tar.js';

const M = 'cph';
let home: string;

// What a guest root can do: shadow `sh` for every exec the agent runs without a path.
const FAKE_SH = `#!/bin/busybox sh
case "$2" in *'tar -cf'*) if [ -f /root/evil.tar ]; then cat /root/evil.tar; [ -f /root/stall ] && exec sleep 600; exit 0; fi;; esac
exec /bin/busybox sh "$@"
`;

const guest = (script: string) => smol(['machine', 'exec', M, '--', 'sh', '-c', script], { home });
const cp = (...args: string[]) => smol(['machine', 'cp', ...args], { home, timeoutMs: 60_000 });
const parts = (dir: string) => fs.readdirSync(dir).filter((n) => n.includes('smol-part'));

async function serve(members: TarMember[], o: { end?: boolean } = {}): Promise<void> {
  const f = path.join(home, 'evil.tar');
  fs.writeFileSync(f, craftTar(members, o));
  const r = await cp(f, `${M}:/root/evil.tar`);
  expect(r.code, r.stderr).toBe(0);
}

async function waitFor(what: string, pred: () => boolean): Promise<void> {
  for (let i = 0; i < 600 && !pred(); i++) await new Promise((r) => setTimeout(r, 100));
  if (!pred()) throw new Error(`never saw ${what}`);
}

function entryExists(p: string): boolean {
  try { fs.lstatSync(p); return true; } catch { return false; }
}

beforeAll(async () => {
  home = scratchHome('cphostile');
  expect((await smol(['machine', 'create', M], { home })).code).toBe(0);
  expect((await smol(['machine', 'start', M], { home })).code).toBe(0);
  const fake = path.join(home, 'fake-sh');
  fs.writeFileSync(fake, FAKE_SH, { mode: 0o755 });
  expect((await cp(fake, `${M}:/usr/sbin/sh`)).code).toBe(0);
  const r = await guest('mkdir -p /root/real && echo hi > /root/real/a');
  expect(r.code, r.stderr).toBe(0);
});
afterAll(async () => { await smol(['machine', 'rm', '-f', M], { home }); fs.rmSync(home, { recursive: true, force: true }); });

describe('machine cp -r from a hostile guest', () => {
  it('the issue\'s attack: a symlink out of one copy is not kept, and the next stream cannot write through it', async () => {
    const outside = path.join(home, 'outside');
    fs.mkdirSync(outside);
    expect((await guest(`ln -s ${outside} /root/real/esc && rm -f /root/evil.tar`)).code).toBe(0);
    const dst = path.join(home, 'dst');
    fs.mkdirSync(dst);
    const first = await cp('-r', `${M}:/root/real`, dst);
    expect(first.code, first.stderr).toBe(0);
    await serve([{ path: './esc/pwned', data: 'owned\n' }]);
    await cp('-r', `${M}:/root/real`, dst);
    expect(fs.readdirSync(outside)).toEqual([]);
    expect(first.stderr).toMatch(/skipped 1 symlink.*outside[\s\S]*esc -> /);
    expect(fs.lstatSync(path.join(dst, 'real', 'esc')).isDirectory()).toBe(true);
    // the user can still ask for such links, once, knowingly
    expect((await guest('rm -f /root/evil.tar')).code).toBe(0);
    const kept = await cp('-r', '--keep-outside-links', `${M}:/root/real`, path.join(home, 'kept'));
    expect(kept.code, kept.stderr).toBe(0);
    expect(fs.readlinkSync(path.join(home, 'kept', 'esc'))).toBe(outside);
    expect((await guest('rm /root/real/esc')).code).toBe(0);
  });

  it('copying into an existing directory never follows a symlink already there', async () => {
    const outside = path.join(home, 'outside2');
    fs.mkdirSync(outside);
    const dst = path.join(home, 'dst2');
    fs.mkdirSync(path.join(dst, 'real'), { recursive: true });
    fs.symlinkSync(outside, path.join(dst, 'real', 'esc'));
    fs.symlinkSync(path.join(outside, 'victim'), path.join(dst, 'real', 'file-link'));
    await serve([{ path: './esc/pwned', data: 'owned\n' }, { path: './file-link', data: 'owned\n' }]);
    const r = await cp('-r', `${M}:/root/real`, dst);
    expect(fs.readdirSync(outside)).toEqual([]);
    expect(r.code, r.stderr).toBe(0);
    expect(fs.lstatSync(path.join(dst, 'real', 'esc')).isDirectory()).toBe(true);
    expect(fs.readFileSync(path.join(dst, 'real', 'esc', 'pwned'), 'utf8')).toBe('owned\n');
    expect(fs.lstatSync(path.join(dst, 'real', 'file-link')).isFile()).toBe(true);
  });

  it('drops setuid/setgid bits and guest owners, and skips device nodes and FIFOs unless asked', async () => {
    await serve([
      { path: './', type: 'Directory', mode: 0o755 },
      { path: './rootme', data: 'x', mode: 0o4755, uid: 1234, gid: 1234 },
      { path: './gdir/', type: 'Directory', mode: 0o2775, uid: 1234 },
      { path: './tmp/', type: 'Directory', mode: 0o1777 },
      { path: './disk', type: 'BlockDevice', mode: 0o666, devmaj: 254, devmin: 0 },
      { path: './null', type: 'CharacterDevice', mode: 0o666, devmaj: 1, devmin: 3 },
      { path: './fifo', type: 'FIFO', mode: 0o4644 },
    ]);
    const dst = path.join(home, 'modes');
    const r = await cp('-r', `${M}:/root/real`, dst);
    expect(r.code, r.stderr).toBe(0);
    const st = (n: string) => fs.lstatSync(path.join(dst, n));
    expect((st('rootme').mode & 0o7777).toString(8)).toBe('755');
    expect([st('rootme').uid, st('gdir').uid]).toEqual([process.getuid!(), process.getuid!()]);
    expect((st('gdir').mode & 0o7777).toString(8)).toBe('775');
    expect((st('tmp').mode & 0o7777).toString(8)).toBe('1777');
    expect(['disk', 'null', 'fifo'].filter((n) => entryExists(path.join(dst, n)))).toEqual([]);
    expect(r.stderr).toMatch(/skipped 3 special files[\s\S]*--preserve-special/);

    await serve([{ path: './null', type: 'CharacterDevice', mode: 0o666, devmaj: 1, devmin: 3 }, { path: './fifo', type: 'FIFO', mode: 0o4644 }]);
    const asked = path.join(home, 'special');
    const p = await cp('-r', '--preserve-special', `${M}:/root/real`, asked);
    expect(p.code, p.stderr).toBe(0);
    const fifo = fs.lstatSync(path.join(asked, 'fifo'));
    expect([fifo.isFIFO(), (fifo.mode & 0o7777).toString(8)]).toEqual([true, '644']);
    if (process.getuid!() === 0) expect(fs.lstatSync(path.join(asked, 'null')).isCharacterDevice()).toBe(true);
  });

  it('a stream over --max-size is cut off and leaves nothing', async () => {
    await serve([{ path: './big', data: Buffer.alloc(2 << 20, 1) }]);
    const dst = path.join(home, 'capped');
    const r = await cp('-r', '--max-size', '1M', `${M}:/root/real`, dst);
    expect(r.code, r.stderr).toBe(73);
    expect(r.stderr).toMatch(/--max-size/);
    expect(entryExists(dst)).toBe(false);
    expect(parts(home)).toEqual([]);
  });

  // more than GNU tar's 10 KiB record, so even a tar that reads whole records has begun the tree
  const stalling = () => serve([{ path: './a', data: Buffer.alloc(64 << 10, 2) }], { end: false }).then(() => guest('touch /root/stall'));

  it('a guest that stalls mid-stream times out and leaves nothing', async () => {
    expect((await stalling()).code).toBe(0);
    const dst = path.join(home, 'stalled');
    const idle = await cp('-r', '--idle-timeout', '2s', `${M}:/root/real`, dst);
    expect(idle.code, idle.stderr).toBe(124);
    expect([entryExists(dst), parts(home)]).toEqual([false, []]);
  });

  it('SIGTERM during a stalled copy removes the partial tree', async () => {
    expect((await stalling()).code).toBe(0);
    const dst = path.join(home, 'stalled');
    const child = smolSpawn(['machine', 'cp', '-r', `${M}:/root/real`, dst], { home });
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    await waitFor('the partial tree', () => parts(home).some((n) => entryExists(path.join(home, n, 'a'))));
    child.kill('SIGTERM');
    expect(await exited).toBe(143);
    expect([entryExists(dst), parts(home)]).toEqual([false, []]);
    expect((await guest('rm -f /root/stall /root/evil.tar')).code).toBe(0);
  });
});

describe('machine cp of one file from a hostile guest', () => {
  it('drops the setuid bit', async () => {
    expect((await guest('printf x > /root/rootme && chmod 6755 /root/rootme')).code).toBe(0);
    const r = await cp(`${M}:/root/rootme`, path.join(home, 'rootme'));
    expect(r.code, r.stderr).toBe(0);
    expect((fs.statSync(path.join(home, 'rootme')).mode & 0o7777).toString(8)).toBe('755');
  });

  it('a symlink to /dev/zero sends more than it announced: cut off, nothing left', async () => {
    expect((await guest('ln -sf /dev/zero /root/zero')).code).toBe(0);
    const r = await smol(['machine', 'cp', `${M}:/root/zero`, path.join(home, 'zero')], { home, timeoutMs: 20_000 });
    expect(r.code, r.stderr).toBe(72);
    expect(r.stderr).toMatch(/more than the 0 bytes it announced/);
    expect([entryExists(path.join(home, 'zero')), parts(home)]).toEqual([false, []]);
  });

  it('a FIFO times out instead of hanging', async () => {
    expect((await guest('mkfifo /root/ff')).code).toBe(0);
    const dst = path.join(home, 'ff');
    const r = await cp('--idle-timeout', '2s', `${M}:/root/ff`, dst);
    expect(r.code, r.stderr).toBe(124);
    expect([entryExists(dst), parts(home)]).toEqual([false, []]);
  });

  it('SIGTERM during a stalled copy removes the partial file', async () => {
    const dst = path.join(home, 'ff');
    const child = smolSpawn(['machine', 'cp', `${M}:/root/ff`, dst], { home });
    const exited = new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code)));
    await waitFor('the partial file', () => parts(home).length > 0);
    child.kill('SIGTERM');
    expect(await exited).toBe(143);
    expect([entryExists(dst), parts(home)]).toEqual([false, []]);
  });
});
