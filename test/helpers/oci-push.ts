/**
 * Builds small images from specs and pushes them to a test registry over the real distribution API
 * (with smol's own client), as Docker v2 schema 2 or OCI manifests, single- or multi-platform.
 */
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, rm, writeFile, mkdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { RegistryClient, type Credentials } from '../../src/registry/index.js';
import { run } from '../../src/util/exec.js';
import { layerTar, type Layer } from '../fixtures/images/make-image-tarballs.js';

export type Compression = 'gzip' | 'zstd' | 'none';
export interface Descriptor { mediaType: string; digest: string; size: number; platform?: { os: string; architecture: string } }
export interface PushedImage { digest: string; size: number; mediaType: string; layers: Descriptor[]; config: Descriptor }

const sha = (b: Buffer) => `sha256:${createHash('sha256').update(b).digest('hex')}`;

export async function layerBytes(build: Layer, compression: Compression): Promise<Buffer> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'smol-oci-layer-'));
  try {
    const raw = path.join(dir, 'l.tar');
    await layerTar(build, raw);
    if (compression === 'gzip') return gzipSync(await readFile(raw));
    if (compression === 'zstd') {
      await run('zstd', ['-q', '-f', raw, '-o', `${raw}.zst`]);
      return await readFile(`${raw}.zst`);
    }
    return await readFile(raw); // awaited: `finally` removes the directory the read needs
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A layer with just these files (path → content). */
export const filesLayer = (files: Record<string, string>): Layer => async (d) => {
  for (const [p, body] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(d, p)), { recursive: true });
    await writeFile(path.join(d, p), body);
  }
};

export interface PushOptions { format?: 'docker' | 'oci'; compression?: Compression | Compression[]; architecture?: string; credentials?: Credentials | null; /** For the client: SMOL_HOME (its certs.d) of a TLS registry. */ env?: NodeJS.ProcessEnv }

function layerType(format: 'docker' | 'oci', c: Compression): string {
  if (format === 'docker') return c === 'none' ? 'application/vnd.docker.image.rootfs.diff.tar' : 'application/vnd.docker.image.rootfs.diff.tar.gzip';
  return `application/vnd.oci.image.layer.v1.tar${c === 'gzip' ? '+gzip' : c === 'zstd' ? '+zstd' : ''}`;
}

export async function pushImage(host: string, repo: string, tag: string, builds: Layer[], o: PushOptions = {}): Promise<PushedImage> {
  const format = o.format ?? 'docker';
  const client = await RegistryClient.open(host, host, { credentials: o.credentials ?? null, env: o.env });
  const put = async (b: Buffer) => client.uploadBlob(repo, sha(b), b.length, async (off, len) => b.subarray(off, off + len));
  const layers: Descriptor[] = [];
  for (const [i, build] of builds.entries()) {
    const c = Array.isArray(o.compression) ? o.compression[i] : (o.compression ?? 'gzip');
    const b = await layerBytes(build, c);
    await put(b);
    layers.push({ mediaType: layerType(format, c), digest: sha(b), size: b.length });
  }
  const cfg = Buffer.from(JSON.stringify({ architecture: o.architecture ?? 'amd64', os: 'linux', config: { Env: ['PATH=/bin'], Cmd: ['/bin/sh'] }, rootfs: { type: 'layers', diff_ids: [] } }));
  await put(cfg);
  const config = { mediaType: format === 'docker' ? 'application/vnd.docker.container.image.v1+json' : 'application/vnd.oci.image.config.v1+json', digest: sha(cfg), size: cfg.length };
  const mediaType = format === 'docker' ? 'application/vnd.docker.distribution.manifest.v2+json' : 'application/vnd.oci.image.manifest.v1+json';
  const manifest = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType, config, layers }));
  const digest = await client.putManifest(repo, tag, manifest, mediaType, `push ${repo}:${tag}`);
  return { digest, size: manifest.length, mediaType, layers, config };
}

export async function pushIndex(host: string, repo: string, tag: string, images: { image: PushedImage; architecture: string }[], o: { format?: 'docker' | 'oci'; credentials?: Credentials | null } = {}): Promise<string> {
  const client = await RegistryClient.open(host, host, { credentials: o.credentials ?? null });
  const mediaType = o.format === 'oci' ? 'application/vnd.oci.image.index.v1+json' : 'application/vnd.docker.distribution.manifest.list.v2+json';
  const body = Buffer.from(JSON.stringify({
    schemaVersion: 2, mediaType,
    manifests: images.map(({ image, architecture }) => ({ mediaType: image.mediaType, digest: image.digest, size: image.size, platform: { os: 'linux', architecture } })),
  }));
  return client.putManifest(repo, tag, body, mediaType, `push ${repo}:${tag} index`);
}
