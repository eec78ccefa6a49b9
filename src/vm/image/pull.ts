/**
 * Registry images: resolve a reference to one linux/<host arch> manifest (through a multi-platform index
 * when there is one), fetch the config and layers that are not cached yet (each checked against its digest
 * as it streams), record the reference, and build the ext4 base from the layers with the same whiteout
 * handling and base cache as tarball images. A cached reference resolves without touching the network.
 */
import { mkdir, open, readFile, rename, rm } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { ArtifactError, NotFoundError, UserError, ValidationError } from '../../errors/index.js';
import { RegistryClient, parseImageReference, sha256Of, sweepDeadTemps, tempName, type ImageReference } from '../../registry/index.js';
import { run } from '../../util/exec.js';
import { BUILDER_VERSION, cached, type ResolvedImage } from './base-cache.js';
import { digestOf } from './digest.js';
import { blobPath, blobsOf, hasBlob, layerSchema, readRef, storePaths, writeRef, type RefRecord } from './store.js';

export const MEDIA = {
  ociIndex: 'application/vnd.oci.image.index.v1+json',
  ociManifest: 'application/vnd.oci.image.manifest.v1+json',
  dockerList: 'application/vnd.docker.distribution.manifest.list.v2+json',
  dockerManifest: 'application/vnd.docker.distribution.manifest.v2+json',
} as const;
const ACCEPT = [MEDIA.ociIndex, MEDIA.dockerList, MEDIA.ociManifest, MEDIA.dockerManifest];
const PARALLEL_LAYERS = 3;
/** An image config is read whole into memory; real ones are kilobytes (containerd reads at most 4 MiB). */
const MAX_CONFIG = 8 << 20;
const LAYER_TYPES = /^application\/vnd\.(oci\.image\.layer(\.nondistributable)?\.v1\.tar(\+gzip|\+zstd)?|docker\.image\.rootfs\.(foreign\.)?diff\.tar(\.gzip)?)$/;

const platformSchema = z.object({ os: z.string(), architecture: z.string(), variant: z.string().optional() }).loose();
const indexSchema = z.object({ manifests: z.array(layerSchema.extend({ platform: platformSchema.optional() }).loose()) }).loose();
const manifestSchema = z.object({ schemaVersion: z.literal(2), config: layerSchema.loose(), layers: z.array(layerSchema.extend({ urls: z.array(z.string()).optional() }).loose()) }).loose();

export function hostPlatform(): string {
  return `linux/${process.arch === 'x64' ? 'amd64' : process.arch}`;
}

export interface LayerEvent { index: number; count: number; digest: string; size: number; state: 'fetching' | 'cached' | 'done'; bytes: number }

export interface PullOptions {
  offline?: boolean;
  plainHttp?: boolean;
  /** Build the ext4 base too (default true); false stops once every blob is cached. */
  build?: boolean;
  onLayer?: (e: LayerEvent) => void;
  log?: (line: string) => void;
  env?: NodeJS.ProcessEnv;
}

export interface ImagePullResult {
  ref: string;
  manifestDigest: string;
  indexDigest?: string;
  imageId: string;
  platform: string;
  layers: { digest: string; size: number; cached: boolean }[];
  /** Blobs and bytes that came over the network (0 on a pull of a cached image). */
  fetchedBlobs: number;
  fetchedBytes: number;
  image?: ResolvedImage;
}

/** A cached reference without the network; otherwise (not offline) a pull. */
export async function resolveReference(refText: string, assets: string, o: { log?: (line: string) => void; offline?: boolean } = {}): Promise<ResolvedImage> {
  const ref = parseImageReference(refText);
  const rec = await readRef(assets, ref.canonical);
  if (rec) {
    const built = await readFile(path.join(storePaths(assets).images, rec.imageId, 'image.json')).then(() => true, () => false);
    if (built || (await missingBlobs(assets, rec)).length === 0) return buildFromRecord(rec, assets, o.log);
  }
  const r = await pullImage(refText, assets, { offline: o.offline, log: o.log, onLayer: o.log && ((e) => { if (e.state !== 'fetching' || e.bytes === 0) o.log!(`pulling ${ref.canonical}: layer ${e.index + 1}/${e.count} ${e.state}`); }) });
  return r.image!;
}

async function missingBlobs(assets: string, rec: RefRecord): Promise<string[]> {
  const out: string[] = [];
  for (const d of blobsOf(rec)) if (!(await hasBlob(assets, d))) out.push(d);
  return out;
}

