import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killQemuMentioning, qemuProcessesMentioning, scratchHome, sharedHome, smol } from '../../helpers/cli.js';

// A rootfs directory's digest is taken on trust at `smol run` and checked while the machine boots
// (src/vm/image/tree-digest-cache.ts): a changed tree must still be what the command sees.
let home: string;
let assets: string;
let rootfs: string;
const run = (args: string[]) => smol(['run', ...args], { home, env: { SMOL_ASSETS: assets, SMOL_VERBOSE: '1' } });

beforeAll(() => {
  home = scratchHome('imgdir');
  assets = path.join(home, 'assets');
  fs.mkdirSync(path.join(assets, 'images'), { recursive: true });
  fs.symlinkSync(path.join(sharedHome(), 'kernel'), path.join(assets, 'kernel'));
  rootfs = path.join(home, 'rootfs');
  fs.mkdirSync(path.join(rootfs, 'bin'), { recursive: true });
  fs.mkdirSync(path.join(rootfs, 'etc'), { recursive: true });
  fs.copyFileSync('/bin/busybox', path.join(rootfs, 'bin', 'busybox'));
  fs.chmodSync(path.join(rootfs, 'bin', 'busybox'), 0o755);
  for (const a of ['sh', 'cat', 'true']) fs.symlinkSync('busybox', path.join(rootfs, 'bin', a));
  fs.writeFileSync(path.join(rootfs, 'etc', 'msg'), 'one\n');
});
afterAll(() => {
  killQemuMentioning(home);
  fs.rmSync(home, { recursive: true, force: true });
});

const images = () => fs.readdirSync(path.join(assets, 'images')).filter((n) => n.startsWith('dir-'));

describe('smol run --image DIR, repeated', () => {
  it('a repeat run of an unchanged tree boots its cached base without hashing again', async () => {
    expect((await run(['--image', rootfs, '--', 'cat', '/etc/msg'])).stdout).toBe('one\n');
    const r = await run(['--image', rootfs, '--', 'cat', '/etc/msg']);
    expect(r.stdout).toBe('one\n');
    expect(r.code).toBe(0);
    expect(r.stderr).not.toMatch(/changed since it was last hashed|building image/);
    expect(images()).toHaveLength(1);
  });

  it('a same-size edit made since the last run is what the command sees', async () => {
    fs.writeFileSync(path.join(rootfs, 'etc', 'msg'), 'two\n');
    const r = await run(['--image', rootfs, '--', 'cat', '/etc/msg']);
    expect(r.stderr).toMatch(/changed since it was last hashed: hashing it again/);
    expect(r.stdout).toBe('two\n');
    expect(r.code).toBe(0);
    expect(images()).toHaveLength(2);
    // the new digest is cached in turn: the next run trusts it, and it holds
    const again = await run(['--image', rootfs, '--', 'cat', '/etc/msg']);
    expect(again.stdout).toBe('two\n');
    expect(again.stderr).not.toMatch(/changed since it was last hashed/);
  });

  it('leaves no machine and no QEMU behind, also from the run that started over', async () => {
    expect((await smol(['machine', 'ls', '--json'], { home, env: { SMOL_ASSETS: assets } })).stdout.trim()).toBe('[]');
    expect(qemuProcessesMentioning(home)).toEqual([]);
  });

  it('image rm takes the directory as image ls shows it (or relative to here), with every version built from it', async () => {
    const cli = (args: string[]) => smol(args, { home, env: { SMOL_ASSETS: assets }, cwd: home });
    const listed = (JSON.parse((await cli(['image', 'ls', '--json'])).stdout) as { ref: string; kind: string; id: string }[]).filter((e) => e.kind === 'directory');
    expect(listed.map((e) => e.ref)).toEqual([rootfs, rootfs]);
    const rm = await cli(['image', 'rm', '--json', './rootfs']);
    expect(rm.code, rm.stderr).toBe(0);
    expect((JSON.parse(rm.stdout) as { removed: string[] }).removed.sort()).toEqual(listed.map((e) => e.id).sort());
    expect(images()).toEqual([]);
    const again = await cli(['image', 'rm', rootfs]);
    expect(again.code).toBe(66);
    expect(again.stderr).toContain(`no cached image "${rootfs}"`);
  });
});
