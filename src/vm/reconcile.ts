/** Brings a recorded state in line with the processes that exist now. */
import { MachineStore, pidAlive, type MachineRecord } from './store/machines.js';

/** `savedState`: whether the machine has a complete pause --to-disk save (pause-files.ts). */
export function reconcile(store: MachineStore, rec: MachineRecord, savedState: () => boolean = () => false): MachineRecord {
  const qemuAlive = pidAlive(rec.pid);
  const busy = store.lockHolder(rec.id) !== null;
  // paused to disk, QEMU is meant to be gone; paused in memory (or killed before the save was complete), it is not
  if (rec.state === 'paused' && !qemuAlive && !busy && !savedState()) return mark(store, rec, 'QEMU exited while the machine was paused');
  if ((rec.state === 'running' || rec.state === 'stopping') && !qemuAlive && !busy) {
    return mark(store, rec, 'QEMU exited unexpectedly');
  }
  if ((rec.state === 'starting' || rec.state === 'creating') && !busy && !pidAlive(rec.state === 'creating' || rec.ephemeral ? rec.ownerPid : null)) {
    if (rec.state === 'creating') return mark(store, rec, 'smol was interrupted while creating the machine');
    if (!qemuAlive) return mark(store, rec, 'smol was interrupted while starting the machine');
  }
  return rec;
}

function mark(store: MachineStore, rec: MachineRecord, why: string): MachineRecord {
  store.update(rec.id, { state: 'crashed', lastError: rec.lastError ?? why });
  return { ...rec, state: 'crashed', lastError: rec.lastError ?? why };
}

/**
 * Garbage nobody can reach any more: an ephemeral machine whose owning `smol run` died, or a machine whose
 * maker is gone (killed, or its cleanup failed, e.g. on a full disk) before handing it over: still
 * 'creating', or a clone still starting (a machine keeps an owner only until it is made).
 */
export function isOrphan(rec: MachineRecord): boolean {
  return (rec.ephemeral || rec.state === 'creating' || rec.ownerPid !== null) && !pidAlive(rec.ownerPid);
}
