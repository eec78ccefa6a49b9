/** What every pruner returns, so `smol prune` can add them up and print one summary (docs/prune.md). */
export interface PrunedItem { name: string; bytes: number }

export interface PruneResult {
  /** "machines", "boot-snapshots", "artifacts" (and "images" once the image service has a pruner). */
  kind: string;
  removed: PrunedItem[];
  bytes: number;
}

export interface PruneOptions {
  /** Report what would go, remove nothing. */
  dryRun?: boolean;
}

export type Pruner = (o: PruneOptions) => Promise<PruneResult>;

export const result = (kind: string, removed: PrunedItem[]): PruneResult => ({ kind, removed, bytes: removed.reduce((n, r) => n + r.bytes, 0) });
