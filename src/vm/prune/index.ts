/**
 * `smol prune`: every pruner in turn, machines first (a removed leftover frees the snapshots and artifacts it
 * held). Each pruner keeps what any machine, fork point or clone still needs; see docs/prune.md.
 */
import type { MachineService } from '../service.js';
import { pruneArtifacts } from './artifacts.js';
import { pruneWorkerCaches } from './caches.js';
import { pruneMachines } from './machines.js';
import { pruneBootSnapshots } from './snapshots.js';
import { result, type PruneOptions, type PruneResult, type Pruner } from './types.js';
import { pruneImages } from '../image/index.js';
import { assetsHome } from '../../util/paths.js';

export type { PruneOptions, PruneResult, Pruner, PrunedItem } from './types.js';
export { pruneArtifacts, pruneBootSnapshots, pruneMachines, pruneWorkerCaches };

export function pruners(svc: MachineService): Pruner[] {
  return [
    (o) => pruneMachines(svc, o),
    // after machines: a leftover removed above no longer holds its image
    async (o) => {
      const r = await pruneImages({ home: svc.home, assets: assetsHome({ ...process.env, SMOL_HOME: svc.home }), dryRun: o.dryRun });
      return result('images', r.removed.map((x) => ({ name: `${x.kind} ${x.what}`, bytes: x.bytes })));
    },
    (o) => pruneBootSnapshots(svc.home, o),
    (o) => pruneArtifacts(svc, o),
    // after machines: a fork point removed above no longer holds its pulled artifact
    (o) => pruneWorkerCaches(svc, o),
  ];
}

export interface PruneSummary { dryRun: boolean; results: PruneResult[]; bytes: number }

export async function pruneAll(list: readonly Pruner[], o: PruneOptions = {}): Promise<PruneSummary> {
  const results: PruneResult[] = [];
  for (const p of list) results.push(await p(o));
  return { dryRun: !!o.dryRun, results, bytes: results.reduce((n, r) => n + r.bytes, 0) };
}
