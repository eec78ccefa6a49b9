/**
 * Issue #31 item 2: an artifact whose disk.qcow2 names a host file as its backing file (or external data
 * file) would hand that file to the guest as /dev/vda. smol flattens every disk it packs, so an artifact
 * disk that is not self-contained was made by someone else's packer: verify, extraction and a cache hit
 * (a directory an older smol extracted) all refuse it with 76.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ArtifactError, ExitCode } from '../../../src/errors/index.js';
import { describeFailure, ensureExtracted, extractArtifact, inspectArtifact, packArtifact, verifyArtifact, type ArtifactManifest } from '../../../src/artifact/index.js';
import { encodeManifest } from '../../../src/artifact/manifest.js';
import { run } from '../../../src/util/exec.js';
import { craftWithDisk, leftovers, makeInputs, storedMembers, tempDir } from './helpers.js';

describe('an artifact disk that reaches a host file', { timeout: 120_000 }, () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let manifest: ArtifactManifest;
  let stored: Map<string, Buffer>;
  let flat: string;
  let secret: string;
  let n = 0;

  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
    const inputs = await makeInputs(dir, { disk: true });
    const file = path.join(dir, 'good.smolmachine');
    await packArtifact({ ...inputs, out: file, createdAt: '2026-01-01T00:00:00Z' });
    manifest = (await inspectArtifact(file)).manifest;
    stored = await storedMembers(file, manifest);
    flat = path.join(dir, 'flat.qcow2');
    await run('qemu-img', ['convert', '-q', '-f', 'qcow2', '-O', 'qcow2', inputs.disk!, flat]);
    secret = path.join(dir, 'host-secret');
    await writeFile(secret, 'host secret 31\n');
  });
  afterAll(() => cleanup());

  /** A copy of the flattened disk given a backing file without reading it (what an attacker runs). */
  async function rebased(backing: string, format: string): Promise<Buffer> {
    const f = path.join(dir, `rebased-${++n}.qcow2`);
    await run('cp', [flat, f]);
    await run('qemu-img', ['rebase', '-q', '-u', '-f', 'qcow2', '-b', backing, '-F', format, f]);
    return readFile(f);
  }

  async function artifactWith(disk: Buffer): Promise<{ file: string; manifest: ArtifactManifest; bytes: Buffer }> {
    const c = await craftWithDisk(dir, manifest, stored, disk);
    const file = path.join(dir, `hostile-${++n}.smolmachine`);
    await writeFile(file, c.bytes);
    return { file, ...c };
  }

  /** verify, extraction and a cache hit on an older smol's extraction all refuse it with the same words. */
  async function refusedEverywhere(disk: Buffer, words: RegExp): Promise<void> {
    const a = await artifactWith(disk);
    const v = await verifyArtifact(a.file);
    expect(v.ok).toBe(false);
    expect(v.failed).toEqual(['disk.qcow2']);
    expect(describeFailure(v)).toMatch(words);

    const parent = path.join(dir, `extract-${++n}`);
    await mkdir(parent);
    const err = await extractArtifact(a.file, path.join(parent, 'out')).then(() => null, (e: unknown) => e);
    expect(err).toBeInstanceOf(ArtifactError);
    expect((err as ArtifactError).exitCode).toBe(ExitCode.integrity);
    expect((err as ArtifactError).message).toMatch(words);
    expect(await leftovers(parent)).toEqual([]);

    // a cache directory as a smol without this check extracted it: the hit must not hand it out
    const cache = path.join(dir, `cache-${++n}`);
    const hit = path.join(cache, v.digest);
    await mkdir(hit, { recursive: true });
    await writeFile(path.join(hit, 'manifest.json'), encodeManifest(a.manifest));
    await writeFile(path.join(hit, 'disk.qcow2'), disk);
    for (const e of a.manifest.entries.filter((x) => x.kind !== 'disk')) await writeFile(path.join(hit, e.name), 'x');
    await expect(ensureExtracted(a.file, cache)).rejects.toThrow(words);
  }

  it('control: the same crafting with the flattened disk is accepted', async () => {
    const a = await artifactWith(await readFile(flat));
    expect((await verifyArtifact(a.file)).ok).toBe(true);
    const r = await extractArtifact(a.file, path.join(dir, 'control-out'));
    // Buffer.equals: toEqual walks a buffer element by element, seconds per MiB
    expect((await readFile(r.files.disk!)).equals(await readFile(flat))).toBe(true);
  });

  it('refuses a qcow2 whose backing file is a host file read as raw (qemu-img rebase -u -b FILE -F raw)', async () => {
    await refusedEverywhere(await rebased(secret, 'raw'), new RegExp(`disk\\.qcow2 names the backing file "${secret}"`));
  });

  it('refuses a relative backing file and a json: backing description', async () => {
    await refusedEverywhere(await rebased('../../etc/shadow', 'raw'), /names the backing file "\.\.\/\.\.\/etc\/shadow"/);
    const json = `json:{"driver":"raw","file":{"driver":"file","filename":"${secret}"}}`;
    await refusedEverywhere(await rebased(json, 'raw'), /names the backing file "json:/);
  });

  it('refuses a qcow2 with an external data file (qemu-img create -o data_file=FILE)', async () => {
    const f = path.join(dir, 'data-file.qcow2');
    await run('qemu-img', ['create', '-q', '-f', 'qcow2', '-o', `data_file=${path.join(dir, 'host-data.raw')}`, f, '1M']);
    await refusedEverywhere(await readFile(f), /disk\.qcow2 names the external data file ".*host-data\.raw"/);
  });

  it('refuses a disk entry that is not a qcow2 image at all', async () => {
    await refusedEverywhere(Buffer.concat([Buffer.from('KDMV'), Buffer.alloc(4096)]), /disk\.qcow2 is not a qcow2 image/);
  });
});