export async function pullImage(refText: string, assets: string, o: PullOptions = {}): Promise<ImagePullResult> {
  const ref = parseImageReference(refText);
  const blobs = storePaths(assets).blobs;
  await mkdir(blobs, { recursive: true });
  await sweepDeadTemps(blobs);
  let rec: RefRecord;
  let fetchedBlobs = 0;
  let fetchedBytes = 0;
  const cachedLayers = new Set<string>();
  if (o.offline) {
    const found = await readRef(assets, ref.canonical);
    if (!found) throw new NotFoundError(`${ref.canonical} is not in the local image cache (offline)`, { where: refText, hint: `Pull it once with the network: smol image pull ${refText}` });
    const missing = await missingBlobs(assets, found);
    if (missing.length) throw new NotFoundError(`${ref.canonical} is cached incompletely (offline); missing blobs: ${missing.join(', ')}`, { where: refText, hint: `Pull it again with the network: smol image pull ${refText}` });
    rec = found;
    rec.layers.forEach((l) => cachedLayers.add(l.digest));
    rec.layers.forEach((l, i) => o.onLayer?.({ index: i, count: rec.layers.length, digest: l.digest, size: l.size, state: 'cached', bytes: l.size }));
  } else {
    const client = await RegistryClient.open(ref.registry, ref.apiHost, { plainHttp: o.plainHttp, env: o.env });
    const what = `pull ${refText}`;
    const fetchBlob = async (digest: string, size: number, onBytes?: (n: number) => void) => {
      const n = await client.downloadBlob(ref.repository, digest, size, blobPath(assets, digest), { what: `${what}: blob ${digest.slice(0, 19)}`, onBytes });
      fetchedBlobs++;
      fetchedBytes += n;
    };
    let top = await manifestAt(client, ref, ref.reference, ref.digest, assets, what);
    let indexDigest: string | undefined;
    if (Array.isArray(top.json.manifests)) {
      indexDigest = top.digest;
      const index = check(indexSchema, top.json, `${what}: image index`);
      const want = hostPlatform();
      const pick = index.manifests.find((d) => d.platform && `${d.platform.os}/${d.platform.architecture}` === want);
      if (!pick) {
        const has = index.manifests.map((d) => (d.platform ? `${d.platform.os}/${d.platform.architecture}${d.platform.variant ? `/${d.platform.variant}` : ''}` : '?')).join(', ');
        throw new NotFoundError(`${refText} has no ${want} image (it has: ${has || 'none'})`, { where: refText });
      }
      top = await manifestAt(client, ref, pick.digest, pick.digest, assets, what);
    }
    if (top.json.schemaVersion === 1) throw new UserError(`${refText} is a Docker schema 1 manifest, which smol does not read`, { where: refText, hint: 'Re-push the image with a current tool (docker, skopeo, buildah): they write schema 2 or OCI manifests.' });
    if (Array.isArray(top.json.manifests)) throw new ArtifactError(`${what}: an index inside an index is not an image manifest`, { where: refText });
    const m = check(manifestSchema, top.json, `${what}: image manifest`);
    for (const l of m.layers) {
      if (!LAYER_TYPES.test(l.mediaType)) throw new ArtifactError(`${what}: layer ${l.digest} has media type ${l.mediaType}, which is not an image layer`, { where: refText });
      if (l.urls?.length) throw new UserError(`${what}: layer ${l.digest} is a foreign layer (served from ${l.urls[0]}), which smol does not fetch`, { where: refText });
    }
    await checkDeclaredSizes(m, refText, o.env);
    if (!(await hasBlob(assets, m.config.digest))) await fetchBlob(m.config.digest, m.config.size);
    const arch = await configPlatform(assets, m.config.digest);
    if (arch && arch !== hostPlatform()) {
      throw new NotFoundError(`${refText} is a ${arch} image; this host runs ${hostPlatform()} guests`, { where: refText, hint: `Pull a tag (or a multi-platform index) that has a ${hostPlatform()} image.` });
    }
    const todo: { i: number; l: (typeof m.layers)[number] }[] = [];
    for (const [i, l] of m.layers.entries()) {
      if (await hasBlob(assets, l.digest)) {
        cachedLayers.add(l.digest);
        o.onLayer?.({ index: i, count: m.layers.length, digest: l.digest, size: l.size, state: 'cached', bytes: l.size });
      } else if (!todo.some((t) => t.l.digest === l.digest)) {
        todo.push({ i, l });
      }
    }
    // A few layers at once: one connection's reads leave the CPU idle while the registry sends (docker
    // pulls 3 at a time too). Each blob is still verified on its own before it is renamed into place.
    await eachLimit(todo, PARALLEL_LAYERS, async ({ i, l }) => {
      const ev = { index: i, count: m.layers.length, digest: l.digest, size: l.size };
      let bytes = 0;
      o.onLayer?.({ ...ev, state: 'fetching', bytes });
      await fetchBlob(l.digest, l.size, (n) => { bytes += n; o.onLayer?.({ ...ev, state: 'fetching', bytes }); });
      o.onLayer?.({ ...ev, state: 'done', bytes });
    });
    rec = {
      ref: ref.canonical, registry: ref.registry, repository: ref.repository, tag: ref.tag, pinned: ref.digest, indexDigest,
      manifestDigest: top.digest, config: { mediaType: m.config.mediaType, digest: m.config.digest, size: m.config.size },
      layers: m.layers.map((l) => ({ mediaType: l.mediaType, digest: l.digest, size: l.size })),
      platform: hostPlatform(), imageId: `oci-${digestOf(BUILDER_VERSION, top.digest).slice(0, 24)}`, pulledAt: new Date().toISOString(),
    };
    await readConfig(assets, rec); // a config that is not an image config fails the pull, not the first run
    await writeRef(assets, rec);
  }
  const image = o.build === false ? undefined : await buildFromRecord(rec, assets, o.log);
  return {
    ref: rec.ref, manifestDigest: rec.manifestDigest, indexDigest: rec.indexDigest, imageId: rec.imageId, platform: rec.platform,
    layers: rec.layers.map((l) => ({ digest: l.digest, size: l.size, cached: cachedLayers.has(l.digest) })),
    fetchedBlobs, fetchedBytes, image,
  };
}

