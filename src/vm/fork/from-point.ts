/**
 * Clones from a saved fork point (`smol fork --from POINT`): each one is a QEMU on an overlay over the point's
 * disk layer, mapping its template copy-on-write and loading its device state. The machine the point was
 * saved from is not involved at all: not paused, not locked, and it need not exist any more.
 */
import crypto from 'node:crypto';
import { ForkError, NotFoundError, PrerequisiteError } from '../../errors/index.js';
import type { Progress } from '../engine.js';
import { ForkPointStore, type ForkPointRecord } from '../registry/fork-points.js';
import { newMachineId, type MachineRecord } from '../registry/machines.js';
import type { MachineService } from '../service.js';
import { prelaunchClone, startClone, type CloneJob, type CloneOutcome } from './clone.js';
import { assertCompatible } from './identity.js';
import { cloneEnv, cloneNames } from './plan.js';

export interface FromPointOptions {
  count?: number;
  namePrefix?: string;
  /** Exact clone names (instead of PREFIX1…); a program making one clone per attempt names them itself. */
  names?: string[];
  env?: Record<string, string>;
  restoreTimeoutMs?: number;
  /**
   * The clones stay this process's: `machine ls` removes them (QEMU included) once it is gone. For clones
   * that live as long as one job (a rollout attempt), so a kill -9 of the job's process leaks nothing.
   */
  owned?: boolean;
  onProgress?: Progress;
}

export interface FromPointResult {
  point: string;
  clones: CloneOutcome[];
  totalMs: number;
}

export function getPoint(svc: MachineService, name: string): ForkPointRecord & { source: NonNullable<ForkPointRecord['source']> } {
  const fp = new ForkPointStore(svc.store.db).byName(name);
  if (!fp?.source) throw new NotFoundError(`no fork point named "${name}"`, { where: name, hint: 'List them with: smol snapshot ls (save one with: smol fork MACHINE --save NAME)' });
  return fp as ForkPointRecord & { source: NonNullable<ForkPointRecord['source']> };
}

export async function forkFromPoint(svc: MachineService, pointName: string, o: FromPointOptions = {}): Promise<FromPointResult> {
  const t0 = performance.now();
  const ops = svc.engine.fork;
  if (!ops) throw new PrerequisiteError('fork failed: this VM backend cannot fork machines');
  const fp = getPoint(svc, pointName);
  assertCompatible(fp.vm, await ops.identity(fp.vm.memoryMiB), `fork from "${pointName}"`);
  const names = o.names ?? cloneNames(pointName, o.count ?? 1, new Set(svc.store.list().map((r) => r.name)), o.namePrefix);
  const ids = cloneEnv({ parent: fp.source.machineName, forkId: fp.id, names, user: o.env ?? {} });
  const clones: { rec: MachineRecord; unlock: () => void }[] = [];
  try {
    for (const c of ids) {
      // parent null: the point, not the machine, is what a clone depends on (the machine may be removed)
      const rec = svc.store.insert({
        id: newMachineId(), name: c.name, state: 'creating', ephemeral: false, imageId: fp.source.imageId, ownerPid: process.pid,
        spec: { ...fp.source.spec, env: { ...fp.source.spec.env, ...c.env } }, parent: null, generation: 1, forkPoint: fp.id,
      });
      clones.push({ rec, unlock: svc.store.lock(rec.id, 'fork', rec.name) });
    }
    // inserted with the point named: a `snapshot rm` from now on sees these clones and refuses
    if (!new ForkPointStore(svc.store.db).byName(pointName)) throw new NotFoundError(`fork point "${pointName}" was removed meanwhile`, { where: pointName });
    const jobs: CloneJob[] = clones.map((c, i) => ({
      rec: c.rec, index: ids[i].index, env: ids[i].env, memFile: fp.memFile, frozenDisk: fp.frozenDisk, port: fp.source.port,
      diskSize: fp.source.diskSize, restoreTimeoutMs: o.restoreTimeoutMs ?? 30_000,
    }));
    o.onProgress?.(`starting ${jobs.length} clone${jobs.length > 1 ? 's' : ''} from ${pointName}`);
    const startedAt = performance.now();
    const outcomes = await Promise.all(jobs.map(async (j) => {
      const pre = await prelaunchClone(svc, j);
      const out = await startClone(svc, ops, { ...j, stateFile: fp.stateFile, pausedAt: startedAt }, pre);
      if (out.ok && o.owned) svc.store.update(j.rec.id, { ownerPid: process.pid });
      return out;
    }));
    for (const [i, c] of clones.entries()) {
      if (outcomes[i].ok) continue;
      c.unlock();
      await svc.remove(c.rec.id, { force: true }).catch(() => undefined);
    }
    if (!outcomes.some((c) => c.ok)) {
      throw new ForkError(`fork from "${pointName}" failed: no clone started (${outcomes[0]?.error ?? 'unknown error'})`, { where: pointName });
    }
    return { point: pointName, clones: outcomes, totalMs: performance.now() - t0 };
  } catch (err) {
    for (const c of clones) {
      c.unlock();
      if (svc.store.find(c.rec.id)) await svc.remove(c.rec.id, { force: true }).catch(() => undefined);
    }
    throw err;
  } finally {
    for (const c of clones) c.unlock();
  }
}

/** A clone name no machine has: PREFIX + 8 random hex digits. */
export function uniqueCloneName(prefix: string): string {
  return `${prefix}${crypto.randomBytes(4).toString('hex')}`;
}
