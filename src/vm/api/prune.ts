/** `smol prune`: leftovers removed, machines first, each pruner keeping what anything still needs (docs/prune.md). */

/** Every pruner in order, and running a list of them into one summary. */
export { pruners, pruneAll, type PruneSummary, type PruneOptions, type PruneResult, type Pruner, type PrunedItem } from '../prune/index.js';
/** One pruner each: machines and directories nothing can use any more, boot snapshots, cached artifacts. */
export { pruneMachines, pruneBootSnapshots, pruneArtifacts } from '../prune/index.js';
