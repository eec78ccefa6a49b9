import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { killQemuMentioning, scratchHome, smol } from '../../helpers/cli.js';

let home: string;
beforeAll(() => { home = scratchHome('packvm'); });
afterAll(() => {
  killQemuMentioning(home);
  fs.rmSync(home, { recursive: true, force: true });
});

describe('.smolmachine from and to real machines', () => {
  it('packs a stopped machine, runs the artifact and creates a machine from it with the same disk state', async () => {
    const art = path.join(home, 'm.smolmachine');
    expect((await smol(['machine', 'create', 'src', '--start', '-e', 'WHO=packed'], { home })).code).toBe(0);
    expect((await smol(['machine', 'exec', 'src', '--', 'sh', '-c', 'echo disk-state > /root/marker'], { home })).code).toBe(0);
    const running = await smol(['pack', 'create', '--from-vm', 'src', '-o', art], { home });
    expect(running.code).toBe(67);
    expect(running.stderr).toMatch(/stop/i);
    expect((await smol(['machine', 'stop', 'src'], { home })).code).toBe(0);
    const packed = await smol(['pack', 'create', '--from-vm', 'src', '-o', art], { home });
    expect(packed.code, packed.stderr).toBe(0);
    expect((await smol(['pack', 'verify', art], { home })).code).toBe(0);

    const run = await smol(['pack', 'run', art, '--', 'sh', '-c', 'cat /root/marker; echo $WHO'], { home });
    expect(run.stdout).toBe('disk-state\npacked\n');
    expect(run.code).toBe(0);

    // the first run saved a boot snapshot with the disk as boot left it; later runs restore it, each on its own overlay
    const verbose = { home, env: { SMOL_VERBOSE: '1' } };
    const again = await smol(['pack', 'run', art, '--', 'sh', '-c', 'cat /root/marker; ls /root; echo mine > /root/written'], verbose);
    expect(again.stderr).toMatch(/restoring the boot snapshot/);
    expect(again.stderr).not.toMatch(/booting/);
    expect(again.stdout).toBe('disk-state\nmarker\n');
    const third = await smol(['pack', 'run', art, '--', 'ls', '/root'], verbose);
    expect(third.stderr).toMatch(/restoring the boot snapshot/);
    expect(third.stdout).toBe('marker\n');

    expect((await smol(['machine', 'create', 'copy', '--from', art, '--start'], { home })).code).toBe(0);
    const r = await smol(['machine', 'exec', 'copy', '--', 'cat', '/root/marker'], { home });
    expect(r.stdout).toBe('disk-state\n');
    expect((await smol(['machine', 'rm', '-f', 'copy', 'src'], { home })).code).toBe(0);
  });

  it('maps a missing guest command to exit 127', async () => {
    const r = await smol(['run', '--', 'no-such-command'], { home });
    expect(r.code).toBe(127);
    expect(r.stderr).toMatch(/no-such-command: command not found/);
  });
});
