/**
 * Image references → a shared, read-only qcow2 base disk, built once and cached by content digest under
 * $SMOL_HOME/images/<id>/. A reference is `default` (the busybox userland), a rootfs directory, or a
 * `docker save` / OCI image-layout tarball (.tar, .tar.gz).
 */
import { mkdir, mkdtemp, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { dataPaths } from '../../util/paths.js';
import { NotFoundError, ValidationError, mapFsError } from '../../errors/index.js';
import { digestOf, fileDigest } from './digest.js';
import { cachedTreeDigest } from './tree-digest-cache.js';
import { isTarballRef, looksLikeImageReference } from '../../util/image-ref.js';
import { buildExt4Qcow2 } from './ext4.js';
import { applyLayer } from './layers.js';
import { unpackImageTarball, type ImageRunConfig } from './tarball.js';
import { BUSYBOX, writeBusyboxTree } from './tree.js';
import { sweepStaleTemps } from './tmp.js';

const BUILDER_VERSION = 'disk-1';
/** Bump when writeBusyboxTree writes something else (tree-2: no /etc/hosts, the init writes it). */
const BUSYBOX_TREE_VERSION = 'tree-2';

export type ImageKind = 'default' | 'directory' | 'docker' | 'oci';

export interface ResolvedImage {
  /** Stable cache id: kind plus a content digest. */
  id: string;
  kind: ImageKind;
  /** Read-only qcow2 base; give each machine its own overlay (createOverlay). */
  basePath: string;
  /** What the user passed, resolved to an absolute path for files and directories. */
  source: string;
  /** The image's own run settings (docker/OCI); empty for default and directories. */
  config: ImageRunConfig;
  tags: string[];
}

const EMPTY_CONFIG: ImageRunConfig = { env: [], entrypoint: [], cmd: [], workingDir: '', user: '' };

export { isTarballRef };

export async function resolveImage(ref: string, home: string, opts: { log?: (line: string) => void } = {}): Promise<ResolvedImage> {
  if (ref === 'default') {
    const id = `default-${digestOf(BUILDER_VERSION, BUSYBOX_TREE_VERSION, await fileDigest(BUSYBOX)).slice(0, 24)}`;
    return cached(home, id, 'default', 'default', async (root) => {
      await writeBusyboxTree(root);
      await writeFile(path.join(root, 'etc/smol-release'), 'smol default image (busybox)\n');
      return { config: EMPTY_CONFIG, tags: [] };
    }, opts.log);
  }
  const abs = path.resolve(ref);
  const st = await stat(abs).catch(() => null);
  if (!st) {
    const looksLikeRegistry = looksLikeImageReference(ref);
    throw new NotFoundError(`image ${JSON.stringify(ref)} not found`, {
      where: looksLikeRegistry ? undefined : abs,
      hint: looksLikeRegistry
        ? 'Registry pulls are not supported yet: use `docker save -o image.tar NAME` and pass image.tar, or a rootfs directory.'
        : 'Pass `default`, a rootfs directory, or a docker-save/OCI .tar file.',
    });
  }
  if (st.isDirectory()) {
    const id = `dir-${digestOf(BUILDER_VERSION, await cachedTreeDigest(abs, path.join(dataPaths(home).cache, 'tree-digests.json'))).slice(0, 24)}`;
    return cached(home, id, 'directory', abs, null, opts.log);
  }
  if (st.isFile() && isTarballRef(abs)) {
    const id = `tar-${digestOf(BUILDER_VERSION, await fileDigest(abs)).slice(0, 24)}`;
    let kind: ImageKind = 'docker';
    const r = await cached(home, id, 'docker', abs, async (root, work) => {
      const img = await unpackImageTarball(abs, work);
      kind = img.format;
      for (const [i, layer] of img.layers.entries()) {
        opts.log?.(`applying layer ${i + 1}/${img.layers.length}`);
        await applyLayer(root, layer, `${path.basename(abs)} layer ${i + 1}`);
      }
      // mount points the guest's /init moves its API filesystems onto
      for (const d of ['proc', 'sys', 'dev', 'run', 'tmp']) await mkdir(path.join(root, d), { recursive: true });
      return { config: img.config, tags: img.tags };
    }, opts.log, () => kind);
    return r;
  }
  throw new ValidationError(`image ${JSON.stringify(ref)} is not a directory or an image tarball`, [{ path: 'image', message: 'expected `default`, a directory, or a .tar/.tar.gz file' }]);
}

interface Built { config: ImageRunConfig; tags: string[] }

/**
 * Return the cached image or build it: `populate` fills a fresh rootfs (null: use `source` as the rootfs).
 * Everything happens in a temporary directory renamed into place, so a killed build leaves no cache entry.
 */
async function cached(home: string, id: string, kind: ImageKind, source: string, populate: ((root: string, work: string) => Promise<Built>) | null, log?: (line: string) => void, finalKind?: () => ImageKind): Promise<ResolvedImage> {
  const dir = path.join(dataPaths(home).images, id);
  const metaPath = path.join(dir, 'image.json');
  const meta = await readFile(metaPath, 'utf8').catch(() => null);
  if (meta) return { ...(JSON.parse(meta) as Omit<ResolvedImage, 'basePath'>), basePath: path.join(dir, 'base.qcow2') };
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
