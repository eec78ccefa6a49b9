/**
 * `smol machine pause` and `resume` (docs/pause.md). A pause stops the vCPUs (QMP `stop`): memory stays in
 * QEMU. `--to-disk` then saves RAM and device state with the fork machinery (fork-ops capture, held) into
 * the machine's dir and ends QEMU. Crash safety rests on three rules: the record says `paused` before QEMU
 * is touched; a save is written in a temp dir and renamed to paused/ only when complete and synced; and
 * where paused/ exists it is the truth (a QEMU still there is the same frozen guest, or a half-restored one).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { ConflictError, PrerequisiteError, UserError } from '../errors/index.js';
import type { LaunchOptions } from './engine.js';
import { AGENT_PORTS, shmHasRoom, strayQemuPid, type MachineLayout } from './layout.js';
import { QmpClient } from './qemu/qmp.js';
import { discardSpare } from './fork/spare.js';
import { startRamCopy } from './volumes/ram-copy.js';
import { volumesOf } from './volumes/spec.js';
import { hasPausedState, pausedDir, PAUSE_SCRATCH_PREFIX } from './pause-files.js';
import { pidAlive, type MachineRecord } from './store/machines.js';
import type { MachineService } from './service.js';
import { QMP_CONNECT_MS, RESTORE_TIMEOUT_MS } from './limits.js';
import { trace } from '../util/trace.js';

const metaSchema = z.object({
  version: z.literal(1),
  /** How QEMU held the RAM: 'shared' saved it as memory.ram beside a device-only state; otherwise the state carries it. */
  memory: z.enum(['shared', 'private', 'none']),
  memoryMiB: z.number().int().positive(),
  savedAt: z.number(),
}).strict();
type PauseMeta = z.infer<typeof metaSchema>;

/**
 * TEST ONLY: SMOL_PAUSE_FAULT=die:POINT kills this smol with SIGKILL at POINT (`saving`: the save is in the
 * temp dir; `saved`: renamed, QEMU not yet ended; `restored`: the guest runs again, paused/ not yet retired).
 */
function dieAt(point: string): void {
  if (process.env.SMOL_PAUSE_FAULT === `die:${point}`) process.kill(process.pid, 'SIGKILL');
}

export async function pauseMachine(svc: MachineService, nameOrId: string, o: { toDisk?: boolean } = {}): Promise<MachineRecord> {
  const rec = svc.refresh(svc.store.get(nameOrId));
  const frozen = rec.state === 'paused' && pidAlive(rec.pid);
  if (rec.state !== 'running' && !(frozen && o.toDisk)) {
    throw new ConflictError(`pause failed: machine "${rec.name}" is ${rec.state === 'paused' ? 'already paused' : rec.state}`, {
      where: rec.name, hint: rec.state === 'paused' ? `Resume it with: smol machine resume ${rec.name}` : `Only a running machine can be paused; start it with: smol machine start ${rec.name}`,
    });
  }
  const unlock = svc.store.lock(rec.id, 'pause', rec.name);
  if (o.toDisk) {
    try {
      refuseUnsaveable(svc, rec);
    } catch (err) {
      unlock();
      throw err;
    }
  }
  const layout = svc.layout(rec);
  try {
    // recorded first: a smol killed after the stop below must leave a machine that says it is frozen
    svc.store.update(rec.id, { state: 'paused' });
    await qmp(layout, 'stop');
    if (o.toDisk) await saveToDisk(svc, rec, layout);
    return svc.store.get(rec.id);
  } finally {
    unlock();
  }
}

export async function resumeMachine(svc: MachineService, nameOrId: string): Promise<MachineRecord> {
  const rec = svc.refresh(svc.store.get(nameOrId));
  if (rec.state !== 'paused') {
    throw new ConflictError(`resume failed: machine "${rec.name}" is ${rec.state === 'running' ? 'running, not paused' : rec.state}`, {
      where: rec.name, hint: rec.state === 'running' ? 'Nothing to do.' : `Start it with: smol machine start ${rec.name}`,
    });
  }
  const unlock = svc.store.lock(rec.id, 'resume', rec.name);
  const layout = svc.layout(rec);
  try {
    if (hasPausedState(layout)) await restoreFromDisk(svc, rec, layout);
    else {
      // a save killed half-way may still be writing into its temp dir: cancelled here, then the vCPUs run
      if (svc.engine.fork) await svc.engine.fork.resumeAbandoned(layout);
      else await qmp(layout, 'cont');
      svc.store.update(rec.id, { state: 'running' });
    }
  } finally {
    unlock();
  }
  await stepClock(svc, rec);
  trace('resume: clock stepped');
  return svc.store.get(rec.id);
}

