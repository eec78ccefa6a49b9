/**
 * `smol fork`: clone a running machine from one pause. The parent is paused only for stop → disk snapshot →
 * device-state save → template copy → cont; everything else (names, overlays, clone QEMUs) happens outside it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { ExitCode, ForkError, PrerequisiteError } from '../../errors/index.js';
import type { GuestChannel, Progress } from '../engine.js';
import { AGENT_PORTS } from '../layout.js';
import { ForkPointStore, type ForkPointRecord } from '../store/fork-points.js';
import { newMachineId, type MachineRecord } from '../store/machines.js';
import { refuseSecretRam } from '../secrets.js';
import { trace } from '../../util/trace.js';
import type { MachineService } from '../service.js';
import { claimForkDir } from './abandoned.js';
import { capChain } from './chain.js';
import { forkDir, forkMemFile, forkOwnerFile, removeUnrecordedFork } from './cleanup.js';
import { dieAt } from './faults.js';
import { createCloneDisk, prelaunchClone, startClone, type CloneJob, type CloneOutcome } from './clone.js';
import { identifyAndRelease, waitForReady } from './guest.js';
import { assertCompatible } from './identity.js';
import { cloneEnv, cloneNames, parentEnv } from './plan.js';
import { discardSpare, discardTakenSpare, startSpare, takeSpare, type Spare } from './spare.js';
import type { CaptureRequest, PreparedCapture, PrimedRestore } from './types.js';
import { AGENT_HELLO_TIMEOUT_MS, CHANNEL_WAIT_MS, FORK_READY_TIMEOUT_MS, RESTORE_TIMEOUT_MS } from '../limits.js';

export interface ForkOptions {
  count?: number;
  namePrefix?: string;
  /** Per-clone environment; `{index}`, `{name}`, `{count}` expand in values. */
  env?: Record<string, string>;
  /** Wait until a workload in the parent runs smol-fork-ready before pausing it. */
  waitReady?: boolean;
  readyTimeoutMs?: number;
  /** Leave the parent paused (its memory file then serves as the template, no copy). */
  hold?: boolean;
  restoreTimeoutMs?: number;
  onProgress?: Progress;
  /** Over the parent's labels, which clones inherit. */
  labels?: Record<string, string>;
}

export interface ForkResult {
  forkId: string;
  parent: string;
  held: boolean;
  /** ms from the call to the parent's pause (inspection, overlays, clone VMMs started). */
  prePauseMs: number;
  pausedMs: number;
  stateBytes: number;
  /** 'shared': device state only, clones share the template; 'private': the state carries the RAM (forking a clone). */
  memory: 'shared' | 'private';
  steps: Record<string, number>;
  parentReleased: number;
  /** ms spent after the clones were ready starting the parent's spare for its next fork (null: none started). */
  nextSpareMs: number | null;
  clones: CloneOutcome[];
  totalMs: number;
}

