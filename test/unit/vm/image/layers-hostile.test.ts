/**
 * Crafted layers as an image author who wants the host would write them: whiteouts that name `.` or `..`,
 * hard links out of the root or through a planted symlink, and more content than an image may unpack.
 * Each must be refused (65) before anything outside the root, or the root itself, is touched.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import * as tar from 'tar';
import { afterAll, describe, expect, it } from 'vitest';
import { UserError, ValidationError } from '../../../../src/errors/index.js';
import { applyLayer, unpackBudget } from '../../../../src/vm/image/layers.js';
import { IMAGE_MAX_FILES, IMAGE_MAX_GIB } from '../../../../src/vm/limits.js';

const tmp = mkdtempSync(path.join(os.tmpdir(), 'layers-hostile-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));
let n = 0;

/** A case directory: `root/` (the rootfs, with `a/keep.txt`) beside `sentinel` (host data next to it). */
function fresh(): { d: string; root: string } {
  const d = path.join(tmp, `case${n++}`);
  const root = path.join(d, 'root');
  mkdirSync(path.join(root, 'a'), { recursive: true });
  writeFileSync(path.join(root, 'a/keep.txt'), 'lower layer');
  writeFileSync(path.join(d, 'sentinel'), 'host');
  return { d, root };
}

interface Raw { path: string; type?: 'File' | 'Link' | 'SymbolicLink' | 'Directory'; body?: string; linkpath?: string }

/** Headers written verbatim, hard links included. */
function rawTar(file: string, entries: Raw[]): string {
  const blocks: Buffer[] = [];
  for (const e of entries) {
    const body = Buffer.from(e.body ?? '');
    const type = e.type ?? 'File';
    const h = new tar.Header({ path: e.path, mode: 0o644, uid: 0, gid: 0, size: type === 'File' ? body.length : 0, mtime: new Date(0), type, linkpath: e.linkpath ?? '' });
    const hb = Buffer.alloc(512);
    h.encode(hb, 0);
    blocks.push(hb);
    if (type === 'File' && body.length) blocks.push(body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  writeFileSync(file, Buffer.concat(blocks));
  return file;
}

const big = budget(1 << 30, 1 << 20);
function budget(bytes: number, entries: number) { return () => ({ bytes, entries }); }

describe('hostile layers', () => {
  for (const wh of ['.wh...', 'a/.wh...', '.wh..', 'a/.wh..', '.wh.', 'a/b/../.wh.x']) {
    it(`refuses the whiteout ${wh} and touches neither the root nor its parent`, async () => {
      const { d, root } = fresh();
      const layer = rawTar(path.join(tmp, `wh${n}.tar`), [{ path: 'new.txt', body: 'x' }, { path: wh, body: '' }]);
      const err = await applyLayer(root, layer, 'evil', big()).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ValidationError);
      expect((err as ValidationError).exitCode).toBe(65);
      expect(readFileSync(path.join(d, 'sentinel'), 'utf8')).toBe('host');
      expect(readFileSync(path.join(root, 'a/keep.txt'), 'utf8')).toBe('lower layer');
      expect(existsSync(path.join(root, 'new.txt'))).toBe(false); // refused before extraction
    });
  }

  it('still applies ordinary whiteouts, and skips aufs .wh..wh. bookkeeping', async () => {
    const { root } = fresh();
    writeFileSync(path.join(root, 'a/gone.txt'), 'x');
    writeFileSync(path.join(root, '.wh.plnk'), 'a file whose name starts like a whiteout');
    await applyLayer(root, rawTar(path.join(tmp, `ok${n}.tar`), [{ path: 'a/.wh.gone.txt' }, { path: '.wh..wh.plnk' }]), 'ok', big());
    expect(existsSync(path.join(root, 'a/gone.txt'))).toBe(false);
    expect(existsSync(path.join(root, '.wh.plnk'))).toBe(true);
    expect(existsSync(path.join(root, 'a/keep.txt'))).toBe(true);
  });

  it('refuses a hard link through a symlink a lower layer planted, and one with ..', async () => {
    const { d, root } = fresh();
    symlinkSync(d, path.join(root, 'evil'));
    for (const linkpath of ['evil/sentinel', '../sentinel', 'a/../../sentinel']) {
      const layer = rawTar(path.join(tmp, `hl${n++}.tar`), [{ path: 'h', type: 'Link', linkpath }]);
      await expect(applyLayer(root, layer, 'hl', big())).rejects.toBeInstanceOf(ValidationError);
      expect(existsSync(path.join(root, 'h'))).toBe(false);
    }
    expect(statSync(path.join(d, 'sentinel')).nlink).toBe(1);
  });

  it('resolves absolute paths and hard-link targets inside the root', async () => {
    const { root } = fresh();
    await applyLayer(root, rawTar(path.join(tmp, `abs${n}.tar`), [{ path: '/abs.txt', body: 'in' }, { path: '/h', type: 'Link', linkpath: '/a/keep.txt' }]), 'abs', big());
    expect(readFileSync(path.join(root, 'abs.txt'), 'utf8')).toBe('in');
    expect(statSync(path.join(root, 'h')).ino).toBe(statSync(path.join(root, 'a/keep.txt')).ino);
  });

  it('stops at the image budget before writing, across layers', async () => {
    const { root } = fresh();
    const b = budget(3000, 100)();
    await applyLayer(root, rawTar(path.join(tmp, `b1.tar`), [{ path: 'one', body: 'x'.repeat(2000) }]), 'l1', b);
    const err = await applyLayer(root, rawTar(path.join(tmp, `b2.tar`), [{ path: 'two', body: 'y'.repeat(2000) }]), 'l2', b).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as Error).message).toMatch(/l2 is too large: .*SMOL_IMAGE_MAX_GIB/);
    expect(existsSync(path.join(root, 'two'))).toBe(false);
    const many = rawTar(path.join(tmp, `many.tar`), Array.from({ length: 5 }, (_, i) => ({ path: `f${i}` })));
    await expect(applyLayer(root, many, 'many', { bytes: 1 << 20, entries: 4 })).rejects.toThrow(/SMOL_IMAGE_MAX_FILES/);
    expect(existsSync(path.join(root, 'f0'))).toBe(false);
  });

  it('reads the budget from the environment', () => {
    expect(unpackBudget({})).toEqual({ bytes: IMAGE_MAX_GIB * 2 ** 30, entries: IMAGE_MAX_FILES });
    expect(unpackBudget({ SMOL_IMAGE_MAX_GIB: '2', SMOL_IMAGE_MAX_FILES: '10' })).toEqual({ bytes: 2 * 2 ** 30, entries: 10 });
    expect(() => unpackBudget({ SMOL_IMAGE_MAX_GIB: '1.5' })).toThrow(UserError);
    expect(() => unpackBudget({ SMOL_IMAGE_MAX_FILES: '0' })).toThrow(/SMOL_IMAGE_MAX_FILES must be a whole number/);
  });
});
