/**
 * Extracting a guest's tar stream on the host (#31.1, #31.3): crafted streams as a guest root would send
 * them, into a fresh directory beside a host directory that must stay untouched.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { Readable } from 'node:stream';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { NoSpaceError, SmolError } from '../../../src/errors/index.js';
import { extractUntrusted, type ExtractOptions } from '../../../src/vm/copy-extract.js';
import { craftTar, type TarMember } from '../../helpers/craft-tar.js';

let base: string, root: string, outside: string, warnings: string[];
beforeEach(() => {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'smol-cpx-'));
  root = path.join(base, 'root');
  outside = path.join(base, 'outside');
  fs.mkdirSync(root);
  fs.mkdirSync(outside);
  warnings = [];
});
afterEach(() => fs.rmSync(base, { recursive: true, force: true }));

/** Small chunks, so entries straddle writes and back-pressure is exercised. */
function chunks(b: Buffer, size = 700): Readable {
  const out: Buffer[] = [];
  for (let i = 0; i < b.length; i += size) out.push(b.subarray(i, i + size));
  return Readable.from(out);
}

function extract(members: TarMember[] | Buffer, o: Partial<ExtractOptions> = {}) {
  const bytes = Buffer.isBuffer(members) ? members : craftTar(members);
  return extractUntrusted(chunks(bytes), root, {
    limit: { maxBytes: 1 << 20, overCap: () => new NoSpaceError('over the cap') },
    warn: (l) => warnings.push(l),
    ...o,
  });
}

const mode = (p: string) => (fs.lstatSync(path.join(root, p)).mode & 0o7777).toString(8);

async function refusedWith(members: TarMember[] | Buffer, re: RegExp): Promise<void> {
  const err = await extract(members).then(() => null, (e: unknown) => e);
  expect(err).toBeInstanceOf(SmolError);
  expect((err as SmolError).exitCode).toBe(76);
  expect((err as SmolError).message).toMatch(re);
  expect(fs.readdirSync(outside)).toEqual([]);
}

