/**
 * `smol prune`: every pruner in turn, machines first (a removed leftover frees the snapshots and artifacts it
 * held). Each pruner keeps what any machine, fork point or clone still needs; see docs/prune.md.
 */
import type { MachineService } from '../service.js';
import { pruneArtifacts } from './artifacts.js';
import { pruneMachines } from './machines.js';
import { pruneBootSnapshots } from './snapshots.js';
import type { PruneOptions, PruneResult, Pruner } from './types.js';

export type { PruneOptions, PruneResult, Pruner, PrunedItem } from './types.js';
export { pruneArtifacts, pruneBootSnapshots, pruneMachines };

export function pruners(svc: MachineService): Pruner[] {
  return [
    (o) => pruneMachines(svc, o),
    // images: the image service's pruneImages({dryRun}) (issue 18) goes here, after machines, once it exists
    (o) => pruneBootSnapshots(svc.home, o),
    (o) => pruneArtifacts(svc, o),
  ];
}

export interface PruneSummary { dryRun: boolean; results: PruneResult[]; bytes: number }

export async function pruneAll(list: readonly Pruner[], o: PruneOptions = {}): Promise<PruneSummary> {
  const results: PruneResult[] = [];
  for (const p of list) results.push(await p(o));
  return { dryRun: !!o.dryRun, results, bytes: results.reduce((n, r) => n + r.bytes, 0) };
}
