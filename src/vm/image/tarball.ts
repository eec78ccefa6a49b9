/**
 * Image tarballs: `docker save` (manifest.json + layer tars) and OCI image layouts (oci-layout, index.json,
 * blobs/sha256/…). Both unpack to an ordered list of layer files plus the image config's run settings.
 */
import { mkdir, readFile, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import * as tar from 'tar';
import { z } from 'zod';
import { ValidationError } from '../../errors/index.js';
import { safeComponents, unpackBudget, type UnpackBudget } from './layers.js';

export interface ImageRunConfig { env: string[]; entrypoint: string[]; cmd: string[]; workingDir: string; user: string }

export interface UnpackedImage { format: 'docker' | 'oci'; layers: string[]; config: ImageRunConfig; tags: string[] }

const dockerManifest = z.array(z.object({ Config: z.string(), RepoTags: z.array(z.string()).nullish(), Layers: z.array(z.string()) })).min(1);
const descriptor = z.object({ mediaType: z.string().optional(), digest: z.string().regex(/^sha256:[a-f0-9]{64}$/), annotations: z.record(z.string(), z.string()).optional() });
const ociIndex = z.object({ manifests: z.array(descriptor).min(1) });
const ociManifest = z.object({ config: descriptor, layers: z.array(descriptor) });
const imageConfig = z.object({
  config: z.object({
    Env: z.array(z.string()).nullish(), Entrypoint: z.array(z.string()).nullish(), Cmd: z.array(z.string()).nullish(),
    WorkingDir: z.string().nullish(), User: z.string().nullish(),
  }).nullish(),
}).loose();

/**
 * Unpack the outer archive into `workDir` (refusing escapes, and stopping at the image budget: a gzip
 * archive can be a bomb too) and describe the image.
 */
export async function unpackImageTarball(file: string, workDir: string, budget: UnpackBudget = unpackBudget()): Promise<UnpackedImage> {
  const bad: string[] = [];
  let over = '';
  await mkdir(workDir, { recursive: true });
  await tar.x({
    file, cwd: workDir, preserveOwner: false,
    filter: (p, e) => {
      if (!safeComponents(p)) { bad.push(p); return false; }
      budget.entries--;
      budget.bytes -= Math.max(0, (e as tar.ReadEntry).size ?? 0);
      if (budget.entries < 0 || budget.bytes < 0) { over ||= `${p}: past SMOL_IMAGE_MAX_GIB or SMOL_IMAGE_MAX_FILES`; return false; }
      return true;
    },
    onwarn: (code, message) => { if (code !== 'TAR_ENTRY_INFO') bad.push(message); },
  }).catch((e) => { throw new ValidationError(`${path.basename(file)} is not a readable tar archive`, [{ path: file, message: String((e as Error).message) }]); });
  if (over) throw new ValidationError(`image archive ${path.basename(file)} is too large`, [{ path: file, message: over }], { hint: 'Raise SMOL_IMAGE_MAX_GIB or SMOL_IMAGE_MAX_FILES (docs/images.md) only for an image you trust.' });
  if (bad.length) throw new ValidationError(`image archive ${path.basename(file)} is unsafe or malformed`, bad.slice(0, 20).map((m) => ({ path: file, message: m })));
  if (await exists(path.join(workDir, 'manifest.json'))) return readDocker(workDir, file);
  if (await exists(path.join(workDir, 'index.json'))) return readOci(workDir, file);
  throw new ValidationError(`${path.basename(file)} is neither a docker save nor an OCI image layout tarball`, [{ path: file, message: 'no manifest.json or index.json at the top level' }]);
}

async function readDocker(dir: string, file: string): Promise<UnpackedImage> {
  const m = parse(dockerManifest, await readJson(dir, 'manifest.json', file), file, 'manifest.json')[0];
  return {
    format: 'docker',
    layers: await Promise.all(m.Layers.map((l) => inside(dir, l, file))),
    config: runConfig(parse(imageConfig, await readJson(dir, m.Config, file), file, m.Config)),
    tags: m.RepoTags ?? [],
  };
}

async function readOci(dir: string, file: string): Promise<UnpackedImage> {
  let index = parse(ociIndex, await readJson(dir, 'index.json', file), file, 'index.json');
  // an index may point at another index (multi-platform): follow it to the amd64 manifest
  for (let depth = 0; depth < 4; depth++) {
    const pick = index.manifests.find((d) => /amd64/.test(JSON.stringify(d))) ?? index.manifests[0];
    const blob = await readJson(dir, blobPath(pick.digest), file) as Record<string, unknown>;
    if (Array.isArray(blob.manifests)) { index = parse(ociIndex, blob, file, pick.digest); continue; }
    const m = parse(ociManifest, blob, file, pick.digest);
    const tags = index.manifests.map((d) => d.annotations?.['org.opencontainers.image.ref.name']).filter((t): t is string => !!t);
    return {
      format: 'oci',
      layers: await Promise.all(m.layers.map((l) => inside(dir, blobPath(l.digest), file))),
      config: runConfig(parse(imageConfig, await readJson(dir, blobPath(m.config.digest), file), file, m.config.digest)),
      tags,
    };
  }
  throw new ValidationError(`${path.basename(file)}: image index nests too deeply`, [{ path: file, message: 'index.json' }]);
}

const blobPath = (digest: string) => `blobs/sha256/${digest.slice('sha256:'.length)}`;

/**
 * A regular file of the unpacked archive. docker save links duplicate layers with symlinks, so those are
 * followed, but only to a file inside the archive: never to a host file or device the archive names.
 */
async function inside(dir: string, rel: string, file: string): Promise<string> {
  const parts = safeComponents(rel);
  const outside = (why: string) => new ValidationError(`image archive ${path.basename(file)} references a path outside itself`, [{ path: file, message: `${rel}: ${why}` }]);
  if (!parts || parts.length === 0) throw outside('not a path inside the archive');
  const p = path.join(dir, ...parts);
  const real = await realpath(p).catch(() => null);
  if (real === null) throw new ValidationError(`image archive ${path.basename(file)} lacks ${rel}`, [{ path: file, message: `missing ${rel}` }]);
  const top = await realpath(dir);
  if (!real.startsWith(top + path.sep)) throw outside(`a link to ${real}`);
  if (!(await stat(real)).isFile()) throw outside('not a regular file');
  return real;
}

async function readJson(dir: string, rel: string, file: string): Promise<unknown> {
  const p = await inside(dir, rel, file);
  const text = await readFile(p, 'utf8');
  try { return JSON.parse(text); } catch { throw new ValidationError(`image archive ${path.basename(file)}: ${rel} is not JSON`, [{ path: rel, message: 'invalid JSON' }]); }
}

function parse<T>(schema: z.ZodType<T>, v: unknown, file: string, what: string): T {
  const r = schema.safeParse(v);
  if (!r.success) throw new ValidationError(`image archive ${path.basename(file)}: invalid ${what}`, r.error.issues.map((i) => ({ path: `${what}:${i.path.join('.')}`, message: i.message })));
  return r.data;
}

function runConfig(c: z.infer<typeof imageConfig>): ImageRunConfig {
  const k = c.config ?? {};
  return { env: k.Env ?? [], entrypoint: k.Entrypoint ?? [], cmd: k.Cmd ?? [], workingDir: k.WorkingDir ?? '', user: k.User ?? '' };
}

async function exists(p: string): Promise<boolean> {
  return !!(await stat(p).catch(() => null));
}

/** An image config blob's run settings: the same reading for tarballs and registry pulls. */
export function runConfigOf(json: unknown, where: string): ImageRunConfig {
  return runConfig(parse(imageConfig, json, where, 'image config'));
}
