/**
 * A warm spare: one clone VMM per forkable machine, started ahead of its next fork (at start, and after each
 * fork), waiting with `-incoming defer` on an overlay over the machine's current top layer and on the next
 * fork's template path. The next fork's first clone is then this process: QEMU's start-up and the overlay
 * (~70 ms under TCG) leave the fork call entirely. The spare has no registry row until a fork claims it: it
 * is described by spare.json in the parent's directory, and stopping or removing the parent discards it.
 * A spare that no longer fits (the parent moved to another layer, e.g. after a memory pack) is discarded.
 */
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { strayQemuPid } from '../layout.js';
import { newMachineId, type MachineRecord } from '../store/machines.js';
import type { MachineService } from '../service.js';
import { forkMemFile } from './cleanup.js';
import { createCloneDisk } from './clone.js';

const spareSchema = z.object({
  id: z.string(),
  forkId: z.string(),
  pid: z.number().int().nullable(),
  /** The parent's layer the spare's overlay sits on: it must still be the parent's top at the fork. */
  backing: z.string(),
  memoryMiB: z.number().int(),
}).strict();
export type Spare = z.infer<typeof spareSchema>;

/** SMOL_FORK_SPARE=0 turns off clones started ahead (a waiting clone's QEMU costs ~30 MiB): fork spares and fork-point pools. */
export const sparesEnabled = (env: NodeJS.ProcessEnv = process.env): boolean => env.SMOL_FORK_SPARE !== '0';
const spareFile = (svc: MachineService, parent: MachineRecord) => path.join(svc.layout(parent).dir, 'spare.json');
export const hasSpare = (svc: MachineService, parent: MachineRecord) => fs.existsSync(spareFile(svc, parent));
/** Named as fork.ts names the overlay a fork moves the parent onto. */
const nextOverlay = (svc: MachineService, parent: MachineRecord, forkId: string) => path.join(svc.layout(parent).dir, `disk-${forkId}.qcow2`);

function read(file: string): Spare | null {
  try {
    return spareSchema.parse(JSON.parse(fs.readFileSync(file, 'utf8')));
  } catch {
    return null;
  }
}

function write(file: string, s: Spare): void {
  fs.writeFileSync(`${file}.tmp`, JSON.stringify(s));
  fs.renameSync(`${file}.tmp`, file);
}

/** Starts a spare for `parent` (call under its fork or start lock); a failure leaves nothing behind. */
export async function startSpare(svc: MachineService, parent: MachineRecord, backing: string, diskSize: number): Promise<void> {
  const file = spareFile(svc, parent);
  await discardSpare(svc, parent);
  if (!sparesEnabled()) return;
  const spare: Spare = { id: newMachineId(), forkId: newMachineId(), pid: null, backing, memoryMiB: parent.spec.memory };
  // recorded before anything exists, so a smol killed half-way leaves a spare that the next discard finds
  write(file, spare);
  try {
    const layout = svc.layout({ id: spare.id });
    fs.mkdirSync(layout.dir, { recursive: true });
    fs.mkdirSync(layout.runDir, { recursive: true });
    const memFile = forkMemFile(spare.forkId);
    fs.writeFileSync(memFile, '');
    fs.truncateSync(memFile, spare.memoryMiB * 2 ** 20);
    await createCloneDisk(backing, layout.disk, diskSize);
    // and the overlay the parent moves onto at that fork (the fork makes it itself if this one is missing)
    await createCloneDisk(backing, nextOverlay(svc, parent, spare.forkId), diskSize);
    spare.pid = await svc.engine.launch(parent.spec, layout, { diskless: false, forkable: false, clone: { memFile }, publishPorts: false });
    write(file, spare);
  } catch {
    await discardSpare(svc, parent); // best effort: the next fork simply starts its clones itself
  }
}

/**
 * Hands the spare to a fork that will run on `backing`, or discards it if it does not fit; null if none.
 * `claim` records the spare as the fork's before spare.json goes, so no moment leaves it unrecorded.
 */
export async function takeSpare(svc: MachineService, parent: MachineRecord, backing: string | null, claim: (s: Spare) => void): Promise<Spare | null> {
  const file = spareFile(svc, parent);
  const s = read(file);
  if (!s) return null;
  if (s.pid && strayQemuPid(svc.layout({ id: s.id })) === s.pid && s.backing === backing && s.memoryMiB === parent.spec.memory) {
    claim(s);
    fs.rmSync(file, { force: true });
    return s;
  }
  await discardSpare(svc, parent);
  return null;
}

/**
 * Kills a spare's QEMU and removes its machine dirs: the part of discarding it that a fork which took the
 * spare but never gave it a registry row (it failed first) still owes; the fork removes the rest.
 */
export async function discardTakenSpare(svc: MachineService, s: Pick<Spare, 'id'>): Promise<void> {
  const layout = svc.layout({ id: s.id });
  const pid = strayQemuPid(layout); // from QEMU's pidfile: also found when smol died before recording it
  if (pid) await svc.engine.terminate(pid, layout, 0);
  fs.rmSync(layout.dir, { recursive: true, force: true });
  fs.rmSync(layout.runDir, { recursive: true, force: true });
}

/** Kills the spare's QEMU and removes its files (nothing references them). */
export async function discardSpare(svc: MachineService, parent: MachineRecord): Promise<void> {
  const file = spareFile(svc, parent);
  const s = read(file);
  if (!s) return void fs.rmSync(file, { force: true });
  await discardTakenSpare(svc, s);
  fs.rmSync(forkMemFile(s.forkId), { force: true });
  // never the layer the parent runs on: a fork that took this spare has already dropped spare.json, but be sure
  const next = nextOverlay(svc, parent, s.forkId);
  if (svc.store.find(parent.id)?.diskFile !== path.basename(next)) fs.rmSync(next, { force: true });
  fs.rmSync(file, { force: true });
}
