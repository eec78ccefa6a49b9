/**
 * A registry's manifest declares the sizes smol will download. One that declares a layer larger than an
 * image may unpack, or an image config of gigabytes (read whole into memory), is refused (65) before any
 * blob is requested, instead of filling the disk first.
 */
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ValidationError } from '../../../../src/errors/index.js';
import { pullImage } from '../../../../src/vm/image/pull.js';
import { startHostile, type HostileServer } from '../../../helpers/registry-hostile.js';

const tmp = mkdtempSync(path.join(os.tmpdir(), 'pull-hostile-'));
const servers: HostileServer[] = [];
afterAll(async () => { await Promise.all(servers.map((s) => s.stop())); rmSync(tmp, { recursive: true, force: true }); });

const fake = (n: number) => `sha256:${createHash('sha256').update(String(n)).digest('hex')}`;

async function registryWith(configSize: number, layerSizes: number[]): Promise<HostileServer> {
  const manifest = JSON.stringify({
    schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json',
    config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: fake(0), size: configSize },
    layers: layerSizes.map((size, i) => ({ mediaType: 'application/vnd.oci.image.layer.v1.tar+gzip', digest: fake(i + 1), size })),
  });
  const s = await startHostile((req, res) => {
    if (req.url === '/v2/x/manifests/v1') { res.writeHead(200, { 'content-type': 'application/vnd.oci.image.manifest.v1+json' }); res.end(manifest); return; }
    res.writeHead(404);
    res.end();
  });
  servers.push(s);
  return s;
}

describe('declared sizes in a pulled manifest', () => {
  const cases: [string, number, number[], RegExp][] = [
    ['a layer past SMOL_IMAGE_MAX_GIB', 100, [2 ** 40], /SMOL_IMAGE_MAX_GIB/],
    ['layers that together pass it', 100, [600 << 20, 600 << 20], /SMOL_IMAGE_MAX_GIB/],
    ['a config of gigabytes', 2 ** 31, [100], /image config of 2147483648 bytes/],
  ];
  for (const [what, config, layers, why] of cases) {
    it(`refuses ${what} before fetching any blob`, async () => {
      const s = await registryWith(config, layers);
      const err = await pullImage(`${s.host}/x:v1`, path.join(tmp, `assets-${s.port}`), { plainHttp: true, build: false, env: { SMOL_HOME: tmp, SMOL_IMAGE_MAX_GIB: '1' } }).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ValidationError);
      expect((err as Error).message).toMatch(why);
      expect(s.seen.filter((r) => r.url.includes('/blobs/'))).toEqual([]);
    });
  }
});
