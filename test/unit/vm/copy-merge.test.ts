/** Merging a tree from a guest into an existing host directory never follows what is already there (#31.1). */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConflictError } from '../../../src/errors/index.js';
import { mergeInto } from '../../../src/vm/copy-merge.js';

let base: string, from: string, to: string, outside: string;
beforeEach(() => {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-merge-'));
  [from, to, outside] = ['from', 'to', 'outside'].map((n) => path.join(base, n)) as [string, string, string];
  for (const d of [from, to, outside]) fs.mkdirSync(d);
});
afterEach(() => fs.rmSync(base, { recursive: true, force: true }));

describe('mergeInto', () => {
  it('replaces symlinks in the target instead of writing through them', async () => {
    fs.symlinkSync(outside, path.join(to, 'esc'));
    fs.symlinkSync(path.join(outside, 'victim'), path.join(to, 'file-link'));
    fs.mkdirSync(path.join(from, 'esc'));
    fs.writeFileSync(path.join(from, 'esc', 'pwned'), 'x');
    fs.writeFileSync(path.join(from, 'file-link'), 'y');
    await mergeInto(from, to);
    expect(fs.readdirSync(outside)).toEqual([]);
    expect(fs.lstatSync(path.join(to, 'esc')).isDirectory()).toBe(true);
    expect(fs.readFileSync(path.join(to, 'esc', 'pwned'), 'utf8')).toBe('x');
    expect(fs.lstatSync(path.join(to, 'file-link')).isFile()).toBe(true);
  });

  it('merges into real directories, keeping what the copy does not name, and takes the copy\'s modes', async () => {
    fs.mkdirSync(path.join(to, 'sub'));
    fs.writeFileSync(path.join(to, 'sub', 'mine'), 'keep');
    fs.writeFileSync(path.join(to, 'sub', 'theirs'), 'old');
    fs.mkdirSync(path.join(from, 'sub'), { mode: 0o750 });
    fs.chmodSync(path.join(from, 'sub'), 0o750);
    fs.writeFileSync(path.join(from, 'sub', 'theirs'), 'new');
    await mergeInto(from, to);
    expect(fs.readdirSync(path.join(to, 'sub')).sort()).toEqual(['mine', 'theirs']);
    expect(fs.readFileSync(path.join(to, 'sub', 'theirs'), 'utf8')).toBe('new');
    expect((fs.statSync(path.join(to, 'sub')).mode & 0o777).toString(8)).toBe('750');
  });

  it('refuses to replace a host directory with a file, before moving anything', async () => {
    fs.mkdirSync(path.join(to, 'd'));
    fs.writeFileSync(path.join(to, 'd', 'precious'), 'p');
    fs.writeFileSync(path.join(from, 'a-first'), 'a');
    fs.writeFileSync(path.join(from, 'd'), 'file');
    await expect(mergeInto(from, to)).rejects.toBeInstanceOf(ConflictError);
    expect(fs.readdirSync(to)).toEqual(['d']);
    expect(fs.readFileSync(path.join(to, 'd', 'precious'), 'utf8')).toBe('p');
  });
});
