import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, utimesSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { listTree, writeCpio } from '../../../../src/vm/image/cpio.js';

const tmp = mkdtempSync(path.join(os.tmpdir(), 'cpio-'));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

function tree(dir: string, mtime: number) {
  mkdirSync(path.join(dir, 'b/c'), { recursive: true });
  writeFileSync(path.join(dir, 'init'), '#!/bin/sh\n', { mode: 0o755 });
  writeFileSync(path.join(dir, 'b/c/z.txt'), 'z');
  writeFileSync(path.join(dir, 'a.txt'), 'a');
  symlinkSync('b/c/z.txt', path.join(dir, 'link'));
  for (const p of ['init', 'b/c/z.txt', 'a.txt']) utimesSync(path.join(dir, p), mtime, mtime);
}

describe('deterministic cpio', () => {
  it('lists trees sorted with directories before their contents', async () => {
    const d = path.join(tmp, 'list');
    mkdirSync(d);
    tree(d, 1000);
    expect(await listTree(d)).toEqual(['a.txt', 'b', 'b/c', 'b/c/z.txt', 'init', 'link']);
  });

  it('gives identical bytes for the same tree regardless of mtimes, and cpio reads it back', async () => {
    const d1 = path.join(tmp, 't1');
    const d2 = path.join(tmp, 't2');
    mkdirSync(d1);
    mkdirSync(d2);
    tree(d1, 1000);
    tree(d2, 2_000_000);
    await writeCpio(d1, path.join(tmp, '1.cpio'));
    await writeCpio(d2, path.join(tmp, '2.cpio'));
    const b1 = readFileSync(path.join(tmp, '1.cpio'));
    expect(b1.equals(readFileSync(path.join(tmp, '2.cpio')))).toBe(true);
    expect(b1.subarray(0, 6).toString()).toBe('070701'); // newc magic
    const listing = execFileSync('cpio', ['-it', '--quiet'], { input: b1 }).toString().trim().split('\n');
    expect(listing).toEqual(['.', 'a.txt', 'b', 'b/c', 'b/c/z.txt', 'init', 'link']);
  });
});