/**
 * `stop` of a paused machine, as `docker stop` of a paused container: a frozen guest is thawed so it can
 * power off cleanly; a save on disk is discarded (the machine then boots its disk next time).
 */
export async function thawForStop(svc: MachineService, rec: MachineRecord): Promise<void> {
  const layout = svc.layout(rec);
  if (pidAlive(rec.pid)) await svc.engine.fork?.resumeAbandoned(layout).catch(() => undefined);
  retire(layout);
}

function refuseUnsaveable(svc: MachineService, rec: MachineRecord): void {
  if (!svc.engine.fork) throw new PrerequisiteError('pause --to-disk failed: this VM backend cannot save machine state', { where: rec.name });
  // QEMU 7.2 refuses to migrate a vhost-user-fs device (as for fork: docs/volumes.md)
  if (volumesOf(rec.spec).length) {
    throw new UserError(`pause --to-disk failed: machine "${rec.name}" has volumes, and QEMU cannot save a virtiofs device's state`, {
      where: rec.name, hint: `Pause it in memory instead: smol machine pause ${rec.name}`,
    });
  }
  // a session open across the save would be one the restored guest's agent still thinks it serves, with no host end
  const busy = Array.from({ length: AGENT_PORTS }, (_, p) => svc.store.lockHolder(`${rec.id}#p${p}`)).filter((pid) => pid !== null);
  if (busy.length) {
    throw new ConflictError(`pause --to-disk failed: machine "${rec.name}" has ${busy.length} session${busy.length > 1 ? 's' : ''} open (exec, shell or cp; pid ${busy.join(', ')})`, {
      where: rec.name, hint: `Wait for them to end, or pause it in memory: smol machine pause ${rec.name}`,
    });
  }
}

