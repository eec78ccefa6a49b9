/**
 * Image references → a shared, read-only qcow2 base disk, built once and cached by content digest under
 * $SMOL_ASSETS/images/<id>/. A reference is `default` (the busybox userland), a rootfs directory, a
 * `docker save` / OCI image-layout tarball (.tar, .tar.gz), or a registry reference (pull.ts), pulled on first use.
 */
import { mkdir, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { dataPaths } from '../../util/paths.js';
import { NotFoundError, SmolError, ValidationError } from '../../errors/index.js';
import { digestOf, fileDigest } from './digest.js';
import { cachedTreeDigest, speculativeTreeDigest } from './tree-digest-cache.js';
import { isTarballRef, looksLikeImageReference } from '../../util/image-ref.js';
import { applyLayer, unpackBudget } from './layers.js';
import { unpackImageTarball } from './tarball.js';
import { BUSYBOX, writeBusyboxTree } from './tree.js';
import { BUILDER_VERSION, EMPTY_CONFIG, builtImage, cached, type ImageKind, type ResolvedImage } from './base-cache.js';
import { resolveReference } from './pull.js';
import { trace } from '../../util/trace.js';

/** Bump when writeBusyboxTree writes something else (tree-2: no /etc/hosts, the init writes it). */
const BUSYBOX_TREE_VERSION = 'tree-2';

export type { ImageKind, ResolvedImage };

export { isTarballRef };

/** The cache id the default image has with this busybox and builder. */
export async function defaultImageId(): Promise<string> {
  return `default-${digestOf(BUILDER_VERSION, BUSYBOX_TREE_VERSION, await fileDigest(BUSYBOX)).slice(0, 24)}`;
}

export interface ResolveOptions {
  log?: (line: string) => void;
  offline?: boolean;
  /**
   * A rootfs directory hashed before may resolve to its last digest at once, while its stat listing runs in
   * a subprocess (`confirmed` on the result; tree-fingerprint.ts). Only when that digest's base disk is built: a base built from
   * an unconfirmed tree could cache new content under the old id.
   */
  speculative?: boolean;
}

export async function resolveImage(ref: string, home: string, opts: ResolveOptions = {}): Promise<ResolvedImage> {
  if (ref === 'default') {
    const id = await defaultImageId();
    return cached(home, id, 'default', 'default', async (root) => {
      await writeBusyboxTree(root);
      await writeFile(path.join(root, 'etc/smol-release'), 'smol default image (busybox)\n');
      return { config: EMPTY_CONFIG, tags: [] };
    }, opts.log);
  }
  const abs = path.resolve(ref);
  const st = await stat(abs).catch(() => null);
  if (!st) {
    // a registry reference pulls on first use (the cached pull otherwise: no network)
    if (looksLikeImageReference(ref)) {
      return resolveReference(ref, home, { log: opts.log, offline: opts.offline ?? process.env.SMOL_OFFLINE === '1' }).catch((err: unknown) => {
        // `--image myrootfs` is a Docker Hub name too (as with docker): say that no such path was found either
        if (!(err instanceof SmolError) || /[/:@]/.test(ref)) throw err;
        throw err.withHint(`If you meant a rootfs directory or tarball: there is no ${abs}.`);
      });
    }
    throw new NotFoundError(`image ${JSON.stringify(ref)} not found`, {
      where: abs,
      hint: 'Pass `default`, a rootfs directory, a docker-save/OCI .tar file, or a registry reference such as debian:bookworm.',
    });
  }
  if (st.isDirectory()) {
    const cacheFile = dataPaths(home).treeDigests;
    const idOf = (content: string) => `dir-${digestOf(BUILDER_VERSION, content).slice(0, 24)}`;
    const guess = opts.speculative ? await speculativeTreeDigest(abs, cacheFile) : null;
    const built = guess && (await builtImage(home, idOf(guess.content)));
    if (built) return { ...built, confirmed: guess.confirm().then((ok) => { trace(`image: tree listing done (${ok ? 'unchanged' : 'changed'})`); return ok; }) };
    return cached(home, idOf(await cachedTreeDigest(abs, cacheFile)), 'directory', abs, null, opts.log);
  }
  if (st.isFile() && isTarballRef(abs)) {
    const id = `tar-${digestOf(BUILDER_VERSION, await fileDigest(abs)).slice(0, 24)}`;
    let kind: ImageKind = 'docker';
    const r = await cached(home, id, 'docker', abs, async (root, work) => {
      const img = await unpackImageTarball(abs, work);
      kind = img.format;
      const budget = unpackBudget(); // one for the whole image: its layers share it
      for (const [i, layer] of img.layers.entries()) {
        opts.log?.(`applying layer ${i + 1}/${img.layers.length}`);
        await applyLayer(root, layer, `${path.basename(abs)} layer ${i + 1}`, budget);
      }
      // mount points the guest's /init moves its API filesystems onto
      for (const d of ['proc', 'sys', 'dev', 'run', 'tmp']) await mkdir(path.join(root, d), { recursive: true });
      return { config: img.config, tags: img.tags };
    }, opts.log, () => kind);
    return r;
  }
  throw new ValidationError(`image ${JSON.stringify(ref)} is not a directory or an image tarball`, [{ path: 'image', message: 'expected `default`, a directory, or a .tar/.tar.gz file' }]);
}
