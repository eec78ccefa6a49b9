/**
 * The cache of built root disks under $SMOL_ASSETS/images/<id>/ (base.qcow2 + image.json), shared by every
 * image source: the default userland, rootfs directories, tarballs and registry pulls.
 */
import { mkdir, mkdtemp, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { dataPaths } from '../../util/paths.js';
import { mapFsError } from '../../errors/index.js';
import { buildExt4Qcow2 } from './ext4.js';
import type { ImageRunConfig } from './tarball.js';
import { sweepStaleTemps } from './tmp.js';

export const BUILDER_VERSION = 'disk-1';

export type ImageKind = 'default' | 'directory' | 'docker' | 'oci' | 'registry';

export interface ResolvedImage {
  /** Stable cache id: kind plus a content digest. */
  id: string;
  kind: ImageKind;
  /** Read-only qcow2 base; give each machine its own overlay (createOverlay). */
  basePath: string;
  /** What the user passed, resolved to an absolute path for files and directories; the canonical reference for pulls. */
  source: string;
  /** The image's own run settings (docker/OCI); empty for default and directories. */
  config: ImageRunConfig;
  tags: string[];
  /** Only from a speculative resolve (resolveImage): whether the id taken on trust still holds. */
  confirmed?: Promise<boolean>;
}

export const EMPTY_CONFIG: ImageRunConfig = { env: [], entrypoint: [], cmd: [], workingDir: '', user: '' };

export interface Built { config: ImageRunConfig; tags: string[] }

/** The built image `id`, or null: never builds. */
export async function builtImage(home: string, id: string): Promise<ResolvedImage | null> {
  const dir = path.join(dataPaths(home).images, id);
  const meta = await readFile(path.join(dir, 'image.json'), 'utf8').catch(() => null);
  return meta ? { ...(JSON.parse(meta) as Omit<ResolvedImage, 'basePath'>), basePath: path.join(dir, 'base.qcow2') } : null;
}

/**
 * Return the cached image or build it: `populate` fills a fresh rootfs (null: use `source` as the rootfs).
 * Everything happens in a temporary directory renamed into place, so a killed build leaves no cache entry.
 */
export async function cached(home: string, id: string, kind: ImageKind, source: string, populate: ((root: string, work: string) => Promise<Built>) | null, log?: (line: string) => void, finalKind?: () => ImageKind): Promise<ResolvedImage> {
  const hit = await builtImage(home, id);
  if (hit) return hit;
  const dir = path.join(dataPaths(home).images, id);
  const metaPath = path.join(dir, 'image.json');
  await mkdir(dataPaths(home).images, { recursive: true }).catch((e) => { throw mapFsError(e, 'creating the image cache'); });
  await sweepStaleTemps(dataPaths(home).images);
  const tmp = await mkdtemp(path.join(dataPaths(home).images, '.tmp-'));
  try {
    log?.(`building image ${id} from ${source}`);
    let built: Built = { config: EMPTY_CONFIG, tags: [] };
    let rootfs = source;
    if (populate) {
      rootfs = path.join(tmp, 'rootfs');
      const work = path.join(tmp, 'work');
      await mkdir(rootfs);
      await mkdir(work);
      built = await populate(rootfs, work);
    }
    const out = path.join(tmp, 'image');
    await mkdir(out);
    await buildExt4Qcow2(rootfs, path.join(out, 'base.qcow2'));
    const record: Omit<ResolvedImage, 'basePath'> = { id, kind: finalKind?.() ?? kind, source, config: built.config, tags: built.tags };
    await writeFile(path.join(out, 'image.json'), JSON.stringify(record, null, 2) + '\n');
    await rename(out, dir).catch(async (e) => { if (!(await stat(metaPath).catch(() => null))) throw e; });
    return { ...record, basePath: path.join(dir, 'base.qcow2') };
  } catch (e) {
    throw mapFsError(e, `building image ${id}`);
  } finally {
    await rm(tmp, { recursive: true, force: true });
  }
}
