import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createOverlay, resolveImage } from '../../../../src/vm/image/index.js';
import { NotFoundError, ValidationError } from '../../../../src/errors/index.js';
import { writeDockerSave } from '../../../fixtures/images/make-image-tarballs.js';

const tmp = mkdtempSync(path.join(os.tmpdir(), 'resolve-'));
const home = path.join(tmp, 'home');
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** Read a file out of an ext4 qcow2 without mounting: convert to raw, then debugfs. */
function debugfs(qcow2: string, request: string): string {
  const raw = path.join(tmp, `${path.basename(path.dirname(qcow2))}.raw`);
  execFileSync('qemu-img', ['convert', '-f', 'qcow2', '-O', 'raw', qcow2, raw]);
  try {
    return execFileSync('debugfs', ['-R', request, raw], { stdio: ['ignore', 'pipe', 'ignore'] }).toString();
  } finally {
    rmSync(raw, { force: true });
  }
}

describe('resolveImage', () => {
  it('says clearly when an image does not exist; a registry name offline says how to pull it', async () => {
    await expect(resolveImage(path.join(tmp, 'nope'), home)).rejects.toBeInstanceOf(NotFoundError);
    const err = await resolveImage('alpine:3.20', home, { offline: true }).catch((e: unknown) => e) as NotFoundError;
    expect(err).toBeInstanceOf(NotFoundError);
    expect(err.message).toContain('docker.io/library/alpine:3.20 is not in the local image cache');
    expect(err.hint).toMatch(/smol image pull alpine:3.20/);
    // a bare name may be a mistyped path as well as a Docker Hub name: the hint says which path was not there
    const bare = await resolveImage('myrootfs', home, { offline: true }).catch((e: unknown) => e) as NotFoundError;
    expect(bare).toBeInstanceOf(NotFoundError);
    expect(bare.hint).toContain(`there is no ${path.resolve('myrootfs')}`);
    expect(err.hint).not.toMatch(/rootfs directory/);
    writeFileSync(path.join(tmp, 'notes.txt'), 'x');
    await expect(resolveImage(path.join(tmp, 'notes.txt'), home)).rejects.toBeInstanceOf(ValidationError);
  });

  it('builds a read-only ext4 qcow2 base from a rootfs directory, cached by content', async () => {
    const dir = path.join(tmp, 'rootfs');
    mkdirSync(path.join(dir, 'etc'), { recursive: true });
    writeFileSync(path.join(dir, 'etc/hello'), 'from a directory\n');
    const img = await resolveImage(dir, home);
    expect(img.kind).toBe('directory');
    expect(img.id).toMatch(/^dir-[0-9a-f]{24}$/);
    expect(statSync(img.basePath).mode & 0o222).toBe(0);
    expect(debugfs(img.basePath, 'cat /etc/hello')).toBe('from a directory\n');
    const again = await resolveImage(dir, home);
    expect(again).toEqual(img);
    writeFileSync(path.join(dir, 'etc/hello'), 'changed\n');
    expect((await resolveImage(dir, home)).id).not.toBe(img.id);
  });

  it('builds a base from a docker save tarball with its layers applied and its run config kept', async () => {
    const file = path.join(tmp, 'fixture.tar');
    await writeDockerSave(file);
    const img = await resolveImage(file, home);
    expect(img.kind).toBe('docker');
    expect(img.config.cmd).toEqual(['/bin/sh']);
    expect(debugfs(img.basePath, 'cat /etc/smol-release')).toBe('smol docker fixture\n');
    const keep = debugfs(img.basePath, 'ls -p /keep').split('\n').map((l) => l.split('/')[5]).filter(Boolean);
    expect(keep.sort()).toEqual(['.', '..', 'b.txt']);
  });

  it('creates per-machine overlays backed by the shared base', async () => {
    const dir = path.join(tmp, 'rootfs2');
    mkdirSync(dir);
    writeFileSync(path.join(dir, 'x'), 'x');
    const img = await resolveImage(dir, home);
    const overlay = path.join(tmp, 'm1.qcow2');
    await createOverlay(img.basePath, overlay, { sizeBytes: 2 * 1024 ** 3 });
    const info = JSON.parse(execFileSync('qemu-img', ['info', '--output=json', overlay]).toString()) as { 'backing-filename': string; 'virtual-size': number; format: string };
    expect(info.format).toBe('qcow2');
    expect(info['backing-filename']).toBe(img.basePath);
    expect(info['virtual-size']).toBe(2 * 1024 ** 3);
    await expect(createOverlay(path.join(tmp, 'missing.qcow2'), path.join(tmp, 'm2.qcow2'))).rejects.toBeInstanceOf(NotFoundError);
  });
});
