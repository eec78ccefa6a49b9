import { readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureExtracted, generateKeyPair, packArtifact } from '../../../src/artifact/index.js';
import { run } from '../../../src/util/exec.js';
import { makeInputs, tempDir } from './helpers.js';

describe('ensureExtracted', () => {
  let dir: string;
  let cleanup: () => Promise<void>;
  let file: string;
  let digest: string;
  let keys: { privateKey: string; publicKey: string };
  beforeAll(async () => {
    ({ dir, cleanup } = await tempDir());
    keys = await generateKeyPair(path.join(dir, 'k'));
    file = path.join(dir, 'm.smolmachine');
    digest = (await packArtifact({ ...(await makeInputs(dir, { disk: true })), out: file, signKey: keys.privateKey })).digest;
  });
  afterAll(() => cleanup());

  it('extracts once into <cache>/<digest> when several callers race, then serves hits', async () => {
    const cache = path.join(dir, 'cache-race');
    const results = await Promise.all([1, 2, 3, 4].map(() => ensureExtracted(file, cache)));
    expect(results.filter((r) => r.extracted)).toHaveLength(1);
    expect(new Set(results.map((r) => r.dir))).toEqual(new Set([path.join(cache, digest)]));
    expect((await readdir(cache)).sort()).toEqual([digest]);
    const again = await ensureExtracted(file, cache);
    expect(again).toMatchObject({ extracted: false, dir: path.join(cache, digest) });
    expect(again.manifest).toEqual(results[0].manifest);
    expect(Object.keys(again.files).sort()).toEqual(['disk', 'initrd', 'kernel']);
  });

  it('takes over a lock left by a dead process', async () => {
    const cache = path.join(dir, 'cache-stale');
    const dead = Number((await run('sh', ['-c', 'sh -c "echo \\$\\$"'])).stdout.trim());
    await run('mkdir', ['-p', cache]);
    await writeFile(path.join(cache, `${digest}.lock`), String(dead));
    await run('mkdir', ['-p', path.join(cache, `.${digest}.tmp-${dead}-0badf00d`)]); // an extraction killed midway
    const r = await ensureExtracted(file, cache, { lockTimeoutMs: 5_000 });
    expect(r.extracted).toBe(true);
    expect(await readdir(cache)).toEqual([digest]);
  });

  it('checks the signature on a cache hit as well as on the first extraction', async () => {
    const cache = path.join(dir, 'cache-sig');
    const other = await generateKeyPair(path.join(dir, 'other'));
    await expect(ensureExtracted(file, cache, { publicKey: other.publicKey })).rejects.toThrow(/signed by key \w+, not by the expected key/);
    expect((await ensureExtracted(file, cache, { publicKey: keys.publicKey })).extracted).toBe(true);
    await expect(ensureExtracted(file, cache, { publicKey: other.publicKey })).rejects.toThrow(/not by the expected key/);
  });
});
