/**
 * Saved fork points: `smol fork NAME --save POINT` freezes a machine once (memory template, device state and
 * disk), and `smol fork --from POINT` starts clones from it any number of times later without touching the
 * machine again. The point keeps everything its clones need in its own directory: the template copy, the
 * state, the spec and a disk layer of its own (the frozen layers folded into one file over the image base),
 * so the machine may go on changing, stop, or be removed.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ConflictError, ExitCode, ForkError, PrerequisiteError, UserError } from '../../errors/index.js';
import { mapFsError } from '../../errors/index.js';
import type { Progress } from '../engine.js';
import { rebase } from '../qemu/img.js';
import { ForkPointStore, type ForkPointRecord } from '../store/fork-points.js';
import { newMachineId, validateName } from '../store/machines.js';
import type { MachineService } from '../service.js';
import { diskUsage } from '../usage.js';
import { claimForkDir } from './abandoned.js';
import { capChain, type MergeResult } from './chain.js';
import { forkDir, forkMemFile, forkOwnerFile, removeUnrecordedFork } from './cleanup.js';
import { createCloneDisk } from './clone.js';
import { dieAt } from './faults.js';
import { openFreePort } from './fork.js';
import { identifyAndRelease } from './guest.js';
import { assertCompatible } from './identity.js';
import { parentEnv } from './plan.js';
import { discardSpare, hasSpare, startSpare } from './spare.js';

export interface SaveResult {
  point: string;
  id: string;
  machine: string;
  pausedMs: number;
  stateBytes: number;
  /** The machine's disk chain after the save (files, top overlay and image base included). */
  chainDepth: number;
  /** Set when the save merged layers to keep the chain within its cap. */
  merged: MergeResult | null;
  totalMs: number;
}

/** Point names follow machine names' rules; they share no namespace with machines. */
export function validatePointName(name: string): void {
  try {
    validateName(name);
  } catch {
    throw new UserError(`invalid fork point name "${name}"`, { where: name, hint: 'Use 1–63 letters, digits, ".", "_" or "-", starting with a letter or digit.' });
  }
}

