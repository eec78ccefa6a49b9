/** What every pruner returns, so `smol prune` can add them up and print one summary (docs/prune.md). */
export interface PrunedItem { name: string; bytes: number }

export interface PruneResult {
  /** "machines", "images", "boot-snapshots" or "artifacts". */
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
