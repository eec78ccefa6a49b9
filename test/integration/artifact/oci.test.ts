import { createHash } from 'node:crypto';
import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ARTIFACT_TYPE, LAYER_MEDIA_TYPE, packArtifact, parseRef, pullArtifact, pushArtifact, verifyArtifact } from '../../../src/artifact/index.js';
import { hasRegistry, startRegistry, type TestRegistry } from '../../helpers/registry.js';
import { makeInputs, tempDir } from '../../unit/artifact/helpers.js';

const sha = async (f: string) => createHash('sha256').update(await readFile(f)).digest('hex');

const why = hasRegistry() ? '' : ' (skipped: /usr/bin/docker-registry is not installed; scripts/setup.sh --test installs it)';
describe.skipIf(!hasRegistry())(`pack push/pull against a real OCI registry${why}`, () => {
  let reg: TestRegistry;
  let dir: string;
  let cleanup: () => Promise<void>;
  let file: string;
  beforeAll(async () => {
    reg = await startRegistry();
    ({ dir, cleanup } = await tempDir());
    file = path.join(dir, 'm.smolmachine');
    await packArtifact({ ...(await makeInputs(dir, { disk: true })), out: file, createdAt: '2026-01-01T00:00:00Z' });
  });
  afterAll(async () => {
    await reg?.stop();
    await cleanup?.();
  });

  it('round-trips an artifact byte for byte, as an OCI artifact with our artifactType', async () => {
    const pushed = await pushArtifact(file, `${reg.host}/team/app:v1`);
    expect(pushed.uploaded).toBe(true);
    expect(pushed.blobDigest).toBe(`sha256:${await sha(file)}`);
    const res = await fetch(`${reg.url}/v2/team/app/manifests/v1`, { headers: { accept: 'application/vnd.oci.image.manifest.v1+json' } });
    const manifest = (await res.json()) as { artifactType: string; layers: { mediaType: string; digest: string }[] };
    expect(manifest.artifactType).toBe(ARTIFACT_TYPE);
    expect(manifest.layers).toEqual([expect.objectContaining({ mediaType: LAYER_MEDIA_TYPE, digest: pushed.blobDigest })]);

    const out = path.join(dir, 'pulled.smolmachine');
    const pulled = await pullArtifact(`${reg.host}/team/app:v1`, out);
    expect(pulled.size).toBe((await stat(file)).size);
    expect(await sha(out)).toBe(await sha(file));
    expect((await verifyArtifact(out)).ok).toBe(true);
    const byDigest = path.join(dir, 'by-digest.smolmachine');
    await pullArtifact(`${reg.host}/team/app@${pushed.manifestDigest}`, byDigest);
    expect(await sha(byDigest)).toBe(await sha(file));
  });

  it('uploads in chunks and skips a blob the registry already has', async () => {
    const again = await pushArtifact(file, `${reg.host}/team/app:v2`);
    expect(again.uploaded).toBe(false);
  });

  it('refuses a tag that does not exist and a reference that is not ours', async () => {
    await expect(pullArtifact(`${reg.host}/team/app:nope`, path.join(dir, 'x'))).rejects.toThrow(/not found/);
    expect(() => parseRef('no-registry-name')).toThrow(/invalid artifact reference/);
    expect(parseRef('example.com/a/b:c')).toMatchObject({ base: 'https://example.com/v2/a/b', reference: 'c' });
    expect(parseRef('127.0.0.1:5000/a')).toMatchObject({ base: 'http://127.0.0.1:5000/v2/a', reference: 'latest' });
  });
});
