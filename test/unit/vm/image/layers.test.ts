import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { applyLayer, safeComponents } from '../../../../src/vm/image/layers.js';
import { unpackImageTarball } from '../../../../src/vm/image/tarball.js';
import { ValidationError } from '../../../../src/errors/index.js';
import { EXPECTED, writeDockerSave, writeOciLayout, writeRawTar } from '../../../fixtures/images/make-image-tarballs.js';

const tmp = mkdtempSync(path.join(os.tmpdir(), 'layers-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let n = 0;
const fresh = () => { const d = path.join(tmp, `case${n++}`); mkdirSync(path.join(d, 'root'), { recursive: true }); mkdirSync(path.join(d, 'work')); return d; };

async function applyAll(file: string, d: string) {
  const img = await unpackImageTarball(file, path.join(d, 'work'));
  for (const l of img.layers) await applyLayer(path.join(d, 'root'), l);
  return img;
}

function expectFixtureRoot(root: string) {
  for (const p of EXPECTED.present) expect(existsSync(path.join(root, p)) || lstatSync(path.join(root, p)).isSymbolicLink(), p).toBe(true);
  for (const p of EXPECTED.absent) expect(existsSync(path.join(root, p)), p).toBe(false);
  expect(readFileSync(path.join(root, 'etc/smol-release'), 'utf8')).toBe(EXPECTED.release);
  expect(readFileSync(path.join(root, 'data/replaced.txt'), 'utf8')).toBe('v3\n');
  expect(readlinkSync(path.join(root, 'bin/sh'))).toBe(EXPECTED.shLink);
  expect(existsSync(path.join(root, 'opaque'))).toBe(true);
  expect(existsSync(path.join(root, 'keep/.wh.a.txt'))).toBe(false);
  expect(existsSync(path.join(root, 'opaque/.wh..wh..opq'))).toBe(false);
}

describe('image layers', () => {
  it('applies a docker save tarball in order with whiteouts and opaque directories', async () => {
    const d = fresh();
    const file = path.join(d, 'img.tar');
    await writeDockerSave(file);
    const img = await applyAll(file, d);
    expect(img.format).toBe('docker');
    expect(img.layers).toHaveLength(3);
    expect(img.tags).toEqual(['smol/fixture:latest']);
    expect(img.config).toEqual({ env: ['PATH=/bin', 'FIXTURE=1'], entrypoint: [], cmd: ['/bin/sh'], workingDir: '/keep', user: '' });
    expectFixtureRoot(path.join(d, 'root'));
    expect(lstatSync(path.join(d, 'root/bin/busybox')).mode & 0o777).toBe(0o755);
  });

  it('applies an OCI image layout tarball, gzip-compressed layers included', async () => {
    const d = fresh();
    const file = path.join(d, 'oci.tar');
    await writeOciLayout(file);
    const img = await applyAll(file, d);
    expect(img.format).toBe('oci');
    expect(img.tags).toEqual(['fixture']);
    expectFixtureRoot(path.join(d, 'root'));
  });

  it('refuses entries with .. and leaves nothing outside the root', async () => {
    const d = fresh();
    const layer = path.join(d, 'evil.tar');
    await writeRawTar(layer, [{ path: 'ok.txt', body: 'fine' }, { path: '../escaped.txt', body: 'pwned' }]);
    await expect(applyLayer(path.join(d, 'root'), layer)).rejects.toBeInstanceOf(ValidationError);
    expect(existsSync(path.join(d, 'escaped.txt'))).toBe(false);
  });

  it('refuses to write through a symlink planted by a lower layer', async () => {
    const d = fresh();
    const outside = path.join(d, 'outside');
    mkdirSync(outside);
    const l1 = path.join(d, 'l1.tar');
    const l2 = path.join(d, 'l2.tar');
    await writeRawTar(l1, [{ path: 'evil', type: 'SymbolicLink', linkpath: outside }]);
    await writeRawTar(l2, [{ path: 'evil/pwned.txt', body: 'pwned' }]);
    await applyLayer(path.join(d, 'root'), l1);
    expect(readlinkSync(path.join(d, 'root/evil'))).toBe(outside);
    await expect(applyLayer(path.join(d, 'root'), l2)).rejects.toBeInstanceOf(ValidationError);
    expect(existsSync(path.join(outside, 'pwned.txt'))).toBe(false);
  });

  it('refuses whiteouts that would delete through a symlink', async () => {
    const d = fresh();
    const outside = path.join(d, 'outside');
    mkdirSync(outside);
    mkdirSync(path.join(outside, 'precious'));
    symlinkSync(outside, path.join(d, 'root/link'));
    const l = path.join(d, 'wh.tar');
    await writeRawTar(l, [{ path: 'link/.wh.precious', body: '' }]);
    await expect(applyLayer(path.join(d, 'root'), l)).rejects.toBeInstanceOf(ValidationError);
    const o = path.join(d, 'op.tar');
    await writeRawTar(o, [{ path: 'link/.wh..wh..opq', body: '' }]);
    await expect(applyLayer(path.join(d, 'root'), o)).rejects.toBeInstanceOf(ValidationError);
    expect(existsSync(path.join(outside, 'precious'))).toBe(true);
  });

  it('rejects image archives that name layers outside themselves', async () => {
    const d = fresh();
    const file = path.join(d, 'bad.tar');
    await writeRawTar(file, [{ path: 'manifest.json', body: JSON.stringify([{ Config: 'c.json', Layers: ['../../etc/passwd'] }]) }, { path: 'c.json', body: '{}' }]);
    await expect(unpackImageTarball(file, path.join(d, 'work'))).rejects.toThrow(/outside itself/);
    const notImage = path.join(d, 'plain.tar');
    await writeRawTar(notImage, [{ path: 'hello.txt', body: 'hi' }]);
    await expect(unpackImageTarball(notImage, path.join(d, 'work2'))).rejects.toThrow(/neither a docker save nor an OCI/);
  });

  it('normalises layer paths', () => {
    expect(safeComponents('./a//b/./c')).toEqual(['a', 'b', 'c']);
    expect(safeComponents('/abs/x')).toEqual(['abs', 'x']);
    expect(safeComponents('a/../../b')).toBeNull();
  });
});
