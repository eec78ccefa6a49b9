/**
 * What registry pulls keep under $SMOL_ASSETS/images/: content-addressed blobs (manifests, configs,
 * layers) in blobs/sha256/<hex>, and one record per pulled reference in refs/<key>.json naming the
 * manifest, config and layers it resolved to and the built base (images/<id>/) made from them.
 * A blob file exists only once its digest was checked (client.ts renames it into place after that).
 */
import { createHash } from 'node:crypto';
import { mkdir, open, readFile, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import { dataPaths } from '../../util/paths.js';
import { mapFsError } from '../../errors/index.js';

export const layerSchema = z.object({ mediaType: z.string(), digest: z.string().regex(/^sha256:[a-f0-9]{64}$/), size: z.number().int().nonnegative() });
export const refRecordSchema = z.object({
  ref: z.string(),
  registry: z.string(),
  repository: z.string(),
  tag: z.string().optional(),
  /** The digest the user pinned (an index or a manifest), when they did. */
  pinned: z.string().optional(),
  /** The index (or manifest list) the tag pointed at, for multi-platform images. */
  indexDigest: z.string().optional(),
  manifestDigest: z.string(),
  config: layerSchema,
  layers: z.array(layerSchema),
  platform: z.string(),
  imageId: z.string(),
  pulledAt: z.string(),
}).strict();
export type RefRecord = z.infer<typeof refRecordSchema>;

export const storePaths = (assets: string) => {
  const images = dataPaths(assets).images;
  return { images, blobs: path.join(images, 'blobs', 'sha256'), refs: path.join(images, 'refs') };
};

export const blobPath = (assets: string, digest: string) => path.join(storePaths(assets).blobs, digest.slice('sha256:'.length));

export async function hasBlob(assets: string, digest: string): Promise<boolean> {
  return !!(await stat(blobPath(assets, digest)).catch(() => null));
}

const refKey = (canonical: string) => createHash('sha256').update(canonical).digest('hex').slice(0, 32);
const refFile = (assets: string, canonical: string) => path.join(storePaths(assets).refs, `${refKey(canonical)}.json`);

export async function readRef(assets: string, canonical: string): Promise<RefRecord | null> {
  const text = await readFile(refFile(assets, canonical), 'utf8').catch(() => null);
  if (!text) return null;
  const r = refRecordSchema.safeParse(JSON.parse(text));
  return r.success && r.data.ref === canonical ? r.data : null;
}

export async function writeRef(assets: string, rec: RefRecord): Promise<void> {
  const file = refFile(assets, rec.ref);
  const tmp = `${file}.tmp-${process.pid}`;
  try {
    await mkdir(path.dirname(file), { recursive: true });
    const fh = await open(tmp, 'w', 0o644);
    try { await fh.writeFile(JSON.stringify(rec, null, 2) + '\n'); } finally { await fh.close(); }
    await rename(tmp, file);
  } catch (e) {
    await rm(tmp, { force: true });
    throw mapFsError(e, `recording ${rec.ref}`);
  }
}

export async function removeRef(assets: string, canonical: string): Promise<void> {
  await rm(refFile(assets, canonical), { force: true });
}

export async function listRefs(assets: string): Promise<RefRecord[]> {
  const dir = storePaths(assets).refs;
  const out: RefRecord[] = [];
  for (const name of (await readdir(dir).catch(() => [] as string[])).sort()) {
    if (!name.endsWith('.json')) continue;
    const text = await readFile(path.join(dir, name), 'utf8').catch(() => null);
    const r = text ? refRecordSchema.safeParse((() => { try { return JSON.parse(text) as unknown; } catch { return null; } })()) : null;
    if (r?.success) out.push(r.data);
  }
  return out;
}

/** Every blob a record needs: the manifests it came through, its config and its layers. */
export function blobsOf(r: RefRecord): string[] {
  return [r.indexDigest, r.pinned, r.manifestDigest, r.config.digest, ...r.layers.map((l) => l.digest)].filter((d): d is string => !!d);
}
