/**
 * Clones from a saved fork point (`smol fork --from POINT`): each one is a QEMU on an overlay over the point's
 * disk layer, mapping its template copy-on-write and loading its device state. The machine the point was
 * saved from is not involved at all: not paused, not locked, and it need not exist any more.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { ForkError, NotFoundError, PrerequisiteError } from '../../errors/index.js';
import type { Progress } from '../engine.js';
import { ForkPointStore, type ForkPointRecord } from '../store/fork-points.js';
import { newMachineId } from '../store/machines.js';
import type { MachineService } from '../service.js';
import { prelaunchClone, startClone, type CloneJob, type CloneOutcome } from './clone.js';
import { assertCompatible } from './identity.js';
import { cloneEnv, cloneNames } from './plan.js';
import type { PrimedRestore } from './types.js';
import { RESTORE_TIMEOUT_MS } from '../limits.js';

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
  /** The clones' labels (docs/labels.md). */
  labels?: Record<string, string>;
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

/** A clone whose QEMU is up and waiting for the point's state: what a caller keeps ready for its next job. */
export interface PreparedClone {
  point: string;
  name: string;
  id: string;
  job: CloneJob;
  pre: CloneOutcome;
  stateFile: string;
  /** Its QEMU's control connection, set up for the state (startPrepared uses it; close() if unused). */
  primed?: PrimedRestore;
}

/**
 * Registers one clone of the point and starts its QEMU (overlay, `-incoming defer`, template mapped): the
 * part of a clone start that needs nothing from the moment it is wanted. The row stays 'creating' and this
 * process's until startPrepared, so a kill -9 leaves it to the next `machine ls`. Throws on failure, leaving
 * nothing behind.
 */
export async function prepareClone(svc: MachineService, pointName: string, name: string, o: { env?: Record<string, string>; index?: number; count?: number; restoreTimeoutMs?: number; labels?: Record<string, string> } = {}): Promise<PreparedClone> {
  const ops = svc.engine.fork;
  if (!ops) throw new PrerequisiteError('fork failed: this VM backend cannot fork machines');
  const fp = getPoint(svc, pointName);
  assertCompatible(fp.vm, await ops.identity(fp.vm.memoryMiB), `fork from "${pointName}"`);
  // QEMU would create a missing template afresh, and the clone would start on zeroed RAM and crash
  if (!fs.existsSync(fp.memFile)) {
    throw new ForkError(`fork from "${pointName}" failed: its memory template ${fp.memFile} is gone (removed from /dev/shm, or the host rebooted)`, {
      where: pointName, hint: `Save the point again: smol snapshot rm --force ${pointName} && smol fork MACHINE --save ${pointName}`,
    });
  }
  const [id] = cloneEnv({ parent: fp.source.machineName, forkId: fp.id, names: [name], user: o.env ?? {} });
  if (o.index) { id.index = o.index; id.env.SMOL_CLONE_INDEX = String(o.index); }
  if (o.count) id.env.SMOL_CLONE_COUNT = String(o.count);
  // parent null: the point, not the machine, is what a clone depends on (the machine may be removed)
  const rec = svc.store.insert({
    id: newMachineId(), name, state: 'creating', ephemeral: false, imageId: fp.source.imageId, ownerPid: process.pid,
    spec: { ...fp.source.spec, env: { ...fp.source.spec.env, ...id.env } }, parent: null, generation: 1, forkPoint: fp.id, labels: o.labels ?? {},
  });
  const job: CloneJob = {
    rec, index: id.index, env: id.env, memFile: fp.memFile, frozenDisk: fp.frozenDisk, port: fp.source.port,
    diskSize: fp.source.diskSize, restoreTimeoutMs: o.restoreTimeoutMs ?? RESTORE_TIMEOUT_MS,
    overlayTemplate: path.join(path.dirname(fp.stateFile), 'clone-overlay.qcow2'),
  };
  try {
    // inserted with the point named: a `snapshot rm` from now on sees this clone and refuses
    if (!new ForkPointStore(svc.store.db).byName(pointName)) throw new NotFoundError(`fork point "${pointName}" was removed meanwhile`, { where: pointName });
    const pre = await prelaunchClone(svc, job);
    if (!pre.ok) throw new ForkError(`fork from "${pointName}" failed: ${pre.error ?? 'its QEMU did not start'}`, { where: pointName });
    const primed = await ops.primeRestore?.(svc.layout(rec), job.restoreTimeoutMs);
    return { point: pointName, name, id: rec.id, job, pre, stateFile: fp.stateFile, primed };
  } catch (err) {
    await svc.remove(rec.id, { force: true }).catch(() => undefined);
    throw err;
  }
}

/**
 * Loads the point's state into a prepared clone and configures it (identity, entropy, clock, environment).
 * `owned`: the clone stays this process's (`machine ls` removes it once the process is gone), for clones
 * that live as long as one job, such as a rollout attempt. `keepChannel`: the outcome carries the open
 * CONFIGURE connection for the job's first command (the caller closes it and calls its release). A failed
 * clone is removed.
 */
export async function startPrepared(svc: MachineService, p: PreparedClone, o: { owned?: boolean; keepChannel?: boolean } = {}): Promise<CloneOutcome> {
  const unlock = svc.store.lock(p.id, 'fork', p.name);
  try {
    const out = await startClone(svc, svc.engine.fork!, { ...p.job, stateFile: p.stateFile, pausedAt: performance.now(), keepChannel: o.keepChannel, primed: p.primed }, p.pre);
    if (out.ok && o.owned) svc.store.update(p.id, { ownerPid: process.pid });
    if (!out.ok) {
      unlock();
      await svc.remove(p.id, { force: true }).catch(() => undefined);
    }
    return out;
  } finally {
    p.primed?.close();
    unlock();
  }
}

export async function forkFromPoint(svc: MachineService, pointName: string, o: FromPointOptions = {}): Promise<FromPointResult> {
  const t0 = performance.now();
  getPoint(svc, pointName);
  const names = o.names ?? cloneNames(pointName, o.count ?? 1, new Set(svc.store.list().map((r) => r.name)), o.namePrefix);
  o.onProgress?.(`starting ${names.length} clone${names.length > 1 ? 's' : ''} from ${pointName}`);
  const prepared = await Promise.allSettled(names.map((n, i) => prepareClone(svc, pointName, n, { env: o.env, index: i + 1, count: names.length, restoreTimeoutMs: o.restoreTimeoutMs, labels: o.labels })));
  const clones = await Promise.all(prepared.map(async (r, i): Promise<CloneOutcome> => {
    if (r.status === 'rejected') return { name: names[i], id: '', index: i + 1, ok: false, pid: null, error: (r.reason as Error).message };
    const t = performance.now();
    const out = await startPrepared(svc, r.value, { owned: o.owned });
    // from the call: the clone's QEMU start is part of a point's clone start (no pause to measure from)
    const shift = t - t0;
    return { ...out, runningMs: out.runningMs === undefined ? undefined : out.runningMs + shift, readyMs: out.readyMs === undefined ? undefined : out.readyMs + shift };
  }));
  if (!clones.some((c) => c.ok)) {
    throw new ForkError(`fork from "${pointName}" failed: no clone started (${clones[0]?.error ?? 'unknown error'})`, { where: pointName });
  }
  return { point: pointName, clones, totalMs: performance.now() - t0 };
}

/** A clone name no machine has: PREFIX + 8 random hex digits. */
export function uniqueCloneName(prefix: string): string {
  return `${prefix}${crypto.randomBytes(4).toString('hex')}`;
}