/**
 * The sizes a manifest declares bound what is downloaded, so they are checked before anything is: a
 * compressed layer is no larger than what it unpacks to, which the image budget bounds (layers.ts).
 */
async function checkDeclaredSizes(m: { config: { size: number }; layers: { digest: string; size: number }[] }, refText: string, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const { unpackBudget } = await import('./layers.js');
  const max = unpackBudget(env).bytes;
  const total = m.layers.reduce((n, l) => n + l.size, 0);
  const problem = m.config.size > MAX_CONFIG ? `its image config of ${m.config.size} bytes is over the ${MAX_CONFIG}-byte limit`
    : total > max ? `its layers declare ${total} bytes, more than SMOL_IMAGE_MAX_GIB (${max / 2 ** 30} GiB) allows an image`
      : null;
  if (problem) {
    throw new ValidationError(`${refText} is too large: ${problem}; nothing was fetched`, [{ path: refText, message: problem }], {
      hint: 'Raise SMOL_IMAGE_MAX_GIB (docs/images.md) only for an image you trust.',
    });
  }
}

/** A manifest by tag or digest, checked against the digest when one is expected, kept as a blob. */
async function manifestAt(client: RegistryClient, ref: ImageReference, reference: string, expect: string | undefined, assets: string, what: string): Promise<{ digest: string; json: Record<string, unknown> }> {
  const cachedPath = expect ? blobPath(assets, expect) : undefined;
  let bytes: Buffer | null = cachedPath ? await readFile(cachedPath).catch(() => null) : null;
  if (!bytes) {
    const got = await client.getManifest(ref.repository, reference, ACCEPT, `${what}: manifest ${reference}`);
    if (expect && got.digest !== expect) throw new ArtifactError(`${what}: the registry sent a manifest whose digest is ${got.digest}, not ${expect}; nothing was cached`, { where: `${ref.canonical}` });
    bytes = got.bytes;
  }
  let json: unknown;
  try { json = JSON.parse(bytes.toString('utf8')); } catch { json = undefined; }
  if (!json || typeof json !== 'object' || Array.isArray(json)) {
    throw new ArtifactError(`${what}: the manifest for ${ref.canonical} is not a JSON object (${bytes.length} bytes starting ${JSON.stringify(bytes.subarray(0, 24).toString('latin1'))})`, { where: ref.canonical, hint: 'The registry (or a proxy in front of it) is serving something other than an image manifest.' });
  }
  const digest = sha256Of(bytes);
  const target = blobPath(assets, digest);
  if (!(await hasBlob(assets, digest))) {
    const tmp = tempName(target);
    const fh = await open(tmp, 'wx', 0o644);
    try { await fh.writeFile(bytes); } finally { await fh.close(); }
    await rename(tmp, target);
  }
  return { digest, json: json as Record<string, unknown> };
}

