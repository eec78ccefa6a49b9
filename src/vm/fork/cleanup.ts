/** Files of fork points nobody references any more: removed after their registry rows are gone. */
import fs from 'node:fs';
import path from 'node:path';
import { ForkPointStore, type ForkPointRecord } from '../store/fork-points.js';
import type { MachineStore } from '../store/machines.js';

export function forkDir(home: string, forkId: string): string {
  return path.join(home, 'forks', forkId);
}

const OWNER_FILE = 'owner.json';

/** Where a fork in progress records itself (fork/abandoned.ts); gone once its fork point is recorded. */
export function forkOwnerFile(home: string, forkId: string): string {
  return path.join(forkDir(home, forkId), OWNER_FILE);
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

/** The files of a fork that never recorded its fork point: its directory and its clones' template. */
export function removeUnrecordedFork(home: string, forkId: string): void {
  removeForkFiles({ stateFile: path.join(forkDir(home, forkId), 'state'), memFile: forkMemFile(forkId), memOwned: true });
}

export function removeForkFiles(fp: Pick<ForkPointRecord, 'stateFile' | 'memFile' | 'memOwned'>): void {
  // first: a directory left half-removed must not look like a fork in progress (fork/abandoned.ts)
  fs.rmSync(path.join(path.dirname(fp.stateFile), OWNER_FILE), { force: true });
  fs.rmSync(path.dirname(fp.stateFile), { recursive: true, force: true });
  if (fp.memOwned) fs.rmSync(fp.memFile, { force: true });
}
