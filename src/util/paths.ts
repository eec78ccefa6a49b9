/** Where smol keeps its state. Everything is under $SMOL_HOME so tests can point it at a temp dir. */
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export function smolHome(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SMOL_HOME) return path.resolve(env.SMOL_HOME);
  const xdg = env.XDG_DATA_HOME || path.join(os.homedir(), '.local', 'share');
  return path.join(xdg, 'smol');
}

/**
 * Kernel, images and caches: rebuildable assets, shareable between several state homes (tests use one
 * assets dir for many scratch homes). $SMOL_ASSETS, else the state home.
 */
export function assetsHome(env: NodeJS.ProcessEnv = process.env): string {
  return env.SMOL_ASSETS ? path.resolve(env.SMOL_ASSETS) : smolHome(env);
}

/** The project root (where package.json, shims/ and scripts/ live), from src/ or dist/. */
export const projectRoot: string = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');

export const dataPaths = (home = smolHome()) => ({
  home,
  machineDb: path.join(home, 'smol.db'),
  machines: path.join(home, 'machines'),
  images: path.join(home, 'images'),
  kernel: path.join(home, 'kernel'),
  cache: path.join(home, 'cache'),
  /** `--image DIR` content digests by stat fingerprint (vm/image/tree-digest-cache.ts). */
  treeDigests: path.join(home, 'cache', 'tree-digests.json'),
  /** Artifacts a rollout worker pulled for artifact stages (rollout/vm-artifact.ts; pruned by vm/prune/caches.ts). */
  pulledArtifacts: path.join(home, 'cache', 'pulled'),
  /** Remote ledger blobs fetched as files for stages (ledger/blob-common.ts; pruned by vm/prune/caches.ts). */
  blobCache: path.join(home, 'cache', 'blobs'),
  run: path.join(home, 'run'),
});

/** Native build outputs (agent, shims, fake driver) from `npm run build`. */
export const buildPaths = {
  root: path.join(projectRoot, 'build'),
  agent: path.join(projectRoot, 'build', 'smol-agent'),
};