export async function forkMachine(svc: MachineService, nameOrId: string, o: ForkOptions = {}): Promise<ForkResult> {
  const t0 = performance.now();
  const ops = svc.engine.fork;
  if (!ops) throw new PrerequisiteError('fork failed: this VM backend cannot fork machines');
  const parent = svc.refresh(svc.store.get(nameOrId));
  if (parent.state !== 'running') {
    throw new ForkError(`fork failed: machine "${parent.name}" is not running (state: ${parent.state})`, { where: parent.name, hint: `Start it forkable first: smol machine start ${parent.name} --forkable` }, ExitCode.conflict);
  }
  refuseSecretRam(parent, 'fork');
  const names = cloneNames(parent.name, o.count ?? 1, new Set(svc.store.list().map((r) => r.name)), o.namePrefix);
  const unlock = svc.store.lock(parent.id, 'fork', parent.name);
  const clones: { rec: MachineRecord; unlock: () => void }[] = [];
  let parentCh: { ch: GuestChannel; port: number; release: () => void } | undefined;
  let fp: ForkPointRecord | undefined;
  let forkId = newMachineId();
  let nextDisk = '';
  let spare: Spare | null = null;
  let primed: (PrimedRestore | undefined)[] = [];
  let preparing: Promise<PreparedCapture> | undefined;
  let taken = false;
  let moved = false;
  try {
    const layout = svc.layout(parent);
    const insp = await ops.inspect(layout);
    if (insp.memory === 'none') {
      throw new ForkError(`fork failed: machine "${parent.name}" was not started forkable`, { where: parent.name, hint: `Restart it so its memory can be shared: smol machine stop ${parent.name} && smol machine start ${parent.name} --forkable (or set fork: {enabled: true} in its Smolfile)` }, ExitCode.conflict);
    }
    if (!insp.running) {
      throw new ForkError(`fork failed: machine "${parent.name}" is paused (held by an earlier fork --hold)`, { where: parent.name, hint: `Fork its clones instead, or restart it: smol machine stop ${parent.name} && smol machine start ${parent.name} --forkable` }, ExitCode.conflict);
    }
    if (!insp.diskDevice || !insp.diskSize) throw new ForkError(`fork failed: machine "${parent.name}" has no root disk (diskless machines cannot be forked)`, { where: parent.name });
    assertCompatible(insp.vm, await ops.identity(insp.vm.memoryMiB), `fork of "${parent.name}"`);
    // a held parent's clones map its own memory file, which no spare maps; a clone parent has no spares
    const shared = insp.memory === 'shared';
    // recorded before any of the fork's files exist, so a fork killed half-way is swept up by the next ls
    const claim = (id: string, spareId: string | null) => claimForkDir(svc.home, id, { parent: parent.id, spare: spareId });
    if (shared && !o.hold) spare = await takeSpare(svc, parent, insp.diskFile, (s) => claim(s.forkId, s.id));
    else await discardSpare(svc, parent);
    if (spare) forkId = spare.forkId;
    else claim(forkId, null);
    // named now, so a failure from here on removes it (the spare made it already)
    nextDisk = path.join(layout.dir, `disk-${forkId}.qcow2`);
    const ids = cloneEnv({ parent: parent.name, forkId, names, user: o.env ?? {} });
    for (const c of ids) {
      const rec = svc.store.insert({
        id: spare && c === ids[0] ? spare.id : newMachineId(), name: c.name, state: 'creating', ephemeral: false, imageId: parent.imageId, ownerPid: process.pid,
        spec: { ...parent.spec, env: { ...parent.spec.env, ...c.env } }, parent: parent.id, generation: parent.generation + 1,
        labels: { ...parent.labels, ...o.labels },
      });
      clones.push({ rec, unlock: svc.store.lock(rec.id, 'fork', rec.name) });
    }
    parentCh = await openFreePort(svc, parent);
    if (o.waitReady) {
      o.onProgress?.('waiting for smol-fork-ready in the parent');
      await waitForReady(parentCh.ch, o.readyTimeoutMs ?? FORK_READY_TIMEOUT_MS);
    }
    const dir = forkDir(svc.home, forkId);
    // a clone's RAM is private, so its state carries the RAM and clones start from an empty (sparse) template
    const memFile = shared && o.hold ? layout.memFile : forkMemFile(forkId);
    // the clones map it from their launch on; a copy of the parent's RAM replaces its (unread) holes in the pause
    if (memFile !== layout.memFile) {
      fs.writeFileSync(memFile, '');
      fs.truncateSync(memFile, insp.vm.memoryMiB * 2 ** 20);
    }
    const { ch: pch, port } = parentCh;
    const jobs: CloneJob[] = clones.map((c, i) => ({
      rec: c.rec, index: ids[i].index, env: ids[i].env, memFile, frozenDisk: insp.diskFile, port, diskSize: insp.diskSize, restoreTimeoutMs: o.restoreTimeoutMs ?? RESTORE_TIMEOUT_MS,
    }));
    const adopt = async (j: CloneJob, pid: number): Promise<CloneOutcome> => {
      svc.store.update(j.rec.id, { pid, startedAt: Date.now() });
      return { name: j.rec.name, id: j.rec.id, index: j.index, ok: true, pid, fromSpare: true };
    };
    const fresh = jobs.length - (spare?.pid ? 1 : 0);
    if (fresh) o.onProgress?.(`starting ${fresh} clone VMM${fresh > 1 ? 's' : ''}${spare?.pid ? ' (one more was waiting)' : ''}`);
    const launches = jobs.map((j, i) => (i === 0 && spare?.pid ? adopt(j, spare.pid) : prelaunchClone(svc, j)));
    // the spare made the parent's next overlay too, on the same layer (checked when it was taken)
    const nextReady = !!spare && fs.existsSync(nextDisk);
    const nextMade = nextReady ? undefined : createCloneDisk(layout.disk, nextDisk, insp.diskSize);
    const req: CaptureRequest = {
      stateFile: path.join(dir, 'state'), nextDisk, memCopy: shared && !o.hold ? memFile : null, hold: !!o.hold,
      onDiskMoved: () => { moved = true; svc.store.update(parent.id, { diskFile: path.basename(nextDisk) }); },
    };
    // what the capture needs besides the pause (its copier, control connection, state socket) is set up meanwhile
    preparing = ops.prepareCapture?.(layout, req);
    preparing?.catch(() => undefined); // its own failure closes what it made; Promise.all reports it
    const [pre, , prepared] = await Promise.all([Promise.all(launches), nextMade, preparing]);
    if (!pre.some((c) => c.ok)) {
      throw new ForkError(`fork of "${parent.name}" failed: no clone could be started (${pre[0]?.error ?? 'unknown error'}); the parent was not paused`, { where: parent.name });
    }
    // each waiting clone's QMP connection set up now, not after the pause (a clone that fails it restores unprimed
    // and reports the failure there)
    primed = await Promise.all(jobs.map((j, i) => (pre[i].ok ? ops.primeRestore?.(svc.layout(j.rec), j.restoreTimeoutMs).catch(() => undefined) : undefined)));
    dieAt('before-pause');
    o.onProgress?.(`forking ${parent.name}`);
    const pausedAt = performance.now();
    trace('fork: pausing the parent');
    taken = true; // take() releases what was prepared, whatever it ends in
    const cap = await (prepared ? prepared.take() : ops.capture(layout, req)).catch((err: unknown) => {
      if (!moved) fs.rmSync(nextDisk, { force: true });
      throw err;
    });
    trace('fork: parent resumed');
    if (cap.frozenDisk !== insp.diskFile) {
      // cannot happen under the fork lock; the clones would sit on the wrong backing file
      throw new ForkError(`fork of "${parent.name}" failed: its disk changed from ${insp.diskFile} to ${cap.frozenDisk} during the fork`, { where: parent.name });
    }
    fp = new ForkPointStore(svc.store.db).insert({
      id: forkId, machine: parent.id, frozenDisk: cap.frozenDisk, memFile, memOwned: memFile !== layout.memFile, stateFile: path.join(dir, 'state'), vm: insp.vm,
    }, clones.map((c) => c.rec.id));
    fs.rmSync(forkOwnerFile(svc.home, forkId), { force: true }); // recorded: no longer the sweep's
    const parentRelease = o.hold ? Promise.resolve(0) : identifyAndRelease(pch, null, parentEnv(parent.name, forkId, names.length)).catch(() => 0);
    const outcomes = await Promise.all(jobs.map((j, i) => startClone(svc, ops, { ...j, stateFile: fp!.stateFile, pausedAt, primed: primed[i] }, pre[i])));
    trace('fork: clones ready');
    const parentReleased = await parentRelease;
    await discardFailed(svc, clones, outcomes);
    if (!outcomes.some((c) => c.ok)) {
      throw new ForkError(`fork of "${parent.name}" failed: no clone started (${outcomes[0]?.error ?? 'unknown error'})`, { where: parent.name });
    }
    let nextSpareMs: number | null = null;
    if (shared && !o.hold) {
      const t = performance.now();
      await startSpare(svc, parent, nextDisk, insp.diskSize);
      nextSpareMs = performance.now() - t;
    }
    // layers earlier forks froze whose clones are all gone merge here (the clones just made sit on this one)
    if (!o.hold) await capChain(svc.store, ops, svc.layout(svc.store.get(parent.id))).catch(() => null);
    return {
      nextSpareMs, forkId, parent: parent.name, held: !!o.hold, prePauseMs: pausedAt - t0, pausedMs: cap.pausedMs, stateBytes: cap.stateBytes, memory: shared ? 'shared' : 'private',
      steps: cap.steps, parentReleased, clones: outcomes, totalMs: performance.now() - t0,
    };
  } catch (err) {
    await discardFailed(svc, clones, clones.map(() => ({ ok: false })));
    // a spare taken before its clone's row existed is nobody's now
    const taken = spare;
    if (taken && !clones.some((c) => c.rec.id === taken.id)) await discardTakenSpare(svc, taken).catch(() => undefined);
    // an overlay made ahead (by the spare, or before a failure) that the parent never moved onto
    if (nextDisk && svc.store.find(parent.id)?.diskFile !== path.basename(nextDisk)) fs.rmSync(nextDisk, { force: true });
    if (!fp) removeUnrecordedFork(svc.home, forkId);
    throw err;
  } finally {
    for (const p of primed) p?.close(); // a restore closes its own; these are the ones that never ran
    if (!taken) await preparing?.then((p) => p.close(), () => undefined);
    parentCh?.ch.close();
    parentCh?.release();
    for (const c of clones) c.unlock();
    unlock();
  }
}

