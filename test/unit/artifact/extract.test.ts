import { createHash } from 'node:crypto';
import { mkdir, readFile, stat, truncate, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArtifactError, ExitCode, ValidationError } from '../../../src/errors/index.js';
import { extractArtifact, inspectArtifact, packArtifact, type ArtifactManifest } from '../../../src/artifact/index.js';
import { compressFile } from '../../../src/artifact/zstd.js';
import { craftArtifact, leftovers, makeInputs, storedMembers, tempDir, withDigest, type CraftMember } from './helpers.js';

describe('extractArtifact: hostile and broken input leaves nothing behind', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let manifest: ArtifactManifest;
  let stored: Map<string, Buffer>;
  let n = 0;
  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
    const inputs = await makeInputs(dir);
    const file = path.join(dir, 'base.smolmachine');
    await packArtifact({ ...inputs, out: file, createdAt: '2026-01-01T00:00:00Z' });
    manifest = (await inspectArtifact(file)).manifest;
    stored = await storedMembers(file, manifest);
  });
  afterAll(() => cleanup());

  const members = (): CraftMember[] => manifest.entries.map((e) => ({ name: `${e.name}.zst`, data: stored.get(`${e.name}.zst`)! }));
  const clone = (): ArtifactManifest => JSON.parse(JSON.stringify(manifest)) as ArtifactManifest;

  /** Extracts a crafted artifact into a fresh parent dir; returns the error and asserts the parent stayed empty. */
  async function attempt(m: unknown, mem: CraftMember[], opts: Parameters<typeof extractArtifact>[2] = {}, raw?: Buffer): Promise<unknown> {
    const parent = path.join(dir, `case-${++n}`);
    await mkdir(parent);
    const file = path.join(dir, `case-${n}.smolmachine`);
    await writeFile(file, craftArtifact(m, mem, { rawManifest: raw }));
    const err = await extractArtifact(file, path.join(parent, 'out'), opts).then(() => null, (e: unknown) => e);
    expect(await leftovers(parent)).toEqual(err ? [] : ['out']);
    return err;
  }

  it('the crafter builds valid artifacts (control case)', async () => {
    expect(await attempt(manifest, members())).toBeNull();
  });

  it('rejects a member path with ..', async () => {
    const mem = members();
    mem[0].name = `../${mem[0].name}`;
    expect(String(await attempt(manifest, mem))).toMatch(/member "\.\.\/kernel\.zst" escapes the target with '\.\.'/);
  });

  it('rejects an absolute member path', async () => {
    const mem = members();
    mem[1].name = '/tmp/initrd.zst';
    expect(String(await attempt(manifest, mem))).toMatch(/member "\/tmp\/initrd\.zst" has an absolute path/);
  });

  it('rejects a symlink in place of an entry and a symlink appended after the entries', async () => {
    const mem = members();
    mem[0] = { name: 'kernel.zst', type: 'SymbolicLink', linkpath: '/etc/passwd' };
    expect(String(await attempt(manifest, mem))).toMatch(/member "kernel\.zst" is a symlink to "\/etc\/passwd"; links are not allowed/);
    const extra = [...members(), { name: 'escape', type: 'SymbolicLink' as const, linkpath: '../../..' }];
    expect(String(await attempt(manifest, extra))).toMatch(/member "escape" is a symlink to "\.\.\/\.\.\/\.\."/);
  });

  it('rejects a hard link escaping the target', async () => {
    const mem = members();
    mem[1] = { name: 'initrd.zst', type: 'Link', linkpath: '../../etc/shadow' };
    expect(String(await attempt(manifest, mem))).toMatch(/member "initrd\.zst" is a hard link to "\.\.\/\.\.\/etc\/shadow"/);
  });

  it('rejects a manifest entry name that is not a flat file name', async () => {
    const m = clone();
    m.entries[0].name = '../../kernel';
    const mem = members();
    mem[0].name = '../../kernel.zst';
    const err = await attempt(withDigest(m), mem);
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).issues).toContainEqual({ path: 'entries.0.name', message: 'must be a flat file name (a-z0-9._-)' });
  });

  it('rejects sizes that lie: tar header vs manifest, and decompressed size above or below the declared one', async () => {
    const mem = members();
    mem[0].headerSize = mem[0].data!.length - 7;
    expect(String(await attempt(manifest, mem))).toMatch(/member kernel\.zst declares \d+ bytes but the manifest says \d+/);

    const small = clone();
    small.entries[0].size = 1000;
    expect(String(await attempt(withDigest(small), members()))).toMatch(/entry kernel decompresses past its declared size of 1000 bytes/);

    const big = clone();
    big.entries[0].size += 4096;
    expect(String(await attempt(withDigest(big), members()))).toMatch(/entry kernel declares \d+ bytes but decompresses to \d+/);
  });

  it('caps decompression bombs: total bytes and entry count are refused up front, a lying bomb stops at its declared size', async () => {
    const zeros = path.join(dir, 'zeros');
    await writeFile(zeros, '');
    await truncate(zeros, 256 << 20);
    await compressFile(zeros, `${zeros}.zst`);
    const bomb = await readFile(`${zeros}.zst`);
    expect(bomb.length).toBeLessThan(64 * 1024);
    const m = clone();
    const zeroSha = createHash('sha256').update(Buffer.alloc(256 << 20)).digest('hex');
    m.entries[1] = { ...m.entries[1], size: 256 << 20, sha256: zeroSha, stored: { compression: 'zstd', size: bomb.length, sha256: createHash('sha256').update(bomb).digest('hex') } };
    const mem = members();
    mem[1] = { name: 'initrd.zst', data: bomb };
    const capped = await attempt(withDigest(m), mem, { caps: { maxTotalBytes: 64 << 20 } });
    expect(String(capped)).toMatch(/unpacks to \d+ bytes; the cap is 67108864/);
    expect(String(await attempt(withDigest(m), mem, { caps: { maxEntries: 1 } }))).toMatch(/has 2 entries; the cap is 1/);

    const lying = clone();
    lying.entries[1] = { ...m.entries[1], size: 1 << 20 };
    expect(String(await attempt(withDigest(lying), mem))).toMatch(/entry initrd decompresses past its declared size of 1048576 bytes/);
  });

  it('rejects unknown manifest fields, at the top and inside an entry', async () => {
    const top = { ...clone(), evil: true };
    const err = await attempt(top, members());
    expect(err).toBeInstanceOf(ValidationError);
    expect((err as ValidationError).issues).toContainEqual({ path: '(root)', message: 'unknown field(s): evil' });
    const inner = clone();
    (inner.entries[0] as Record<string, unknown>).linkTo = '/etc';
    const e2 = await attempt(withDigest(inner), members());
    expect((e2 as ValidationError).issues).toContainEqual({ path: 'entries.0', message: 'unknown field(s): linkTo' });
  });

  it('rejects an unsupported format version with a precise message and exit code', async () => {
    const err = await attempt({ ...clone(), formatVersion: 2 }, members());
    expect(err).toBeInstanceOf(ArtifactError);
    expect((err as ArtifactError).message).toMatch(/unsupported artifact format version 2 \(this smol reads version 1\)/);
    expect((err as ArtifactError).exitCode).toBe(ExitCode.invalidInput);
  });

  it('rejects a guest of another architecture unless allowed', async () => {
    const m = clone();
    m.guest.arch = process.arch === 'arm64' ? 'x86_64' : 'aarch64';
    const err = await attempt(m, members());
    expect((err as ArtifactError).message).toMatch(/artifact is for \w+ guests; this host is/);
    expect((err as ArtifactError).exitCode).toBe(ExitCode.prerequisite);
    expect(await attempt(m, members(), { allowForeignArch: true })).toBeNull();
  });

  it('refuses an existing destination without touching it', async () => {
    const file = path.join(dir, 'ok.smolmachine');
    await writeFile(file, craftArtifact(manifest, members()));
    const dest = path.join(dir, 'existing');
    await mkdir(dest);
    await writeFile(path.join(dest, 'keep'), 'x');
    await expect(extractArtifact(file, dest)).rejects.toThrow(/already exists/);
    expect(await readFile(path.join(dest, 'keep'), 'utf8')).toBe('x');
    expect((await stat(dest)).isDirectory()).toBe(true);
  });
});
