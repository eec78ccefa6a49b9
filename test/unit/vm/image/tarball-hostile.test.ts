/**
 * Crafted image archives (`--image x.tar`): a layer or manifest that is a symlink to a host file (node-tar
 * already refuses to make such links; the archive reader checks again), and an archive that unpacks to more
 * than an image may hold. Refused with 65 before any layer is read.
 */
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as tar from 'tar';
import { afterAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../../../../src/errors/index.js';
import { unpackImageTarball } from '../../../../src/vm/image/tarball.js';

const tmp = mkdtempSync(path.join(os.tmpdir(), 'tarball-hostile-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let n = 0;

/** A docker save archive built from a staged directory, symlinks kept as symlinks. */
async function archive(files: Record<string, string>, links: Record<string, string> = {}): Promise<{ file: string; work: string }> {
  const stage = path.join(tmp, `stage${n}`);
  for (const [p, body] of Object.entries(files)) { mkdirSync(path.dirname(path.join(stage, p)), { recursive: true }); writeFileSync(path.join(stage, p), body); }
  for (const [p, target] of Object.entries(links)) { mkdirSync(path.dirname(path.join(stage, p)), { recursive: true }); (await import('node:fs')).symlinkSync(target, path.join(stage, p)); }
  const file = path.join(tmp, `img${n}.tar`);
  await tar.c({ file, cwd: stage, portable: true }, ['.']);
  return { file, work: path.join(tmp, `work${n++}`) };
}

const manifest = (layers: string[]) => JSON.stringify([{ Config: 'c.json', RepoTags: null, Layers: layers }]);

describe('hostile image archives', () => {
  it('refuses a layer that is a symlink to a host file', async () => {
    const host = path.join(tmp, 'host-secret.tar');
    writeFileSync(host, 'not for the guest');
    const a = await archive({ 'manifest.json': manifest(['l/layer.tar']), 'c.json': '{}' }, { 'l/layer.tar': host });
    const err = await unpackImageTarball(a.file, a.work).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).exitCode).toBe(65);
  });

  it('refuses a manifest that is a symlink to a host file, and a layer that is a directory', async () => {
    const a = await archive({ 'c.json': '{}' }, { 'manifest.json': '/etc/passwd' });
    await expect(unpackImageTarball(a.file, a.work)).rejects.toBeInstanceOf(ValidationError);
    const b = await archive({ 'manifest.json': manifest(['d']), 'c.json': '{}', 'd/x': '' });
    await expect(unpackImageTarball(b.file, b.work)).rejects.toThrow(/outside itself/);
  });

  it('follows docker save links between its own layers', async () => {
    const a = await archive({ 'manifest.json': manifest(['a/layer.tar', 'b/layer.tar']), 'c.json': '{}', 'a/layer.tar': 'x' }, { 'b/layer.tar': '../a/layer.tar' });
    const img = await unpackImageTarball(a.file, a.work);
    expect(img.layers.map((l) => path.relative(a.work, l))).toEqual(['a/layer.tar', 'a/layer.tar']);
  });

  it('names a missing layer', async () => {
    const a = await archive({ 'manifest.json': manifest(['gone.tar']), 'c.json': '{}' });
    await expect(unpackImageTarball(a.file, a.work)).rejects.toThrow(/lacks gone\.tar/);
  });

  it('stops at the image budget before writing past it', async () => {
    const a = await archive({ 'manifest.json': manifest([]), 'c.json': '{}', 'big.bin': 'z'.repeat(10_000) });
    const err = await unpackImageTarball(a.file, a.work, { bytes: 5000, entries: 100 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as Error).message).toMatch(/too large/);
    expect(existsSync(path.join(a.work, 'big.bin'))).toBe(false);
  });
});