export async function saveForkPoint(svc: MachineService, nameOrId: string, pointName: string, o: { onProgress?: Progress } = {}): Promise<SaveResult> {
  const t0 = performance.now();
  const ops = svc.engine.fork;
  if (!ops) throw new PrerequisiteError('saving a fork point failed: this VM backend cannot fork machines');
  validatePointName(pointName);
  const points = new ForkPointStore(svc.store.db);
  if (points.byName(pointName)) throw new ConflictError(`a fork point named "${pointName}" already exists`, { where: pointName, hint: `Start clones from it (smol fork --from ${pointName}), or remove it first: smol snapshot rm ${pointName}` });
  const m = svc.refresh(svc.store.get(nameOrId));
  if (m.state !== 'running') {
    throw new ForkError(`saving fork point "${pointName}" failed: machine "${m.name}" is not running (state: ${m.state})`, { where: m.name, hint: `Start it forkable first: smol machine start ${m.name} --forkable` }, ExitCode.conflict);
  }
  const unlock = svc.store.lock(m.id, 'fork', m.name);
  const id = newMachineId();
  const layout = svc.layout(m);
  const nextDisk = path.join(layout.dir, `disk-${id}.qcow2`);
  let recorded: ForkPointRecord | undefined;
  let moved = false;
  let parentCh: Awaited<ReturnType<typeof openFreePort>> | undefined;
  try {
    const insp = await ops.inspect(layout);
    if (insp.memory === 'none') throw new ForkError(`saving fork point "${pointName}" failed: machine "${m.name}" was not started forkable`, { where: m.name, hint: `Restart it forkable: smol machine stop ${m.name} && smol machine start ${m.name} --forkable` }, ExitCode.conflict);
    if (!insp.running) throw new ForkError(`saving fork point "${pointName}" failed: machine "${m.name}" is paused (held by a fork --hold)`, { where: m.name }, ExitCode.conflict);
    if (!insp.diskFile || !insp.diskSize) throw new ForkError(`saving fork point "${pointName}" failed: machine "${m.name}" has no root disk`, { where: m.name });
    assertCompatible(insp.vm, await ops.identity(insp.vm.memoryMiB), `saving fork point "${pointName}"`);
    const shared = insp.memory === 'shared';
    // the spare waits on the layer this save freezes: a plain fork could not use it afterwards
    const hadSpare = hasSpare(svc, m);
    await discardSpare(svc, m);
    // recorded before any file exists: a save killed half-way is swept up by the next `machine ls`
    const dir = claimForkDir(svc.home, id, { parent: m.id, spare: null });
    const memFile = forkMemFile(id);
    fs.writeFileSync(memFile, '');
    fs.truncateSync(memFile, insp.vm.memoryMiB * 2 ** 20);
    await createCloneDisk(layout.disk, nextDisk, insp.diskSize);
    parentCh = await openFreePort(svc, m);
    dieAt('before-pause');
    o.onProgress?.(`saving ${m.name} as ${pointName}`);
    const cap = await ops.capture(layout, {
      stateFile: path.join(dir, 'state'), nextDisk, memCopy: shared ? memFile : null, hold: false,
      onDiskMoved: () => { moved = true; svc.store.update(m.id, { diskFile: path.basename(nextDisk) }); },
    });
    // smol-fork-ready waiters in the machine go on as the parent
    await identifyAndRelease(parentCh.ch, null, parentEnv(m.name, id, 0)).catch(() => 0);
    o.onProgress?.('writing the point\'s disk layer');
    const disk = path.join(dir, 'disk.qcow2');
    await ownLayer(cap.frozenDisk ?? insp.diskFile, layout.dir, disk, insp.diskSize);
    recorded = points.insert({
      id, machine: m.id, frozenDisk: disk, memFile, memOwned: true, stateFile: path.join(dir, 'state'), vm: insp.vm, name: pointName,
      source: { machineName: m.name, spec: m.spec, imageId: m.imageId, port: parentCh.port, diskSize: insp.diskSize },
    }, []);
    fs.rmSync(forkOwnerFile(svc.home, id), { force: true });
    const merged = await capChain(svc.store, ops, svc.layout(svc.store.get(m.id)));
    if (hadSpare && shared) await startSpare(svc, svc.store.get(m.id), nextDisk, insp.diskSize);
    return {
      point: pointName, id, machine: m.name, pausedMs: cap.pausedMs, stateBytes: cap.stateBytes,
      chainDepth: diskUsage(svc.layout(svc.store.get(m.id)).disk)?.chain.length ?? 0, merged, totalMs: performance.now() - t0,
    };
  } catch (err) {
    if (!recorded) {
      if (!moved) fs.rmSync(nextDisk, { force: true });
      removeUnrecordedFork(svc.home, id);
    }
    if (/UNIQUE constraint/.test((err as Error).message)) throw new ConflictError(`a fork point named "${pointName}" already exists`, { where: pointName });
    throw err;
  } finally {
    parentCh?.ch.close();
    parentCh?.release();
    unlock();
  }
}

/**
 * The point's own disk layer: an overlay on the frozen layer, rebased (a safe rebase copies every cluster
 * that differs) onto the first file of the chain outside the machine's directory, the shared image base.
 * The machine's layers can then be merged or removed without the point noticing.
 */
async function ownLayer(frozen: string, machineDir: string, out: string, size: number): Promise<void> {
  const chain = diskUsage(frozen)?.chain ?? [frozen];
  const base = chain.find((f) => path.dirname(path.resolve(f)) !== path.resolve(machineDir)) ?? null;
  try {
    await createCloneDisk(frozen, out, size);
    await rebase(out, base);
  } catch (err) {
    fs.rmSync(out, { force: true });
    throw mapFsError(err, `writing the fork point's disk layer ${out}`);
  }
}

/** The directory a point's files live in (state, disk layer). */
export function pointDir(home: string, id: string): string {
  return forkDir(home, id);
}