describe('extractUntrusted', () => {
  it('writes what an honest tar sends: dirs, files, modes, inside symlinks, hard links', async () => {
    const s = await extract([
      { path: './', type: 'Directory', mode: 0o750 },
      { path: './sub/', type: 'Directory', mode: 0o700 },
      { path: './sub/secret', data: 'only me\n', mode: 0o600 },
      { path: './run.sh', data: '#!/bin/sh\n', mode: 0o755 },
      { path: './link', type: 'SymbolicLink', linkpath: 'sub/secret' },
      { path: './hard', type: 'Link', linkpath: './run.sh' },
      { path: './implied/deep/file', data: 'x' },
    ]);
    expect(s.bytes).toBe(8 + 10 + 1);
    expect([mode('.'), mode('sub'), mode('sub/secret'), mode('run.sh'), mode('implied')]).toEqual(['750', '700', '600', '755', '755']);
    expect(fs.readlinkSync(path.join(root, 'link'))).toBe('sub/secret');
    expect(fs.statSync(path.join(root, 'hard')).ino).toBe(fs.statSync(path.join(root, 'run.sh')).ino);
    expect(fs.readFileSync(path.join(root, 'implied/deep/file'), 'utf8')).toBe('x');
    expect(warnings).toEqual([]);
  });

  it('refuses absolute paths and ..', async () => {
    await refusedWith([{ path: `${outside}/abs`, data: 'x' }], /leaves the directory/);
    await refusedWith([{ path: '../outside/up', data: 'x' }], /leaves the directory/);
    await refusedWith([{ path: 'a/../../outside/up', data: 'x' }], /leaves the directory/);
  });

  it('never writes through a symlink the stream made', async () => {
    await refusedWith([{ path: 'esc', type: 'SymbolicLink', linkpath: outside }, { path: 'esc/pwned', data: 'x' }], /through "esc", which it made a symlink/);
    await refusedWith([{ path: 'esc', type: 'SymbolicLink', linkpath: '../outside' }, { path: 'esc/d/', type: 'Directory' }], /symlink/);
    await refusedWith([{ path: 'f', data: 'x' }, { path: 'f/g', data: 'y' }], /which it made a file/);
  });

  it('hard links join files of the stream only, and a later file of that name replaces the link, not its target', async () => {
    const victim = path.join(base, 'victim');
    fs.writeFileSync(victim, 'host\n');
    await refusedWith([{ path: 'h', type: 'Link', linkpath: victim }], /hard link/);
    await refusedWith([{ path: 'h', type: 'Link', linkpath: '../victim' }], /hard link/);
    await refusedWith([{ path: 'esc', type: 'SymbolicLink', linkpath: base }, { path: 'h', type: 'Link', linkpath: 'esc/victim' }], /hard link/);
    await refusedWith([{ path: 'd/', type: 'Directory' }, { path: 'h', type: 'Link', linkpath: 'd' }], /hard link/);
    expect([fs.readFileSync(victim, 'utf8'), fs.statSync(victim).nlink]).toEqual(['host\n', 1]);
    fs.rmSync(root, { recursive: true });
    fs.mkdirSync(root);
    await extract([{ path: 'a', data: 'orig' }, { path: 'h', type: 'Link', linkpath: 'a' }, { path: 'h', data: 'new' }]);
    expect([fs.readFileSync(path.join(root, 'a'), 'utf8'), fs.readFileSync(path.join(root, 'h'), 'utf8')]).toEqual(['orig', 'new']);
  });

  it('drops setuid and setgid, keeps sticky on directories, owns everything as the host user', async () => {
    await extract([
      { path: 'suid', data: 'x', mode: 0o6755, uid: 1234, gid: 1234 },
      { path: 'sticky-file', data: 'x', mode: 0o1644 },
      { path: 'gdir/', type: 'Directory', mode: 0o2775, uid: 1234 },
      { path: 'tmp/', type: 'Directory', mode: 0o1777 },
    ]);
    expect([mode('suid'), mode('sticky-file'), mode('gdir'), mode('tmp')]).toEqual(['755', '644', '775', '1777']);
    expect(fs.lstatSync(path.join(root, 'suid')).uid).toBe(process.getuid!());
  });

  it('skips device nodes and FIFOs with one warning, and makes FIFOs when asked', async () => {
    const specials: TarMember[] = [
      { path: 'disk', type: 'BlockDevice', mode: 0o666, devmaj: 254, devmin: 0 },
      { path: 'null', type: 'CharacterDevice', mode: 0o666, devmaj: 1, devmin: 3 },
      { path: 'fifo', type: 'FIFO', mode: 0o4644 },
    ];
    await extract(specials);
    expect(fs.readdirSync(root)).toEqual([]);
    expect(warnings).toEqual([expect.stringMatching(/^skipped 3 special files .*disk, null, fifo; --preserve-special/)]);
    fs.rmSync(root, { recursive: true });
    fs.mkdirSync(root);
    await extract([specials[2]!], { preserveSpecial: true });
    const st = fs.lstatSync(path.join(root, 'fifo'));
    expect([st.isFIFO(), mode('fifo')]).toEqual([true, '644']);
  });

  it('skips symlinks that resolve outside the tree, with a warning, unless asked to keep them', async () => {
    const links: TarMember[] = [
      { path: 'in', type: 'SymbolicLink', linkpath: 'sub/x' },
      { path: 'abs', type: 'SymbolicLink', linkpath: '/etc/passwd' },
      { path: 'up', type: 'SymbolicLink', linkpath: '../outside' },
      { path: 'dot', type: 'SymbolicLink', linkpath: '.' },
      { path: 'sneaky', type: 'SymbolicLink', linkpath: 'dot/dot/../..' },
    ];
    await extract(links);
    expect(fs.readdirSync(root).sort()).toEqual(['dot', 'in']);
    expect(warnings).toEqual([expect.stringMatching(/^skipped 3 symlinks pointing outside .*abs -> \/etc\/passwd.*--keep-outside-links/)]);
    fs.rmSync(root, { recursive: true });
    fs.mkdirSync(root);
    await extract(links, { keepOutsideLinks: true });
    expect(fs.readlinkSync(path.join(root, 'abs'))).toBe('/etc/passwd');
  });

  it('a later entry replaces an earlier one of the same name, whatever its type', async () => {
    await extract([
      { path: 'x/', type: 'Directory' }, { path: 'x/inner', data: 'gone' }, { path: 'x', data: 'file now' },
      { path: 'l', type: 'SymbolicLink', linkpath: outside }, { path: 'l/', type: 'Directory' }, { path: 'l/f', data: 'inside' },
    ]);
    expect(fs.readFileSync(path.join(root, 'x'), 'utf8')).toBe('file now');
    expect(fs.lstatSync(path.join(root, 'l')).isDirectory()).toBe(true);
    expect(fs.readdirSync(outside)).toEqual([]);
  });

  it('caps file contents, compressed streams included', async () => {
    const big: TarMember[] = [{ path: 'a', data: Buffer.alloc(600 << 10) }, { path: 'b', data: Buffer.alloc(600 << 10) }];
    await expect(extract(big)).rejects.toThrow('over the cap');
    fs.rmSync(root, { recursive: true });
    fs.mkdirSync(root);
    const bomb = gzipSync(craftTar(big));
    expect(bomb.length).toBeLessThan(10 << 10);
    await expect(extract(bomb)).rejects.toThrow('over the cap');
  });

  it('refuses bytes that are not a tar stream, and a stream cut short', async () => {
    await refusedWith(Buffer.alloc(4096, 0x41), /not a valid tar stream/);
    await refusedWith(craftTar([{ path: 'a', data: Buffer.alloc(5000, 1) }]).subarray(0, 2048), /not a valid tar stream/);
  });
});

