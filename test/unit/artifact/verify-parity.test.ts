/**
 * Issue #31 item 9: `pack verify` called an artifact with lying entry sizes "verified" while `pack run`
 * (extraction) refused it. Both now run the same check per entry, so for every crafted case verify fails
 * with exactly the words extraction fails with.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeFailure, extractArtifact, inspectArtifact, packArtifact, verifyArtifact, type ArtifactManifest } from '../../../src/artifact/index.js';
import { craftArtifact, leftovers, makeInputs, storedMembers, tempDir, withDigest } from './helpers.js';

describe('verify refuses what extraction refuses', { timeout: 120_000 }, () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let manifest: ArtifactManifest;
  let stored: Map<string, Buffer>;
  let n = 0;
  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
    const file = path.join(dir, 'base.smolmachine');
    await packArtifact({ ...(await makeInputs(dir)), out: file, createdAt: '2026-01-01T00:00:00Z' });
    manifest = (await inspectArtifact(file)).manifest;
    stored = await storedMembers(file, manifest);
  });
  afterAll(() => cleanup());

  const lie = (edit: (m: ArtifactManifest) => void): ArtifactManifest => {
    const m = JSON.parse(JSON.stringify(manifest)) as ArtifactManifest;
    edit(m);
    return withDigest(m);
  };

  /** The message verify fails with (a result or a throw) must be extraction's, and both must fail. */
  async function both(m: ArtifactManifest): Promise<string> {
    const file = path.join(dir, `case-${++n}.smolmachine`);
    await writeFile(file, craftArtifact(m, m.entries.map((e) => ({ name: `${e.name}.zst`, data: stored.get(`${e.name}.zst`)! }))));
    const parent = path.join(dir, `out-${n}`);
    await mkdir(parent);
    const extracted = await extractArtifact(file, path.join(parent, 'x')).then(() => null, (e: unknown) => (e as Error).message);
    expect(await leftovers(parent)).toEqual(extracted ? [] : ['x']);
    const verified = await verifyArtifact(file).then((r) => (r.ok ? null : describeFailure(r)), (e: unknown) => (e as Error).message);
    expect(extracted, 'extraction accepted it').not.toBeNull();
    expect(verified, 'verify accepted it').toBe(extracted);
    return verified!;
  }

  it('control: an honest crafted artifact passes both', async () => {
    const file = path.join(dir, 'honest.smolmachine');
    await writeFile(file, craftArtifact(manifest, manifest.entries.map((e) => ({ name: `${e.name}.zst`, data: stored.get(`${e.name}.zst`)! }))));
    expect((await verifyArtifact(file)).ok).toBe(true);
  });

  it('a declared size below the content (run stops decompressing at it)', async () => {
    expect(await both(lie((m) => { m.entries[0].size = 1000; }))).toMatch(/entry kernel decompresses past its declared size of 1000 bytes/);
  });

  it('a declared size above the content', async () => {
    expect(await both(lie((m) => { m.entries[1].size += 4096; }))).toMatch(/entry initrd declares \d+ bytes but decompresses to \d+/);
  });

  it('a content digest that does not match (the stored digest does)', async () => {
    expect(await both(lie((m) => { m.entries[0].sha256 = '0'.repeat(64); }))).toMatch(/entry kernel decompresses to content whose SHA-256 does not match the manifest/);
  });

  it('declared sizes over the unpack cap', async () => {
    expect(await both(lie((m) => { m.entries[1].size = 300 * 1024 ** 3; }))).toMatch(/artifact unpacks to \d+ bytes; the cap is \d+/);
  });
});