/** Removes the clones that did not come up, with their files; a fork point left without clones goes with them. */
async function discardFailed(svc: MachineService, clones: { rec: MachineRecord; unlock: () => void }[], outcomes: { ok: boolean }[]): Promise<void> {
  for (const [i, c] of clones.entries()) {
    if (outcomes[i].ok || !svc.store.find(c.rec.id)) continue;
    c.unlock();
    await svc.remove(c.rec.id, { force: true }).catch(() => undefined);
  }
}

/**
 * A channel on a port no host session uses. The clones inherit the guest agents' state, and reconnecting a
 * port aborts the sessions it had, so the clones are configured on this same port, never on a user's.
 */
export async function openFreePort(svc: MachineService, rec: MachineRecord): Promise<{ ch: GuestChannel; port: number; release: () => void }> {
  const layout = svc.layout(rec);
  const deadline = Date.now() + CHANNEL_WAIT_MS;
  for (;;) {
    for (let port = AGENT_PORTS - 1; port >= 0; port--) {
      let release: () => void;
      try {
        release = svc.store.lock(`${rec.id}#p${port}`, 'fork', rec.name);
      } catch {
        continue;
      }
      try {
        return { ch: await svc.engine.connect(layout, port, AGENT_HELLO_TIMEOUT_MS), port, release };
      } catch (err) {
        release();
        throw err;
      }
    }
    if (Date.now() > deadline) throw new ForkError(`fork failed: every agent port of "${rec.name}" is busy`, { hint: 'Wait for running commands to finish.' }, ExitCode.conflict);
    await new Promise((r) => setTimeout(r, 100));
  }
}
