import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { extractArtifact, type ArtifactManifest } from '../../../src/artifact/index.js';
import { run as exec } from '../../../src/util/exec.js';
import { readQcow2Header } from '../../../src/vm/image/qcow2.js';
import { killQemuMentioning, qemuProcessesMentioning, scratchHome, smol } from '../../helpers/cli.js';
import { craftWithDisk, storedMembers } from '../../unit/artifact/helpers.js';

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

  it('refuses an artifact whose disk reads a host file through its qcow2 backing file (76), before any VM starts', async () => {
    // the attack of issue #31: a real bootable artifact, its disk grown by 1 MiB the qcow2 leaves unallocated
    // and given a host file as raw backing file (not flattened), so the guest reads that file past its own data
    const good = path.join(home, 'default.smolmachine');
    const packed = await smol(['pack', 'create', '--image', 'default', '-o', good], { home });
    expect(packed.code, packed.stderr).toBe(0);
    const work = fs.mkdtempSync(path.join(home, 'craft-'));
    const x = await extractArtifact(good, path.join(work, 'x'));
    const disk = x.files.disk!;
    const end = readQcow2Header(disk).virtualSize;
    const secret = `host-secret-${process.pid}-31`;
    const hostFile = path.join(work, 'host-secret');
    fs.writeFileSync(hostFile, '');
    fs.truncateSync(hostFile, end);
    fs.appendFileSync(hostFile, `${secret}\n`);
    await exec('qemu-img', ['resize', '-q', '-f', 'qcow2', disk, '+1M']);
    await exec('qemu-img', ['rebase', '-q', '-u', '-f', 'qcow2', '-b', hostFile, '-F', 'raw', disk]);
    const crafted = await craftWithDisk(work, x.manifest as ArtifactManifest, await storedMembers(good, x.manifest), fs.readFileSync(disk));
    const evil = path.join(home, 'evil.smolmachine');
    fs.writeFileSync(evil, crafted.bytes);
    const cache = path.join(home, 'cache', 'artifacts');
    const cachedBefore = fs.existsSync(cache) ? fs.readdirSync(cache).sort() : [];
    const machinesBefore = (await smol(['machine', 'ls', '--json'], { home })).stdout;
    const words = new RegExp(`disk\\.qcow2 names the backing file "${hostFile}"`);

    const run = await smol(['pack', 'run', evil, '--', 'sh', '-c', `dd if=/dev/vda bs=512 skip=${end / 512} count=1 2>/dev/null`], { home, timeoutMs: 300_000 });
    expect(run.stdout).not.toContain(secret);
    expect(run.code, run.stderr).toBe(76);
    expect(run.stderr).toMatch(words);

    const verify = await smol(['pack', 'verify', evil], { home });
    expect(verify.code, verify.stderr).toBe(76);
    expect(verify.stderr).toMatch(words);

    const create = await smol(['machine', 'create', 'evil', '--from', evil], { home });
    expect(create.code, create.stderr).toBe(76);
    expect(create.stderr).toMatch(words);

    // nothing left: no machine (throwaway or named), no QEMU, no extracted copy of the artifact
    expect((await smol(['machine', 'ls', '--json'], { home })).stdout).toBe(machinesBefore);
    expect(qemuProcessesMentioning(home)).toEqual([]);
    expect(fs.existsSync(cache) ? fs.readdirSync(cache).sort() : []).toEqual(cachedBefore);
  }, 600_000);

  it('maps a missing guest command to exit 127', async () => {
    const r = await smol(['run', '--', 'no-such-command'], { home });
    expect(r.code).toBe(127);
    expect(r.stderr).toMatch(/no-such-command: command not found/);
  });
});
