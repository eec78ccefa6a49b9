/**
 * The rollout worker's caches in `$SMOL_HOME/cache`: `pulled/<digest>.smolmachine` (artifacts a worker pulled for
 * artifact stages; rollout/vm-artifact.ts) and `blobs/<aa>/<rest>` (remote ledger blobs a stage read as files;
 * ledger/blob-common.ts). Both refill on demand, so whatever nothing holds right now may go.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ConflictError } from '../../errors/index.js';
import { dataPaths } from '../../util/paths.js';
import type { MachineService } from '../service.js';
import { pulledArtifactLock } from '../store/machines.js';
import { pathsInUse } from './artifacts.js';
import { diskBytes, recentlyTouched } from './du.js';
import { result, type PruneOptions, type PruneResult, type PrunedItem } from './types.js';
import { WORKER_CACHE_GRACE_MS } from '../limits.js';

/** True when nobody holds `id` now (taken and given back at once: a worker that wants it retries). */
function free(svc: MachineService, id: string): boolean {
  try {
    svc.store.lock(id, 'prune')();
    return true;
  } catch (err) {
    if (err instanceof ConflictError) return false;
    throw err;
  }
}

function list(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch {
    return [];
  }
}

function prunePulled(svc: MachineService, o: PruneOptions, removed: PrunedItem[]): void {
  const dir = dataPaths(svc.home).pulledArtifacts;
  const used = new Set(pathsInUse(svc));
  for (const n of list(dir)) {
    const p = path.join(dir, n);
    const hex = /^([0-9a-f]{64})\.smolmachine/.exec(n)?.[1];
    // a fork point's spec names its pulled file: kept while the point is; a pull in progress holds the lock
    if (used.has(p) || recentlyTouched(p, WORKER_CACHE_GRACE_MS) || (hex && !free(svc, pulledArtifactLock(`sha256:${hex}`)))) continue;
    removed.push({ name: `pulled/${n}`, bytes: diskBytes(p) });
    if (!o.dryRun) fs.rmSync(p, { recursive: true, force: true });
  }
}

/** A blob a stage may be about to open was fetched or looked up within the grace (cacheBlobFile touches hits). */
function pruneBlobs(home: string, o: PruneOptions, removed: PrunedItem[]): void {
  const dir = dataPaths(home).blobCache;
  for (const sub of list(dir)) {
    const d = path.join(dir, sub);
    for (const n of list(d)) {
      const p = path.join(d, n);
      if (recentlyTouched(p, WORKER_CACHE_GRACE_MS)) continue;
      removed.push({ name: `blobs/${sub}/${n}`, bytes: diskBytes(p) });
      if (!o.dryRun) fs.rmSync(p, { force: true });
    }
    if (!o.dryRun && list(d).length === 0) fs.rmSync(d, { recursive: true, force: true });
  }
}

export async function pruneWorkerCaches(svc: MachineService, o: PruneOptions = {}): Promise<PruneResult> {
  const removed: PrunedItem[] = [];
  prunePulled(svc, o, removed);
  pruneBlobs(svc.home, o, removed);
  return result('worker-caches', removed);
}
