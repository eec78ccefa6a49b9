/** The files routes' pure parts: guest path checks and the parsing of a guest's (hostile) listing. */
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import type http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../../src/api/errors.js';
import { LIST_MAX_ENTRIES, parseListing, scratch, sweepScratch } from '../../../src/api/files-io.js';
import { guestPathSchema } from '../../../src/api/schemas/files.js';

describe('guest paths', () => {
  it('takes absolute paths and refuses relative, .., NUL and over-long ones', () => {
    for (const ok of ['/', '/etc/hostname', '/a/..b/c', '/srv/app/']) expect(guestPathSchema.safeParse(ok).success, ok).toBe(true);
    for (const bad of ['', 'etc', './x', '/a/../b', '/..', '/a\0b', `/${'x'.repeat(4096)}`]) expect(guestPathSchema.safeParse(bad).success, bad).toBe(false);
  });
});

describe('parseListing', () => {
  it('reads type, size and mode from stat\'s raw hex mode', () => {
    const r = parseListing('81a4 12 ./b.txt\n41ed 4096 ./a\na1ff 7 ./l\n11b6 0 ./fifo\n');
    expect(r).toEqual({
      truncated: false,
      entries: [
        { name: 'a', type: 'dir', size: 4096, mode: '0755' },
        { name: 'b.txt', type: 'file', size: 12, mode: '0644' },
        { name: 'fifo', type: 'other', size: 0, mode: '0666' },
        { name: 'l', type: 'symlink', size: 7, mode: '0777' },
      ],
    });
  });

  it('drops lines a hostile guest mangled: no prefix, slashes, over-long names, split names', () => {
    const r = parseListing(['81a4 1 ./ok', 'garbage', '81a4 1 /abs', '81a4 1 ./a/b', `81a4 1 ./${'n'.repeat(256)}`, '81a4 1 ./first', 'half of a name', 'zz 1 ./bad'].join('\n'));
    expect(r.entries.map((e) => e.name)).toEqual(['first', 'ok']);
  });

  it('keeps at most LIST_MAX_ENTRIES and says it cut the rest', () => {
    const text = Array.from({ length: LIST_MAX_ENTRIES + 1 }, (_, i) => `81a4 1 ./f${i}`).join('\n');
    const r = parseListing(text);
    expect(r.entries.length).toBe(LIST_MAX_ENTRIES);
    expect(r.truncated).toBe(true);
  });
});

describe('staged transfers', () => {
  const home = () => fs.mkdtempSync(path.join(os.tmpdir(), 'smol-files-io-'));

  it('stages at most 4 at once; past that 503 unavailable with Retry-After, until one is done', async () => {
    const h = home();
    const headers: Record<string, string> = {};
    const res = { setHeader: (k: string, v: string) => { headers[k] = v; } } as unknown as http.ServerResponse;
    const held = await Promise.all([1, 2, 3, 4].map(() => scratch(h, res)));
    const err = await scratch(h, res).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect(err).toMatchObject({ status: 503, code: 'unavailable' });
    expect(headers['retry-after']).toBe('5');
    await held[0].done();
    await held[0].done(); // twice frees one slot, not two
    const again = await scratch(h, res);
    await expect(scratch(h, res)).rejects.toBeInstanceOf(ApiError);
    for (const t of [again, ...held.slice(1)]) await t.done();
    fs.rmSync(h, { recursive: true, force: true });
  });

  it('at server start removes the scratch dirs of dead servers only', async () => {
    const h = home();
    const tmp = path.join(h, 'tmp');
    const dead = spawnSync(process.execPath, ['-e', 'process.stdout.write(String(process.pid))'], { encoding: 'utf8' }).stdout;
    const names = [`api-${dead}-a`, `api-${process.pid}-b`, `api-${process.ppid}-c`, 'api-oldold', 'api-newnew', 'other'];
    for (const n of names) fs.mkdirSync(path.join(tmp, n, 'sub'), { recursive: true });
    const hourAgo = new Date(Date.now() - 2 * 3600_000);
    fs.utimesSync(path.join(tmp, 'api-oldold'), hourAgo, hourAgo);
    expect((await sweepScratch(h)).sort()).toEqual([`api-${dead}-a`, 'api-oldold']);
    expect(fs.readdirSync(tmp).sort()).toEqual([`api-${process.pid}-b`, `api-${process.ppid}-c`, 'api-newnew', 'other'].sort());
    expect(await sweepScratch(path.join(h, 'none'))).toEqual([]);
    fs.rmSync(h, { recursive: true, force: true });
  });
});
