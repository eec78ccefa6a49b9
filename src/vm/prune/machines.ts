/**
 * `smol machine prune`: what no machine can use any more. Throwaway machines whose `smol run` died (and
 * machines whose maker died before handing them over), directories under machines/ and the run root that no
 * registry row names, and fork points no clone references. Never a persistent machine, whatever its state;
 * never a clone, its fork point or its parent's frozen layers; never a fork's warm spare (it has no row yet).
 */
import fs from 'node:fs';
import path from 'node:path';
import { dataPaths } from '../../util/paths.js';
import { releaseForkPoints } from '../fork/cleanup.js';
import { sweepAbandonedForks } from '../fork/abandoned.js';
import { ForkPointStore } from '../store/fork-points.js';
import { runRoot } from '../layout.js';
import { isOrphan } from '../reconcile.js';
import type { MachineService } from '../service.js';
import { diskBytes, recentlyTouched } from './du.js';
import { result, type PruneOptions, type PruneResult, type PrunedItem } from './types.js';
import { UNREGISTERED_DIR_GRACE_MS } from '../limits.js';

export async function pruneMachines(svc: MachineService, o: PruneOptions = {}): Promise<PruneResult> {
  const removed: PrunedItem[] = [];
  for (const r of svc.store.list()) {
    if (!isOrphan(r) || svc.store.lockHolder(r.id) !== null) continue;
    const l = svc.layout(r);
    const item = { name: r.name, bytes: diskBytes(l.dir) + diskBytes(l.memFile) };
    if (!o.dryRun) {
      try {
        await svc.remove(r.id, { force: true });
      } catch {
        continue; // busy or half-gone: the next prune (or ls) takes it
      }
    }
    removed.push(item);
  }
  // a stopped machine's RAM file from its last forkable boot: nothing reads it again (a start makes a new one)
  for (const r of svc.store.list()) {
    const l = svc.layout(r);
    if (r.state !== 'stopped' || !fs.existsSync(l.memFile) || svc.store.lockHolder(r.id) !== null) continue;
    const item = { name: `${r.name} RAM file`, bytes: diskBytes(l.memFile) };
    if (!o.dryRun) fs.rmSync(l.memFile, { force: true });
    removed.push(item);
  }
  const known = new Set([...svc.store.list().map((r) => r.id), ...spareIds(svc)]);
  for (const root of [dataPaths(svc.home).machines, runRoot(svc.home)]) {
    for (const id of safeReaddir(root)) {
      const p = path.join(root, id);
      if (known.has(id) || !/^[0-9a-f]{12}$/.test(id) || recentlyTouched(p, UNREGISTERED_DIR_GRACE_MS)) continue;
      const item = { name: `${root === runRoot(svc.home) ? 'run dir' : 'dir'} ${id}`, bytes: diskBytes(p) };
      if (!o.dryRun) fs.rmSync(p, { recursive: true, force: true });
      removed.push(item);
    }
  }
  // unreferenced fork points are normally released with their last clone; this catches any a crash left
  const points = new ForkPointStore(svc.store.db);
  const unused = points.list().filter((fp) => points.users(fp.id) === 0);
  if (o.dryRun) {
    for (const fp of unused) removed.push({ name: `fork point ${fp.id}`, bytes: diskBytes(path.dirname(fp.stateFile)) + (fp.memOwned ? diskBytes(fp.memFile) : 0) });
  } else {
    const sizes = new Map(unused.map((fp) => [fp.id, diskBytes(path.dirname(fp.stateFile)) + (fp.memOwned ? diskBytes(fp.memFile) : 0)]));
    for (const fp of releaseForkPoints(svc.store)) removed.push({ name: `fork point ${fp.id}`, bytes: sizes.get(fp.id) ?? 0 });
    for (const id of await sweepAbandonedForks(svc).catch(() => [])) removed.push({ name: `abandoned fork ${id}`, bytes: 0 });
  }
  return result('machines', removed);
}

/** Warm spares have a machine directory before any row: spare.json in their parent's directory (fork/spare.ts), or a fork's owner.json once taken. */
function spareIds(svc: MachineService): string[] {
  const ids: string[] = [];
  const read = (f: string) => {
    try {
      const v = JSON.parse(fs.readFileSync(f, 'utf8')) as { id?: unknown; spare?: unknown };
      for (const x of [v.id, v.spare]) if (typeof x === 'string') ids.push(x);
    } catch {
      // none, or being rewritten (the young-dir rule covers that moment)
    }
  };
  const machines = dataPaths(svc.home).machines;
  for (const id of safeReaddir(machines)) read(path.join(machines, id, 'spare.json'));
  const forks = path.join(svc.home, 'forks');
  for (const id of safeReaddir(forks)) read(path.join(forks, id, 'owner.json'));
  return ids;
}

function safeReaddir(p: string): string[] {
  try {
    return fs.readdirSync(p);
  } catch {
    return [];
  }
}
