/** Bringing one clone to life from a fork point; on any failure the clone and its files are gone. */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { mapFsError } from '../../errors/index.js';
import { trace } from '../../util/trace.js';
import type { GuestChannel } from '../engine.js';
import { createOverlayFile } from '../qemu/img.js';
import type { MachineRecord } from '../store/machines.js';
import type { MachineService } from '../service.js';
import { dieAt } from './faults.js';
import { identifyAndRelease } from './guest.js';
import type { ForkOps, PrimedRestore } from './types.js';

export interface CloneOutcome {
  name: string;
  id: string;
  index: number;
  ok: boolean;
  pid: number | null;
  error?: string;
  /** ms from the parent's pause to this clone running (state loaded, vCPUs going). */
  runningMs?: number;
  /** ms from the parent's pause to the clone configured and its waiters released (its first exec done). */
  readyMs?: number;
  /** smol-fork-ready callers woken in the clone. */
  released?: number;
  /** Its QEMU was the parent's warm spare, started before this fork was asked for. */
  fromSpare?: boolean;
  /**
   * With `keepChannel`: the CONFIGURE connection, still open, and its port lock, for the caller's first
   * command (a rollout attempt): a second connection and HELLO cost ~50 ms in a fresh clone under TCG.
   */
  channel?: { ch: GuestChannel; release: () => void };
}

export interface CloneJob {
  rec: MachineRecord;
  index: number;
  env: Record<string, string>;
  /** The memory template the clone maps copy-on-write; it may still be filled in after the launch. */
  memFile: string;
  /** The parent's current overlay, frozen by the capture: the clone's backing file. */
  frozenDisk: string | null;
  /** The agent port the forking smol held in the parent: no guest session was inherited on it. */
  port: number;
  diskSize: number | null;
  restoreTimeoutMs: number;
  /**
   * A saved point's clones all get the same overlay (the same backing file and size; qcow2 has no per-file
   * id), so it is made once with qemu-img, kept here, and copied: ~200 KB, against a qemu-img start per clone
   * (70–200 ms of CPU on this host).
   */
  overlayTemplate?: string;
}

export async function createCloneDisk(frozen: string, overlay: string, size: number): Promise<void> {
  // -u: the frozen file is still open in the parent's QEMU, and its size is already known
  await createOverlayFile(frozen, overlay, { sizeBytes: size, unsafe: true });
}

/** The clone's overlay as a copy of `template`, which is made first if no clone has yet. */
export async function copyCloneDisk(frozen: string, template: string, overlay: string, size: number): Promise<void> {
  if (!fs.existsSync(template)) {
    const tmp = `${template}.${process.pid}.${crypto.randomBytes(4).toString('hex')}`;
    try {
      await createCloneDisk(frozen, tmp, size);
      fs.renameSync(tmp, template); // several makers at once: each rename puts the same bytes in place
    } finally {
      fs.rmSync(tmp, { force: true });
    }
  }
  try {
    fs.copyFileSync(template, overlay);
  } catch (err) {
    throw mapFsError(err, `creating overlay ${overlay}`);
  }
}

/**
 * Starts the clone's QEMU waiting for its state, before the parent pauses: QEMU's start-up (~50 ms under TCG)
 * and the overlay are then off the fork's critical path. Safe because QEMU with `-incoming defer` neither
 * touches guest RAM (the template may be rewritten under it until the state loads) nor activates its disks:
 * they are opened inactive, and activation re-reads the qcow2 metadata that the parent wrote meanwhile.
 */
export async function prelaunchClone(svc: MachineService, j: CloneJob): Promise<CloneOutcome> {
  const { rec } = j;
  const layout = svc.layout(rec);
  const out: CloneOutcome = { name: rec.name, id: rec.id, index: j.index, ok: false, pid: null };
  try {
    fs.mkdirSync(layout.dir, { recursive: true });
    fs.mkdirSync(layout.runDir, { recursive: true });
    if (j.frozenDisk && j.diskSize) {
      if (j.overlayTemplate) await copyCloneDisk(j.frozenDisk, j.overlayTemplate, layout.disk, j.diskSize);
      else await createCloneDisk(j.frozenDisk, layout.disk, j.diskSize);
    }
    // still 'creating' (with our pid as owner): a smol killed before the state loads leaves an orphan that the
    // next `smol machine ls` removes, QEMU included
    const pid = await svc.engine.launch(rec.spec, layout, { diskless: false, forkable: false, clone: { memFile: j.memFile }, publishPorts: false });
    out.pid = pid;
    svc.store.update(rec.id, { pid, startedAt: Date.now() });
    out.ok = true;
  } catch (err) {
    out.error = (err as Error).message;
  }
  return out;
}

/** Loads the fork state into a prelaunched clone, then gives it its identity and releases its waiters. */
export async function startClone(svc: MachineService, ops: ForkOps, j: CloneJob & { stateFile: string; pausedAt: number; keepChannel?: boolean; primed?: PrimedRestore }, pre: CloneOutcome): Promise<CloneOutcome> {
  const { rec } = j;
  const layout = svc.layout(rec);
  const out: CloneOutcome = { ...pre, ok: false };
  if (!pre.ok) return out;
  try {
    svc.store.update(rec.id, { state: 'starting' });
    injectFault(j.index, pre.pid!);
    const release = svc.store.lock(`${rec.id}#p${j.port}`, 'fork', rec.name);
    // Connected before the state loads, the port matches the saved one (the forking smol held it open), so the
    // guest sees no hang-up and no new host: our HELLO waits in the socket and is the first thing it reads.
    const connecting = svc.engine.connect(layout, j.port, j.restoreTimeoutMs);
    connecting.catch(() => undefined); // awaited below, unless the restore fails first
    let ch: GuestChannel | undefined;
    let kept = false;
    try {
      if (j.primed) await j.primed.restore(j.stateFile, j.restoreTimeoutMs);
      else await ops.restore(layout, j.stateFile, j.restoreTimeoutMs);
      dieAt(`after-restore:${j.index}`);
      out.runningMs = performance.now() - j.pausedAt;
      trace(`clone ${j.index}: state loaded`);
      ch = await connecting;
      // no VMGENID in the guest kernel: every clone starts with the parent's RNG state until reseeded here
      out.released = await identifyAndRelease(ch, { hostname: rec.name, machineId: crypto.randomBytes(16).toString('hex'), entropy: crypto.randomBytes(64), timeMs: Date.now() }, j.env);
      if (j.keepChannel) {
        out.channel = { ch, release };
        kept = true;
      }
    } finally {
      if (!kept) {
        if (ch) ch.close();
        else connecting.then((c) => c.close(), () => undefined);
        release();
      }
    }
    out.readyMs = performance.now() - j.pausedAt;
    trace(`clone ${j.index}: configured`);
    svc.store.update(rec.id, { state: 'running', booted: true, lastError: null, ownerPid: null });
    out.ok = true;
    return out;
  } catch (err) {
    if (out.channel) { out.channel.ch.close(); out.channel.release(); out.channel = undefined; }
    out.error = (err as Error).message;
    return out;
  }
}

/**
 * TEST ONLY: SMOL_FORK_FAULT=kill-clone:N kills clone N's QEMU before its state loads, so tests can watch a
 * clone fail for real (the restore sees QEMU gone) and check that the others and the parent are unaffected.
 */
function injectFault(index: number, pid: number): void {
  const m = /^kill-clone:(\d+)$/.exec(process.env.SMOL_FORK_FAULT ?? '');
  if (m && Number(m[1]) === index) {
    try { process.kill(pid, 'SIGKILL'); } catch { /* already gone */ }
  }
}