async function saveToDisk(svc: MachineService, rec: MachineRecord, layout: MachineLayout): Promise<void> {
  const ops = svc.engine.fork!;
  // holding the lock, any scratch dir is a killed save's or a retired one's
  for (const n of fs.readdirSync(layout.dir).filter((x) => x.startsWith(PAUSE_SCRATCH_PREFIX))) fs.rmSync(path.join(layout.dir, n), { recursive: true, force: true });
  const tmp = fs.mkdtempSync(path.join(layout.dir, PAUSE_SCRATCH_PREFIX));
  try {
    const insp = await ops.inspect(layout);
    await discardSpare(svc, rec); // a spare waits to clone the running guest; none will come
    const files = { state: path.join(tmp, 'device-state'), ram: path.join(tmp, 'memory.ram') };
    // shared RAM lives in a file: copy it and save device state only; otherwise the state carries the RAM
    await ops.capture(layout, { stateFile: files.state, nextDisk: null, memCopy: insp.memory === 'shared' ? files.ram : null, hold: true })
      .catch(async (err: unknown) => { await qmp(layout, 'stop').catch(() => undefined); throw err; }); // a failed capture runs the guest on
    const meta: PauseMeta = { version: 1, memory: insp.memory, memoryMiB: insp.vm.memoryMiB, savedAt: Date.now() };
    fs.writeFileSync(path.join(tmp, 'meta.json'), `${JSON.stringify(meta)}\n`);
    for (const f of fs.readdirSync(tmp)) fsync(path.join(tmp, f));
    fsync(tmp);
    dieAt('saving');
    fs.renameSync(tmp, pausedDir(layout));
    fsync(layout.dir);
  } catch (err) {
    fs.rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
  dieAt('saved');
  // `stop` flushed the disks, so QEMU can go at once; the RAM file in /dev/shm is in paused/ now
  const pid = rec.pid ?? strayQemuPid(layout);
  if (pid) await svc.engine.terminate(pid, layout, 0);
  fs.rmSync(layout.memFile, { force: true });
  svc.store.update(rec.id, { pid: null });
}

async function restoreFromDisk(svc: MachineService, rec: MachineRecord, layout: MachineLayout): Promise<void> {
  const dir = pausedDir(layout);
  const meta = metaSchema.parse(JSON.parse(fs.readFileSync(path.join(dir, 'meta.json'), 'utf8')));
  // a QEMU here is the frozen guest the save was taken from, or a restore killed half-way: the save wins
  for (const pid of new Set([rec.pid, strayQemuPid(layout)])) if (pid && pidAlive(pid)) await svc.engine.terminate(pid, layout, 0);
  fs.mkdirSync(layout.runDir, { recursive: true });
  let memory: Pick<LaunchOptions, 'clone' | 'incoming'>;
  let copying: Promise<void> | undefined;
  if (meta.memory === 'shared') {
    if (!shmHasRoom(meta.memoryMiB)) throw new PrerequisiteError(`resume failed: /dev/shm has less than the ${meta.memoryMiB} MiB machine "${rec.name}" keeps its RAM in`, { where: rec.name, hint: 'Give /dev/shm more room, or stop the machine (its saved state is then discarded).' });
    // back into /dev/shm, shared, so the machine stays forkable; copied while QEMU starts (ram-copy.ts)
    copying = startRamCopy(path.join(dir, 'memory.ram'), layout.memFile, meta.memoryMiB * 2 ** 20);
    copying.catch(() => undefined); // awaited before the restore
    memory = { clone: { memFile: layout.memFile, share: true } };
  } else if (meta.memory === 'private') {
    // a clone's RAM block is a private file mapping: an empty one of its size takes the saved pages
    const blank = path.join(dir, 'blank.ram');
    fs.writeFileSync(blank, '');
    fs.truncateSync(blank, meta.memoryMiB * 2 ** 20);
    memory = { clone: { memFile: blank, share: false } };
  } else {
    memory = { incoming: true };
  }
  trace('resume: memory ready');
  const pid = await svc.engine.launch(rec.spec, layout, { diskless: svc.isDiskless(rec), forkable: false, publishPorts: !rec.parent && !rec.forkPoint, ...memory })
    .catch(async (err: unknown) => { await copying?.catch(() => undefined); throw err; });
  svc.store.update(rec.id, { pid });
  try {
    await copying;
    await svc.engine.fork!.restore(layout, path.join(dir, 'device-state'), RESTORE_TIMEOUT_MS);
  } catch (err) {
    // the save stays: the machine is still paused, and resume can be tried again
    await svc.engine.terminate(pid, layout, 0).catch(() => undefined);
    if (copying) fs.rmSync(layout.memFile, { force: true }); // the save still has it
    svc.store.update(rec.id, { pid: null });
    throw err;
  }
  trace('resume: state loaded');
  dieAt('restored');
  retire(layout);
  svc.store.update(rec.id, { state: 'running' });
}

/** Takes paused/ out of the way atomically (a rename), then removes it. */
function retire(layout: MachineLayout): void {
  const dir = pausedDir(layout);
  if (!fs.existsSync(dir)) return;
  const gone = path.join(layout.dir, `${PAUSE_SCRATCH_PREFIX}done-${crypto.randomBytes(4).toString('hex')}`);
  fs.renameSync(dir, gone);
  fs.rmSync(gone, { recursive: true, force: true });
}

/** The guest's clock stood still while paused: step it to now, as after a fork or an artifact resume. */
async function stepClock(svc: MachineService, rec: MachineRecord): Promise<void> {
  const { ch, release } = await svc.channel(rec.id);
  try {
    await ch.configure({ timeMs: Date.now() }).catch(() => undefined);
  } finally {
    ch.close();
    release();
  }
}

async function qmp(layout: MachineLayout, cmd: string): Promise<void> {
  const c = await QmpClient.connect(layout.qmpSocket, QMP_CONNECT_MS);
  try {
    await c.execute(cmd);
  } finally {
    c.close();
  }
}

function fsync(p: string): void {
  const fd = fs.openSync(p, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}
