/**
 * Forks that died half-way. A `smol fork` killed with -9 before it records its fork point leaves files that
 * no registry row names: the clones' template in /dev/shm (sparse at first, a full copy of the parent's RAM
 * once the pause has begun), the fork's directory, the overlay it made for the parent, and the warm spare it
 * had taken. So a fork records itself (owner.json in its directory) before it makes any of them, and the next
 * `machine ls` sweeps up the forks whose owner is dead and that never got a fork point.
 */
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { strayQemuPid } from '../layout.js';
import { ForkPointStore } from '../store/fork-points.js';
import { pidAlive, type MachineRecord } from '../store/machines.js';
import type { MachineService } from '../service.js';
import { diskUsage } from '../usage.js';
import { forkDir, forkOwnerFile, removeUnrecordedFork } from './cleanup.js';
import { discardTakenSpare } from './spare.js';
import { FORK_UNOWNED_GRACE_MS } from '../limits.js';

const forkOwnerSchema = z.object({
  pid: z.number().int(),
  /** The machine forked: the overlay the fork made for it is `disk-<forkId>.qcow2` in its directory. */
  parent: z.string(),
  /** The warm spare the fork took: a QEMU with no registry row until the fork inserts its clone's. */
  spare: z.string().nullable(),
}).strict();
type ForkOwner = z.infer<typeof forkOwnerSchema>;

/** A directory made but not yet owned is a fork in its first microseconds, unless it is this old. */

/** Makes the fork's directory and records who is making it; call before anything else of the fork exists. */
export function claimForkDir(home: string, forkId: string, owner: Omit<ForkOwner, 'pid'>): string {
  const dir = forkDir(home, forkId);
  fs.mkdirSync(dir, { recursive: true });
  const file = forkOwnerFile(home, forkId);
  fs.writeFileSync(`${file}.tmp`, JSON.stringify({ pid: process.pid, ...owner } satisfies ForkOwner));
  fs.renameSync(`${file}.tmp`, file);
  return dir;
}

/**
 * The parent of a fork that died. The overlay the fork made for it goes, unless it is now a layer of the
 * parent's disk (a later fork froze it) or the top QEMU writes to: a fork killed in the pause may have moved
 * the parent's QEMU onto it before the registry heard, and then the registry learns it now. A parent that
 * fork left stopped runs again (no clone will ever take that state), unless a later fork (a held one) has
 * paused it since.
 */
async function recoverParent(svc: MachineService, parent: MachineRecord, forkId: string, since: number): Promise<void> {
  const layout = svc.layout(parent);
  const next = path.resolve(layout.dir, `disk-${forkId}.qcow2`);
  const alive = pidAlive(parent.pid) && strayQemuPid(layout) === parent.pid;
  const insp = alive ? await svc.engine.fork?.inspect(layout).catch(() => null) : null;
  if (insp?.diskFile && path.resolve(insp.diskFile) === next) {
    if (parent.diskFile !== path.basename(next)) svc.store.update(parent.id, { diskFile: path.basename(next) });
  } else if (alive && !insp) {
    // cannot tell what QEMU runs on: leave everything as it is for a later ls
    return;
  } else if (!(diskUsage(layout.disk)?.chain ?? []).some((f) => path.resolve(f) === next)) {
    fs.rmSync(next, { force: true });
  }
  const later = new ForkPointStore(svc.store.db).list().some((fp) => fp.machine === parent.id && fp.createdAt >= since);
  if (parent.state === 'running' && insp && !insp.running && !later) {
    await svc.engine.fork?.resumeAbandoned(layout).catch(() => false);
  }
}

function readOwner(file: string): ForkOwner | null {
  try {
    return forkOwnerSchema.parse(JSON.parse(fs.readFileSync(file, 'utf8')));
  } catch {
    return null;
  }
}

/** Removes what dead forks left behind; returns their ids. Run after orphaned clone rows are removed. */
export async function sweepAbandonedForks(svc: MachineService): Promise<string[]> {
  const root = path.join(svc.home, 'forks');
  let ids: string[];
  try {
    ids = fs.readdirSync(root);
  } catch {
    return [];
  }
  const points = new ForkPointStore(svc.store.db);
  const swept: string[] = [];
  for (const id of ids) {
    if (points.get(id)) continue; // recorded: released with its last clone
    const ownerFile = forkOwnerFile(svc.home, id);
    const owner = readOwner(ownerFile);
    let since: number;
    try {
      since = fs.statSync(owner ? ownerFile : forkDir(svc.home, id)).mtimeMs;
    } catch {
      continue; // released meanwhile
    }
    if (owner ? pidAlive(owner.pid) : Date.now() - since < FORK_UNOWNED_GRACE_MS) continue;
    const found = owner && svc.store.find(owner.parent);
    let unlock = () => {};
    try {
      if (found) unlock = svc.store.lock(found.id, 'sweep', found.name);
    } catch {
      continue; // another smol works on the parent (its own fork or pack pauses it): the next ls sweeps this
    }
    try {
      // read again under the lock: a start, stop or fork may have finished meanwhile
      const parent = found ? svc.store.find(found.id) : null;
      await sweepOne(svc, id, owner, parent, since);
    } finally {
      unlock();
    }
    swept.push(id);
  }
  return swept;
}

async function sweepOne(svc: MachineService, id: string, owner: ForkOwner | null, parent: MachineRecord | null, since: number): Promise<void> {
  if (owner?.spare && !svc.store.find(owner.spare)) await discardTakenSpare(svc, { id: owner.spare }).catch(() => undefined);
  if (parent) await recoverParent(svc, parent, id, since);
  removeUnrecordedFork(svc.home, id);
}
