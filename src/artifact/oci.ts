/**
 * Registry distribution as OCI artifacts (distribution spec v1.1; image spec 1.1 artifact guidance):
 * the .smolmachine is one layer blob, the config is the OCI empty descriptor, and the manifest carries
 * artifactType so registries and tools can tell a machine from a container image. Anonymous access only.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { open, rm } from 'node:fs/promises';
import path from 'node:path';
import { ArtifactError, NotFoundError, SmolError, UserError } from '../errors/index.js';
import { commitFile, tempSibling } from './atomic.js';
import { inspectArtifact } from './verify.js';

export const ARTIFACT_TYPE = 'application/vnd.smol.machine.v1';
export const LAYER_MEDIA_TYPE = 'application/vnd.smol.machine.v1.smolmachine';
export const OCI_MANIFEST = 'application/vnd.oci.image.manifest.v1+json';
const EMPTY = { mediaType: 'application/vnd.oci.empty.v1+json', digest: 'sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a', size: 2 };
const CHUNK = 32 << 20;

export interface OciRef { registry: string; repository: string; reference: string; base: string }

/** `host[:port]/name[:tag|@sha256:…]`; loopback registries speak plain HTTP, others HTTPS unless plainHttp. */
export function parseRef(ref: string, opts: { plainHttp?: boolean } = {}): OciRef {
  const m = /^([^/]+)\/([a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:\/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*)(?::([A-Za-z0-9_][A-Za-z0-9._-]{0,127})|@(sha256:[0-9a-f]{64}))?$/.exec(ref);
  if (!m || !/[.:]|^localhost$/.test(m[1])) {
    throw new UserError(`invalid artifact reference ${JSON.stringify(ref)}`, { hint: 'Use REGISTRY/NAME[:TAG], e.g. 127.0.0.1:5000/team/app:v1.' });
  }
  const registry = m[1];
  const loopback = /^(localhost|127\.\d+\.\d+\.\d+|\[::1\])(:\d+)?$/.test(registry);
  const scheme = opts.plainHttp || loopback ? 'http' : 'https';
  return { registry, repository: m[2], reference: m[3] ?? m[4] ?? 'latest', base: `${scheme}://${registry}/v2/${m[2]}` };
}

async function call(url: string, init: RequestInit, what: string, okStatus: number[]): Promise<Response> {
  let res: Response;
  try {
    res = await fetch(url, init);
  } catch (err) {
    throw new SmolError(`${what} failed: cannot reach ${new URL(url).host}: ${(err as Error).message}`, undefined, { cause: err });
  }
  if (okStatus.includes(res.status)) return res;
  const body = (await res.text().catch(() => '')).slice(0, 300);
  if (res.status === 401 || res.status === 403) throw new UserError(`${what} failed: the registry requires authentication (${res.status}); only anonymous registries are supported`);
  if (res.status === 404) throw new NotFoundError(`${what} failed: not found (404) ${body}`);
  throw new SmolError(`${what} failed: HTTP ${res.status} ${body}`);
}

const absolute = (base: string, location: string | null, what: string): URL => {
  if (!location) throw new SmolError(`${what} failed: the registry sent no upload Location`);
  return new URL(location, base);
};

async function fileSha256(file: string): Promise<string> {
  const h = createHash('sha256');
  for await (const c of createReadStream(file, { highWaterMark: 4 << 20 }) as AsyncIterable<Buffer>) h.update(c);
  return `sha256:${h.digest('hex')}`;
}

async function uploadBlob(r: OciRef, digest: string, size: number, read: (off: number, len: number) => Promise<Buffer>): Promise<boolean> {
  const head = await fetch(`${r.base}/blobs/${digest}`, { method: 'HEAD' }).catch(() => null);
  if (head?.status === 200) return false;
  const start = await call(`${r.base}/blobs/uploads/`, { method: 'POST' }, `push ${r.repository}: start upload`, [202]);
  let loc = absolute(r.base, start.headers.get('location'), 'push');
  for (let off = 0; off < size; off += CHUNK) {
    const body = await read(off, Math.min(CHUNK, size - off));
    const res = await call(loc.toString(), {
      method: 'PATCH', body,
      headers: { 'content-type': 'application/octet-stream', 'content-range': `${off}-${off + body.length - 1}`, 'content-length': String(body.length) },
    }, `push ${r.repository}: upload bytes ${off}+${body.length}`, [202]);
    loc = absolute(loc.toString(), res.headers.get('location'), 'push');
  }
  loc.searchParams.set('digest', digest);
  await call(loc.toString(), { method: 'PUT', headers: { 'content-length': '0' } }, `push ${r.repository}: finish upload`, [201]);
  return true;
}

export interface PushResult { ref: string; manifestDigest: string; blobDigest: string; size: number; uploaded: boolean }

export async function pushArtifact(file: string, ref: string, opts: { plainHttp?: boolean } = {}): Promise<PushResult> {
  const r = parseRef(ref, opts);
  if (r.reference.startsWith('sha256:')) throw new UserError('push needs a tag, not a digest', { where: ref });
  const info = await inspectArtifact(file);
  const blobDigest = await fileSha256(file);
  const fh = await open(file, 'r');
  let uploaded: boolean;
  try {
    uploaded = await uploadBlob(r, blobDigest, info.size, async (off, len) => {
      const b = Buffer.alloc(len);
      await fh.read(b, 0, len, off);
      return b;
    });
  } finally {
    await fh.close();
  }
  await uploadBlob(r, EMPTY.digest, EMPTY.size, async () => Buffer.from('{}'));
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
  const res = await call(`${r.base}/manifests/${r.reference}`, { method: 'PUT', body: manifest, headers: { 'content-type': OCI_MANIFEST } }, `push ${ref}: manifest`, [201]);
  const manifestDigest = res.headers.get('docker-content-digest') ?? `sha256:${createHash('sha256').update(manifest).digest('hex')}`;
  return { ref, manifestDigest, blobDigest, size: info.size, uploaded };
}

export interface PullResult { ref: string; out: string; blobDigest: string; size: number }

export async function pullArtifact(ref: string, out: string, opts: { plainHttp?: boolean; force?: boolean } = {}): Promise<PullResult> {
  const r = parseRef(ref, opts);
  const res = await call(`${r.base}/manifests/${r.reference}`, { headers: { accept: OCI_MANIFEST } }, `pull ${ref}: manifest`, [200]);
  const manifest = (await res.json()) as { artifactType?: string; layers?: { mediaType: string; digest: string; size: number }[] };
  const layer = manifest.layers?.find((l) => l.mediaType === LAYER_MEDIA_TYPE);
  if (manifest.artifactType !== ARTIFACT_TYPE || !layer || !/^sha256:[0-9a-f]{64}$/.test(layer.digest)) {
    throw new ArtifactError(`${ref} is not a smol machine artifact (artifactType ${JSON.stringify(manifest.artifactType)})`, { where: ref });
  }
  const target = path.resolve(out);
  const tmp = tempSibling(target);
  try {
    const blob = await call(`${r.base}/blobs/${layer.digest}`, {}, `pull ${ref}: blob`, [200]);
    const h = createHash('sha256');
    const fh = await open(tmp, 'wx', 0o644);
    let size = 0;
    try {
      for await (const chunk of blob.body as unknown as AsyncIterable<Uint8Array>) {
        size += chunk.length;
        if (size > layer.size) throw new ArtifactError(`pull ${ref}: the blob is larger than the ${layer.size} bytes its manifest declares`, { where: ref });
        h.update(chunk);
        await fh.write(chunk);
      }
      await fh.sync();
    } finally {
      await fh.close();
    }
    const got = `sha256:${h.digest('hex')}`;
    if (got !== layer.digest || size !== layer.size) throw new ArtifactError(`pull ${ref}: downloaded blob is ${got} (${size} bytes), expected ${layer.digest} (${layer.size} bytes)`, { where: ref });
    await inspectArtifact(tmp);
    await commitFile(tmp, target, !opts.force);
    return { ref, out: target, blobDigest: got, size };
  } finally {
    await rm(tmp, { force: true });
  }
}
