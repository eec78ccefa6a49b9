/**
 * Where a machine paused to disk keeps its saved RAM and device state. Only a complete save is ever under
 * this name (pause.ts writes a temp dir and renames it), so its presence alone says the machine can resume.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { MachineLayout } from './layout.js';

export const pausedDir = (layout: Pick<MachineLayout, 'dir'>): string => path.join(layout.dir, 'paused');

/** Temp dirs of a save in progress, and saves already resumed from waiting for removal. */
export const PAUSE_SCRATCH_PREFIX = '.pause-';

export function hasPausedState(layout: Pick<MachineLayout, 'dir'>): boolean {
  return fs.existsSync(path.join(pausedDir(layout), 'meta.json'));
}
