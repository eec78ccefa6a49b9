/** Bringing one clone to life from a fork point; on any failure the clone and its files are gone. */
import crypto from 'node:crypto';
import fs from 'node:fs';
import { run } from '../../util/exec.js';
import { mapFsError } from '../../errors/index.js';
import type { GuestChannel } from '../engine.js';
import type { ForkPointRecord } from '../registry/fork-points.js';
import type { MachineRecord } from '../registry/machines.js';
import type { MachineService } from '../service.js';
import { identifyAndRelease } from './guest.js';
import type { ForkOps } from './types.js';

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
}

export interface CloneJob {
  rec: MachineRecord;
  index: number;
  env: Record<string, string>;
  fp: ForkPointRecord;
  /** The agent port the forking smol held in the parent: no guest session was inherited on it. */
  port: number;
  diskSize: number | null;
  pausedAt: number;
  restoreTimeoutMs: number;
}

export async function createCloneDisk(frozen: string, overlay: string, size: number): Promise<void> {
  // -u: the frozen file is still open in the parent's QEMU, and its size is already known
  await run('qemu-img', ['create', '-q', '-f', 'qcow2', '-u', '-b', frozen, '-F', 'qcow2', overlay, String(size)])
    .catch((e) => { throw mapFsError(e, `creating overlay ${overlay}`); });
}

export async function launchClone(svc: MachineService, ops: ForkOps, j: CloneJob): Promise<CloneOutcome> {
  const { rec } = j;
  const layout = svc.layout(rec);
  const out: CloneOutcome = { name: rec.name, id: rec.id, index: j.index, ok: false, pid: null };
  try {
    fs.mkdirSync(layout.dir, { recursive: true });
    fs.mkdirSync(layout.runDir, { recursive: true });
    if (j.fp.frozenDisk && j.diskSize) await createCloneDisk(j.fp.frozenDisk, layout.disk, j.diskSize);
    svc.store.update(rec.id, { state: 'starting' });
    const pid = await svc.engine.launch(rec.spec, layout, { diskless: false, forkable: false, clone: { memFile: j.fp.memFile } });
    out.pid = pid;
    svc.store.update(rec.id, { pid, startedAt: Date.now() });
    injectFault(j.index, pid);
    await ops.restore(layout, j.fp.stateFile, j.restoreTimeoutMs);
    out.runningMs = performance.now() - j.pausedAt;
    const release = svc.store.lock(`${rec.id}#p${j.port}`, 'fork', rec.name);
    let ch: GuestChannel | undefined;
    try {
      ch = await svc.engine.connect(layout, j.port, j.restoreTimeoutMs);
      // no VMGENID in the guest kernel: every clone starts with the parent's RNG state until reseeded here
      out.released = await identifyAndRelease(ch, { hostname: rec.name, machineId: crypto.randomBytes(16).toString('hex'), entropy: crypto.randomBytes(64), timeMs: Date.now() }, j.env);
    } finally {
      ch?.close();
      release();
    }
    out.readyMs = performance.now() - j.pausedAt;
    svc.store.update(rec.id, { state: 'running', booted: true, lastError: null, ownerPid: null });
    out.ok = true;
    return out;
  } catch (err) {
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
