/**
 * Boot snapshots no run is using (vm/boot-snapshot.ts): all of them but those a restore has marked, or looked up in the
 * last minute. They are a cache: the next `smol run` boots cold once and saves a new one.
 */
import fs from 'node:fs';
import path from 'node:path';
import { snapshotInUse, snapshotsDir } from '../boot-snapshot.js';
import { diskBytes, recentlyTouched } from './du.js';
import { result, type PruneOptions, type PruneResult, type PrunedItem } from './types.js';
import { SNAPSHOT_CAPTURE_STALE_MS } from '../limits.js';

export async function pruneBootSnapshots(home: string, o: PruneOptions = {}): Promise<PruneResult> {
  const root = snapshotsDir(home);
  let names: string[] = [];
  try {
    names = fs.readdirSync(root);
  } catch {
    return result('boot-snapshots', []);
  }
  const removed: PrunedItem[] = [];
  for (const n of names) {
    const p = path.join(root, n);
    if (n.startsWith('.') ? recentlyTouched(p, SNAPSHOT_CAPTURE_STALE_MS) : snapshotInUse(p)) continue;
    const item = { name: n, bytes: diskBytes(p) };
    if (!o.dryRun) fs.rmSync(p, { recursive: true, force: true });
    removed.push(item);
  }
  return result('boot-snapshots', removed);
}
