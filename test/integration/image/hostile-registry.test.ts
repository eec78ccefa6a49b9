/**
 * `smol image pull` through the real CLI against registries an attacker runs on loopback: one that
 * stalls in its answer (75, not a hang), and one that serves a layer whose whiteout `.wh...` named the
 * parent of smol's staging directory (65, not 70, and nothing outside the image touched).
 */
import { createHash } from 'node:crypto';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import * as tar from 'tar';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { smol } from '../../helpers/cli.js';
import { startHostile, startSilent, type HostileServer } from '../../helpers/registry-hostile.js';

const sha = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

/** An uncompressed layer: a file, then the hostile whiteout. */
function evilLayer(): Buffer {
  const blocks: Buffer[] = [];
  for (const [p, body] of [['hello.txt', 'hi\n'], ['.wh...', '']] as const) {
    const b = Buffer.from(body);
    const h = Buffer.alloc(512);
    new tar.Header({ path: p, mode: 0o644, uid: 0, gid: 0, size: b.length, mtime: new Date(0), type: 'File' }).encode(h, 0);
    blocks.push(h, b, Buffer.alloc((512 - (b.length % 512)) % 512));
  }
  return Buffer.concat([...blocks, Buffer.alloc(1024)]);
}

describe('image pull from hostile registries', () => {
  let tmp: string;
  const servers: HostileServer[] = [];
  const cli = (args: string[], env: Record<string, string> = {}) => smol(args, { home: path.join(tmp, 'home'), env: { SMOL_ASSETS: path.join(tmp, 'assets'), DOCKER_CONFIG: path.join(tmp, 'docker'), ...env }, timeoutMs: 60_000 });

  beforeAll(async () => { tmp = await mkdtemp(path.join(os.tmpdir(), 'smol-hostile-reg-')); });
  afterAll(async () => { await Promise.all(servers.map((s) => s.stop())); await rm(tmp, { recursive: true, force: true }); });

  it('fails a registry that never ends its manifest with 75, naming it and the URL', async () => {
    const s = await startHostile((req, res) => {
      if (req.url === '/v2/') { res.writeHead(200); res.end('{}'); return; }
      res.writeHead(200, { 'content-type': 'application/vnd.oci.image.manifest.v1+json', 'content-length': '5000' });
      res.write('{"schemaVersion": 2,');
    });
    servers.push(s);
    const r = await cli(['image', 'pull', '--plain-http', `${s.host}/x:v1`], { SMOL_REGISTRY_RESPONSE_TIMEOUT: '1' });
    expect(r.code, r.stderr).toBe(75);
    expect(r.stderr).toContain(`${s.host} did not answer within 1 s`);
    expect(r.stderr).toContain(`http://${s.host}/v2/x/manifests/v1`);
    expect(r.stderr).toContain('SMOL_REGISTRY_RESPONSE_TIMEOUT');
    const silent = await startSilent();
    servers.push(silent);
    const r2 = await cli(['image', 'pull', '--plain-http', `${silent.host}/x:v1`], { SMOL_REGISTRY_RESPONSE_TIMEOUT: '1' });
    expect(r2.code, r2.stderr).toBe(75);
  });

  it('refuses a layer whose whiteout names .. with 65 and leaves the data directory alone', async () => {
    const layer = evilLayer();
    const config = Buffer.from(JSON.stringify({ architecture: 'amd64', os: 'linux', config: { Cmd: ['/bin/sh'] }, rootfs: { type: 'layers', diff_ids: [sha(layer)] } }));
    const manifest = Buffer.from(JSON.stringify({
      schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: sha(config), size: config.length },
      layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar', digest: sha(layer), size: layer.length }],
    }));
    const blobs = new Map([[sha(layer), layer], [sha(config), config]]);
    const s = await startHostile((req, res) => {
      const m = /^\/v2\/evil\/(manifests\/v1|blobs\/(sha256:[0-9a-f]{64}))$/.exec(req.url ?? '');
      const body = m?.[2] ? blobs.get(m[2]) : m ? manifest : undefined;
      if (!body) { res.writeHead(req.url === '/v2/' ? 200 : 404); res.end(); return; }
      res.writeHead(200, { 'content-type': m?.[2] ? 'application/octet-stream' : 'application/vnd.oci.image.manifest.v1+json', 'content-length': String(body.length) });
      res.end(body);
    });
    servers.push(s);
    const r = await cli(['image', 'pull', '--plain-http', `${s.host}/evil:v1`]);
    expect(r.code, r.stderr).toBe(65);
    expect(r.stderr).toContain('.wh...: a whiteout must name a file in its directory');
    const images = await readdir(path.join(tmp, 'assets', 'images'));
    expect(images).toContain('blobs');
    expect(images.filter((n) => n.startsWith('.tmp-'))).toEqual([]); // the staging directory went the normal way
  });
});