describe('extractUntrusted host errors', () => {
  it('names the entry when the host cannot write it, rather than failing as a bug (70)', async () => {
    const long = `${'d'.repeat(255)}/${'x'.repeat(256)}`;
    const err = await extract([{ path: long, data: 'x' }]).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(SmolError);
    expect([(err as SmolError).exitCode, (err as SmolError).message]).toEqual([1, expect.stringMatching(/^cp failed: writing "d+\/x+" from the guest's archive: ENAMETOOLONG/)]);
  });
});

describe('extractUntrusted bounds what it keeps', () => {
  it('directories and symlinks kept in memory are charged against a budget', async () => {
    const many: TarMember[] = Array.from({ length: 200 }, (_, i) => ({ path: `l${i}`, type: 'SymbolicLink' as const, linkpath: 'x'.repeat(400) }));
    await expect(extract(many, { trackedBytes: 50_000 })).rejects.toThrow(/more directories and symlinks than smol tracks in one copy \(50000 bytes/);
    fs.rmSync(root, { recursive: true });
    fs.mkdirSync(root);
    await extract(many, { trackedBytes: 200_000 });
    expect(fs.readdirSync(root)).toHaveLength(200);
  });

  it('refuses a stream of more entries than one copy creates, whatever their size (inodes are a host resource)', async () => {
    const empties: TarMember[] = Array.from({ length: 50 }, (_, i) => ({ path: `e${i}`, data: '' }));
    const err = await extract(empties, { maxEntries: 40 }).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(NoSpaceError);
    expect((err as Error).message).toMatch(/holds more than 40 entries/);
    fs.rmSync(root, { recursive: true });
    fs.mkdirSync(root);
    await extract(empties, { maxEntries: 50 });
    expect(fs.readdirSync(root)).toHaveLength(50);
  });

  it('warnings name five entries and count the rest', async () => {
    await extract(Array.from({ length: 8 }, (_, i) => ({ path: `f${i}`, type: 'FIFO' as const })));
    expect(warnings).toEqual(['skipped 8 special files (device nodes, FIFOs): f0, f1, f2, f3, f4, and 3 more; --preserve-special creates them']);
  });
});
