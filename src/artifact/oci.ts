/**
 * Registry distribution as OCI artifacts (distribution spec v1.1; image spec 1.1 artifact guidance):
 * the .smolmachine is one layer blob, the config is the OCI empty descriptor, and the manifest carries
 * artifactType so registries and tools can tell a machine from a container image. Anonymous access only.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { mkdir, open, rm } from 'node:fs/promises';
import path from 'node:path';
import { ArtifactError, UserError } from '../errors/index.js';
import { RegistryClient, parseImageReference, registryBaseUrl } from '../registry/index.js';
import { commitFile, tempSibling } from './atomic.js';
import { inspectArtifact } from './verify.js';

export const ARTIFACT_TYPE = 'application/vnd.smol.machine.v1';
export const LAYER_MEDIA_TYPE = 'application/vnd.smol.machine.v1.smolmachine';
export const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
const EMPTY = { mediaType: 'application/vnd.oci.empty.v1+json', digest: 'sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a', size: 2 };

export interface OciRef { registry: string; repository: string; reference: string; base: string }

/**
 * `host[:port]/name[:tag|@sha256:…]`: an artifact lives on a registry named in full (no Docker Hub
 * default). Loopback registries and SMOL_INSECURE_REGISTRIES speak plain HTTP, others HTTPS unless plainHttp.
 */
export function parseRef(ref: string, opts: { plainHttp?: boolean } = {}): OciRef {
  const first = ref.split('/')[0];
  if (!ref.includes('/') || !(/[.:]/.test(first) || first === 'localhost')) {
    throw new UserError(`invalid artifact reference ${JSON.stringify(ref)}`, { hint: 'Use REGISTRY/NAME[:TAG], e.g. 127.0.0.1:5000/team/app:v1.' });
  }
  const r = parseImageReference(ref);
  return { registry: r.registry, repository: r.repository, reference: r.reference, base: `${registryBaseUrl(r.apiHost, opts)}/v2/${r.repository}` };
}

const client = (r: OciRef, opts: { plainHttp?: boolean }) => RegistryClient.open(r.registry, r.registry, opts);

async function fileSha256(file: string): Promise<string> {
  const h = createHash('sha256');
  for await (const c of createReadStream(file, { highWaterMark: 4 << 20 }) as AsyncIterable<Buffer>) h.update(c);
  return `sha256:${h.digest('hex')}`;
}

export interface PushResult { ref: string; manifestDigest: string; blobDigest: string; size: number; uploaded: boolean }

export async function pushArtifact(file: string, ref: string, opts: { plainHttp?: boolean } = {}): Promise<PushResult> {
  const r = parseRef(ref, opts);
  if (r.reference.startsWith('sha256:')) throw new UserError('push needs a tag, not a digest', { where: ref });
  const info = await inspectArtifact(file);
  const blobDigest = await fileSha256(file);
  const c = await client(r, opts);
  const fh = await open(file, 'r');
  let uploaded: boolean;
  try {
    uploaded = await c.uploadBlob(r.repository, blobDigest, info.size, async (off, len) => {
      const b = Buffer.alloc(len);
      await fh.read(b, 0, len, off);
      return b;
    });
  } finally {
    await fh.close();
  }
  await c.uploadBlob(r.repository, EMPTY.digest, EMPTY.size, async () => Buffer.from('{}'));
  const m = info.manifest;
  const manifest = Buffer.from(JSON.stringify({
    schemaVersion: 2,
    mediaType: OCI_MANIFEST,
    artifactType: ARTIFACT_TYPE,
    config: EMPTY,
    layers: [{ mediaType: LAYER_MEDIA_TYPE, digest: blobDigest, size: info.size, annotations: { 'org.opencontainers.image.title': path.basename(file) } }],
    annotations: {
      'org.opencontainers.image.created': m.createdAt,
      'dev.smol.machine.digest': info.digest,
      'dev.smol.machine.arch': m.guest.arch,
      ...(m.signature ? { 'dev.smol.machine.signer': m.signature.keyId } : {}),
    },
  }));
  const manifestDigest = await c.putManifest(r.repository, r.reference, manifest, OCI_MANIFEST, `push ${ref}: manifest`);
  return { ref, manifestDigest, blobDigest, size: info.size, uploaded };
}

export interface PullResult { ref: string; out: string; blobDigest: string; size: number }

export async function pullArtifact(ref: string, out: string, opts: { plainHttp?: boolean; force?: boolean } = {}): Promise<PullResult> {
  const r = parseRef(ref, opts);
  const c = await client(r, opts);
  const got = await c.getManifest(r.repository, r.reference, [OCI_MANIFEST], `pull ${ref}: manifest`);
  if (r.reference.startsWith('sha256:') && got.digest !== r.reference) {
    throw new ArtifactError(`pull ${ref}: the registry sent a manifest whose digest is ${got.digest}`, { where: ref });
  }
  let manifest: { artifactType?: string; layers?: { mediaType: string; digest: string; size: number }[] };
  try { manifest = JSON.parse(got.bytes.toString('utf8')) as typeof manifest; } catch { throw new ArtifactError(`pull ${ref}: the manifest is not JSON`, { where: ref }); }
  const layer = manifest.layers?.find((l) => l.mediaType === LAYER_MEDIA_TYPE);
  if (manifest.artifactType !== ARTIFACT_TYPE || !layer || !/^sha256:[0-9a-f]{64}$/.test(layer.digest)) {
    throw new ArtifactError(`${ref} is not a smol machine artifact (artifactType ${JSON.stringify(manifest.artifactType)})`, { where: ref });
  }
  const target = path.resolve(out);
  await mkdir(path.dirname(target), { recursive: true });
  const tmp = tempSibling(target);
  try {
    const size = await c.downloadBlob(r.repository, layer.digest, layer.size, tmp, { what: `pull ${ref}: blob` });
    await inspectArtifact(tmp);
    await commitFile(tmp, target, !opts.force);
    return { ref, out: target, blobDigest: layer.digest, size };
  } finally {
    await rm(tmp, { force: true });
  }
}
