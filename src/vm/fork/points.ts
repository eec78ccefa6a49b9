/** `smol snapshot ls/rm`: saved fork points, what they hold on the host, and which clones use them. */
import fs from 'node:fs';
import { ConflictError, NotFoundError } from '../../errors/index.js';
import { ForkPointStore, type ForkPointRecord } from '../store/fork-points.js';
import type { MachineService } from '../service.js';
import { releaseForkPoints } from './cleanup.js';

export interface PointView {
  name: string;
  id: string;
  /** The machine it was saved from, by its name then; `machineGone` when it has been removed since. */
  machine: string;
  machineGone: boolean;
  createdAt: string;
  memoryMiB: number;
  clones: string[];
  /** Bytes the point holds: its template's resident pages, its device state, its own disk layer. */
  sizes: { templateBytes: number; stateBytes: number; diskBytes: number; totalBytes: number };
  vm: ForkPointRecord['vm'];
}

const allocated = (f: string | null) => {
  try {
    return f ? fs.statSync(f).blocks * 512 : 0;
  } catch {
    return 0;
  }
};

export function pointView(svc: MachineService, fp: ForkPointRecord): PointView {
  const store = new ForkPointStore(svc.store.db);
  const sizes = { templateBytes: allocated(fp.memFile), stateBytes: allocated(fp.stateFile), diskBytes: allocated(fp.frozenDisk), totalBytes: 0 };
  sizes.totalBytes = sizes.templateBytes + sizes.stateBytes + sizes.diskBytes;
  return {
    name: fp.name ?? fp.id, id: fp.id, machine: fp.source?.machineName ?? fp.machine, machineGone: !svc.store.find(fp.machine),
    createdAt: new Date(fp.createdAt).toISOString(), memoryMiB: fp.vm.memoryMiB, clones: store.clones(fp.id), sizes, vm: fp.vm,
  };
}

/** Saved points, oldest first. */
export function listPoints(svc: MachineService): PointView[] {
  return new ForkPointStore(svc.store.db).list().filter((fp) => fp.name !== null).map((fp) => pointView(svc, fp));
}

/**
 * Removes a saved point. While clones use it, refused with their names; with `force` its name goes at once
 * (no new clone can start from it) and its files go with its last clone.
 * Returns whether the files went now.
 */
export function removePoint(svc: MachineService, name: string, o: { force?: boolean } = {}): { freed: boolean; clones: string[] } {
  const { point, clones } = new ForkPointStore(svc.store.db).unname(name, !!o.force);
  if (!point) throw new NotFoundError(`no fork point named "${name}"`, { where: name, hint: 'List them with: smol snapshot ls' });
  if (clones.length && !o.force) {
    throw new ConflictError(`fork point "${name}" is in use by ${clones.length} clone${clones.length > 1 ? 's' : ''} (${clones.slice(0, 8).join(', ')}${clones.length > 8 ? ', …' : ''})`, {
      where: name, hint: `Remove the clones first (smol machine rm --force ${clones[0]}), or drop the name now and free the files with the last clone: smol snapshot rm --force ${name}`,
    });
  }
  const freed = releaseForkPoints(svc.store).some((fp) => fp.id === point.id);
  return { freed, clones };
}
