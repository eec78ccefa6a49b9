/** Files of fork points nobody references any more: removed after their registry rows are gone. */
import fs from 'node:fs';
import path from 'node:path';
import { ForkPointStore, type ForkPointRecord } from '../registry/fork-points.js';
import type { MachineStore } from '../registry/machines.js';

export function forkDir(home: string, forkId: string): string {
  return path.join(home, 'forks', forkId);
}

export function forkMemFile(forkId: string): string {
  return path.join('/dev/shm', `smol-fork-${forkId}.mem`);
}

/**
 * Releases every unreferenced fork point. Unlinking a template that a clone still maps would be harmless
 * (the mapping keeps it), but the registry says when none does, so the memory is freed exactly then.
 */
export function releaseForkPoints(store: MachineStore): ForkPointRecord[] {
  const released = new ForkPointStore(store.db).releaseUnreferenced();
  for (const fp of released) removeForkFiles(fp);
  return released;
}

export function removeForkFiles(fp: Pick<ForkPointRecord, 'stateFile' | 'memFile' | 'memOwned'>): void {
  // first: a directory left half-removed must not look like a fork in progress (fork/abandoned.ts)
  fs.rmSync(path.join(path.dirname(fp.stateFile), 'owner.json'), { force: true });
  fs.rmSync(path.dirname(fp.stateFile), { recursive: true, force: true });
  if (fp.memOwned) fs.rmSync(fp.memFile, { force: true });
}
