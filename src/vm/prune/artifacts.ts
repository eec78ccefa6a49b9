/**
 * `smol pack prune`: extracted artifacts (`$SMOL_HOME/cache/artifacts/<digest>/`, artifact/cache.ts) that no
 * machine uses. A machine uses one when its boot files, its disk's backing chain or its resume plan point into
 * it (`machine create --from`, and a `pack run` while it runs). An extraction in progress (a live lock) and a
 * cache entry looked up in the last minute (its machine is being made) are kept.
 */
import fs from 'node:fs';
import path from 'node:path';
import { defaultArtifactCache } from '../../artifact/cache.js';
import { pidAlive } from '../store/machines.js';
import { bootFile, resumePlanFile } from '../boot-files.js';
import type { MachineService } from '../service.js';
import { diskUsage } from '../usage.js';
import { diskBytes, recentlyTouched } from './du.js';
import { result, type PruneOptions, type PruneResult, type PrunedItem } from './types.js';
import { ARTIFACT_LOOKUP_GRACE_MS } from '../limits.js';

/** Every file path a machine of this home depends on. */
export function pathsInUse(svc: MachineService): string[] {
  const out: string[] = [];
  for (const r of svc.store.list()) {
    const l = svc.layout(r);
    for (const f of [bootFile(l), resumePlanFile(l)]) {
      try {
        const v = JSON.parse(fs.readFileSync(f, 'utf8')) as Record<string, unknown>;
        for (const x of Object.values(v)) if (typeof x === 'string') out.push(path.resolve(x));
      } catch {
        // none: a machine on the host's kernel, or one past its resume
      }
    }
    // a broken chain still names the files it has (usage.ts stops at the first missing one)
    for (const f of diskUsage(l.disk)?.chain ?? []) out.push(path.resolve(f));
    if (r.spec.image.endsWith('.smolmachine')) out.push(path.resolve(r.spec.image));
  }
  return out;
}

const lockHeld = (lock: string): boolean => {
  try {
    return pidAlive(Number(fs.readFileSync(lock, 'utf8').trim()));
  } catch {
    return false;
  }
};

export async function pruneArtifacts(svc: MachineService, o: PruneOptions = {}): Promise<PruneResult> {
  const cache = defaultArtifactCache(svc.home);
  let names: string[] = [];
  try {
    names = fs.readdirSync(cache);
  } catch {
    return result('artifacts', []);
  }
  const used = pathsInUse(svc);
  const removed: PrunedItem[] = [];
  for (const n of names) {
    const p = path.join(cache, n);
    // <digest>, <digest>.lock, .<digest>.tmp-XXXX: an entry is busy while its digest's lock is held
    const digest = n.replace(/^\./, '').replace(/\.lock$/, '').replace(/\.tmp-.*$/, '');
    if (lockHeld(path.join(cache, `${digest}.lock`))) continue;
    if (n === digest) {
      if (recentlyTouched(p, ARTIFACT_LOOKUP_GRACE_MS) || used.some((u) => u === p || u.startsWith(`${p}/`))) continue;
    }
    const item = { name: n, bytes: diskBytes(p) };
    if (!o.dryRun) fs.rmSync(p, { recursive: true, force: true });
    removed.push(item);
  }
  return result('artifacts', removed);
}