/** Runs `fn` over `items`, at most `limit` at a time; the first failure rejects once the others have settled. */
async function eachLimit<T>(items: T[], limit: number, fn: (x: T) => Promise<void>): Promise<void> {
  let next = 0;
  let failed = false;
  const worker = async () => { while (!failed && next < items.length) { const x = items[next++]; try { await fn(x); } catch (e) { failed = true; throw e; } } };
  const results = await Promise.allSettled(Array.from({ length: Math.min(limit, items.length) }, worker));
  const bad = results.find((r) => r.status === 'rejected');
  if (bad) throw (bad as PromiseRejectedResult).reason;
}

function check<T>(schema: z.ZodType<T>, v: unknown, what: string): T {
  const r = schema.safeParse(v);
  if (!r.success) throw new ArtifactError(`${what} is malformed: ${r.error.issues.slice(0, 3).map((i) => `${i.path.join('.') || '(top)'}: ${i.message}`).join('; ')}`);
  return r.data;
}

async function readConfig(assets: string, rec: RefRecord) {
  const { runConfigOf } = await import('./tarball.js'); // with node-tar: loaded on use, not at every CLI start
  const text = await readFile(blobPath(assets, rec.config.digest), 'utf8');
  let json: unknown;
  try { json = JSON.parse(text); } catch { throw new ArtifactError(`${rec.ref}: image config ${rec.config.digest} is not JSON`, { where: rec.ref }); }
  return runConfigOf(json, `${rec.ref} config`);
}

/** `os/architecture` from the image config, when it says. */
async function configPlatform(assets: string, digest: string): Promise<string | null> {
  let c: { os?: unknown; architecture?: unknown };
  try { c = JSON.parse(await readFile(blobPath(assets, digest), 'utf8')) as typeof c; } catch { return null; } // readConfig names a non-JSON config
  if (!c || typeof c !== 'object') return null;
  return typeof c.architecture === 'string' && c.architecture ? `${typeof c.os === 'string' && c.os ? c.os : 'linux'}/${c.architecture}` : null;
}

const ZSTD_MAGIC = Buffer.from([0x28, 0xb5, 0x2f, 0xfd]);

/** The base for a recorded reference: cached, or built from its layer blobs (zstd ones through Debian's zstd). */
export async function buildFromRecord(rec: RefRecord, assets: string, log?: (line: string) => void): Promise<ResolvedImage> {
  return cached(assets, rec.imageId, 'registry', rec.ref, async (root, work) => {
    const missing = await missingBlobs(assets, rec);
    if (missing.length) throw new NotFoundError(`${rec.ref}: cached blobs are missing (${missing.join(', ')})`, { where: rec.ref, hint: `Pull it again: smol image pull ${rec.ref}` });
    const config = await readConfig(assets, rec);
    const { applyLayer, unpackBudget } = await import('./layers.js');
    const budget = unpackBudget(); // one for the whole image: its layers share it
    for (const [i, l] of rec.layers.entries()) {
      log?.(`applying layer ${i + 1}/${rec.layers.length}`);
      let file = blobPath(assets, l.digest);
      const head = Buffer.alloc(4);
      const fh = await open(file, 'r');
      try { await fh.read(head, 0, 4, 0); } finally { await fh.close(); }
      if (head.equals(ZSTD_MAGIC)) {
        const out = path.join(work, `layer-${i}.tar`);
        await run('zstd', ['-d', '-q', '-f', '--no-progress', file, '-o', out]).catch((e: unknown) => {
          throw new ArtifactError(`${rec.ref}: layer ${l.digest} is not valid zstd data: ${(e as Error).message.split('\n').pop()}`, { where: rec.ref });
        });
        file = out;
      }
      await applyLayer(root, file, `${rec.ref} layer ${i + 1} (${l.digest.slice(7, 19)})`, budget);
      if (file.startsWith(work)) await rm(file, { force: true });
    }
    for (const d of ['proc', 'sys', 'dev', 'run', 'tmp']) await mkdir(path.join(root, d), { recursive: true });
    return { config, tags: [rec.ref] };
  }, log);
}
