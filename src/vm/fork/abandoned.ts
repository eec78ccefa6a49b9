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
import { ForkPointStore } from '../registry/fork-points.js';
import { pidAlive, type MachineRecord } from '../registry/machines.js';
import type { MachineService } from '../service.js';
import { forkDir, forkMemFile, removeForkFiles } from './cleanup.js';

const forkOwnerSchema = z.object({
  pid: z.number().int(),
  /** The machine forked: the overlay the fork made for it is `disk-<forkId>.qcow2` in its directory. */
  parent: z.string(),
  /** The warm spare the fork took: a QEMU with no registry row until the fork inserts its clone's. */
  spare: z.string().nullable(),
}).strict();
type ForkOwner = z.infer<typeof forkOwnerSchema>;

/** A directory made but not yet owned is a fork in its first microseconds, unless it is this old. */
const UNOWNED_GRACE_MS = 60_000;

/** Makes the fork's directory and records who is making it; call before anything else of the fork exists. */
export function claimForkDir(home: string, forkId: string, owner: Omit<ForkOwner, 'pid'>): string {
  const dir = forkDir(home, forkId);
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'owner.json');
  fs.writeFileSync(`${file}.tmp`, JSON.stringify({ pid: process.pid, ...owner } satisfies ForkOwner));
  fs.renameSync(`${file}.tmp`, file);
  return dir;
}

/**
 * The parent of a fork that died: its unused next overlay goes. A fork killed in the pause may have moved the
 * parent's QEMU onto that overlay before the registry heard (then the registry learns it now), and leaves
 * the parent stopped (then it runs again: no clone will ever take that state), unless a held fork's clones
 * map its memory.
 */
async function recoverParent(svc: MachineService, parent: MachineRecord, forkId: string): Promise<void> {
  const next = path.join(svc.layout(parent).dir, `disk-${forkId}.qcow2`);
  if (parent.diskFile !== path.basename(next)) {
    if (openBy(parent.pid, next)) svc.store.update(parent.id, { diskFile: path.basename(next) });
    else fs.rmSync(next, { force: true });
  }
  const held = new ForkPointStore(svc.store.db).list().some((fp) => fp.machine === parent.id && !fp.memOwned);
  if (parent.state === 'running' && pidAlive(parent.pid) && !held) {
    await svc.engine.fork?.resumeAbandoned(svc.layout(parent)).catch(() => false);
  }
}

function openBy(pid: number | null, file: string): boolean {
  if (!pidAlive(pid) || !fs.existsSync(file)) return false;
  try {
    const real = fs.realpathSync(file);
    return fs.readdirSync(`/proc/${pid}/fd`).some((fd) => {
      try { return fs.readlinkSync(`/proc/${pid}/fd/${fd}`) === real; } catch { return false; }
    });
  } catch {
    return true; // cannot tell: keep it
  }
}

function readOwner(dir: string): ForkOwner | null {
  try {
    return forkOwnerSchema.parse(JSON.parse(fs.readFileSync(path.join(dir, 'owner.json'), 'utf8')));
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
    const dir = path.join(root, id);
    const owner = readOwner(dir);
    if (owner ? pidAlive(owner.pid) : Date.now() - fs.statSync(dir).mtimeMs < UNOWNED_GRACE_MS) continue;
    const parent = owner && svc.store.find(owner.parent);
    let unlock = () => {};
    try {
      if (parent) unlock = svc.store.lock(parent.id, 'sweep', parent.name);
    } catch {
      continue; // another smol works on the parent (its own fork or pack pauses it): the next ls sweeps this
    }
    try {
      await sweepOne(svc, id, owner, parent);
    } finally {
      unlock();
    }
    swept.push(id);
  }
  return swept;
}

async function sweepOne(svc: MachineService, id: string, owner: ForkOwner | null, parent: MachineRecord | null): Promise<void> {
  if (owner?.spare && !svc.store.find(owner.spare)) {
    const layout = svc.layout({ id: owner.spare });
    const pid = strayQemuPid(layout);
    if (pid) await svc.engine.terminate(pid, layout, 0).catch(() => undefined);
    fs.rmSync(layout.dir, { recursive: true, force: true });
    fs.rmSync(layout.runDir, { recursive: true, force: true });
  }
  if (parent) await recoverParent(svc, parent, id);
  removeForkFiles({ stateFile: path.join(forkDir(svc.home, id), 'state'), memFile: forkMemFile(id), memOwned: true });
}
