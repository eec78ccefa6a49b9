/**
 * Boot snapshots: `smol run` restores a throwaway machine from a saved, freshly booted one instead of booting
 * the kernel again (the fork machinery of DESIGN.md §3 applied to a machine that has done nothing yet).
 * The first run on a setup boots cold and saves the snapshot just after the agent answers and the Smolfile's
 * init ran, before the user's command; later runs map its RAM copy-on-write and load its device state.
 * A snapshot is keyed by everything that shapes the booted guest, so a new kernel, initramfs, QEMU build or
 * machine size simply misses, and one that fails to load is deleted and the run boots cold.
 * Machines with a disk (`--image`, `pack run` of a disk artifact) qualify too when their overlay sits on an
 * immutable base: the snapshot then keeps a copy of the overlay as it was at the save (what boot wrote), and
 * each restore runs on a fresh overlay over that copy, so the guest's page cache and its disk agree.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { assetsHome, dataPaths } from '../util/paths.js';
import { netModeOf } from '../smolfile/network.js';
import { bootFilesFor, resumePlanFile } from './boot-files.js';
import { createCloneDisk } from './fork/clone.js';
import { trace } from '../util/trace.js';
import { tcgCpu } from './qemu/args.js';
import { readQcow2Header } from './image/qcow2.js';
import type { GuestChannel, Progress } from './engine.js';
import type { ForkOps, VmIdentity } from './fork/types.js';
import { AGENT_PORTS } from './layout.js';
import { pidAlive, type MachineRecord } from './store/machines.js';
import { mountInGuest } from './volumes/hotplug.js';
import { startRamCopy } from './volumes/ram-copy.js';
import type { SharedFs } from './volumes/virtiofsd.js';
import type { MachineService } from './service.js';
import { PREWARM_EXEC_MS, SNAPSHOT_CAPTURE_STALE_MS, SNAPSHOT_LOOKUP_GRACE_MS } from './limits.js';

/** Bumped whenever what a snapshot holds changes meaning. */
const FORMAT = 1;
/** Snapshots kept per assets dir; the least recently used go first. */
const KEEP = 4;
const PORT = 0;

export interface BootSnapshot {
  key: string; dir: string; stateFile: string; memFile: string;
  /** The overlay as boot left it, and an empty overlay over it that each restore copies (no qemu-img run). */
  diskFile: string | null; overlayFile: string | null;
}

/** What a machine's disk looks like to a snapshot: null for a diskless machine. */
export interface SnapshotDisk { virtualSize: number }

export interface SnapshotKey { key: string; vm: VmIdentity; disk: SnapshotDisk | null }

interface SnapshotMeta { format: number; key: string; vm: VmIdentity; disk: SnapshotDisk | null; createdAt: string; memBytes: number; stateBytes: number; captureMs: number }

export const snapshotsDir = (home: string) => path.join(dataPaths(assetsHome({ ...process.env, SMOL_HOME: home })).cache, 'boot-snapshots');

/**
 * Throwaway machines qualify, with or without a NIC (published ports, egress): a NIC's guest side is the same
 * whatever the ports and policy (static 10.0.2.15), so machines with one share a snapshot taken with one, and
 * the host side (hostfwd, namespace) is set up anew by the launch that restores it. With volumes too, through
 * hotplug (volumes/hotplug.ts: a vhost-user-fs device cannot be migrated in QEMU 7.2), unless the Smolfile has
 * an init, which must see the volumes as it did at boot. Their state is the RAM, the devices and (with a disk)
 * what boot wrote to the overlay. A machine about to resume a memory-carrying artifact has better state already.
 */
export function snapshotEligible(svc: MachineService, rec: MachineRecord): boolean {
  const volumesOk = !rec.spec.volumes?.length || (volumesHotplug(svc) && !rec.spec.init.length);
  return !!svc.engine.fork && rec.ephemeral && volumesOk && process.env.SMOL_BOOT_SNAPSHOTS !== '0'
    && !fs.existsSync(resumePlanFile(svc.layout(rec)));
}

/** Whether volumes are plugged in after boot (SMOL_FS_HOTPLUG=0: mounted at boot, so such runs boot cold). */
export const volumesHotplug = (svc: MachineService): boolean => !!svc.engine.plugVolumes && process.env.SMOL_FS_HOTPLUG !== '0';

/** The key, or null when the machine's disk is not an overlay on a base that stays put (then: no snapshot). */
export async function snapshotKey(svc: MachineService, rec: MachineRecord): Promise<SnapshotKey | null> {
  const { spec } = rec;
  const layout = svc.layout(rec);
  let disk: SnapshotDisk | null = null;
  let base: string | null = null;
  if (!svc.isDiskless(rec)) {
    const h = readQcow2Header(layout.disk);
    if (!h.backing || !path.isAbsolute(h.backing)) return null;
    const b = fs.statSync(h.backing);
    disk = { virtualSize: h.virtualSize };
    base = `${h.backing}:${b.size}:${b.mtimeMs}:${b.ino}`;
  }
  const vm = await svc.engine.fork!.identity(spec.memory);
  const boot = await bootFilesFor(layout, assetsHome({ ...process.env, SMOL_HOME: svc.home }));
  const st = fs.statSync(boot.kernel);
  const parts = {
    // the guest kernel patches its copy routines for the CPUID it booted with (qemu/args.ts tcgCpu)
    format: FORMAT, vm, cpuFlags: vm.accel === 'tcg' ? tcgCpu() : null, cpus: spec.cpus, ports: AGENT_PORTS, kernel: boot.kernelIdentity, kernelFile: `${boot.kernel}:${st.size}:${st.mtimeMs}`,
    // with a NIC the guest booted with smol.net=1 and a virtio-net device in its saved state
    nic: netModeOf(spec) !== 'none',
    // with volumes the guest booted with an empty PCIe root port and virtio_pci loaded (volumes/hotplug.ts);
    // 'rescan': the port has no power controller and the guest no pciehp (before: pciehp, pcie_ports=native)
    fsHotplug: spec.volumes?.length ? 'rescan' : false,
    initrd: boot.initrd, init: spec.init, env: spec.init.length ? spec.env : {}, workdir: spec.init.length ? spec.workdir : null, disk, base,
  };
  return { key: crypto.createHash('sha256').update(JSON.stringify(parts)).digest('hex').slice(0, 32), vm, disk };
}

const snapshotAt = (root: string, key: string, withDisk: boolean): BootSnapshot => {
  const dir = path.join(root, key);
  const disk = (f: string) => (withDisk ? path.join(dir, f) : null);
  return { key, dir, stateFile: path.join(dir, 'state'), memFile: path.join(dir, 'mem'), diskFile: disk('disk.qcow2'), overlayFile: disk('overlay.qcow2') };
};

export function findSnapshot(home: string, k: SnapshotKey): BootSnapshot | null {
  const snap = snapshotAt(snapshotsDir(home), k.key, !!k.disk);
  const { dir } = snap;
  if (![path.join(dir, 'meta.json'), snap.stateFile, snap.memFile, snap.diskFile, snap.overlayFile].every((f) => f === null || fs.existsSync(f))) return null;
  try {
    const now = new Date();
    fs.utimesSync(path.join(dir, 'meta.json'), now, now); // LRU order for pruning
  } catch {
    // a read-only cache still serves
  }
  return snap;
}

/**
 * A restore in progress marks the snapshot as in use (users/<pid>-<machine>), from before it copies the overlay
 * until the state is loaded: after that QEMU holds the files it needs open, and removing them harms nothing.
 * Pruning (here and `smol prune`) skips a snapshot with a live marker, or one looked up in the last minute
 * (findSnapshot touched it: its restore is about to mark it). Snapshots sit in the assets dir, which several
 * state homes may share, so the marker lives with the snapshot, not with a machine.
 */
const usersDir = (dir: string) => path.join(dir, 'users');

function markInUse(snap: BootSnapshot, rec: MachineRecord): () => void {
  const f = path.join(usersDir(snap.dir), `${process.pid}-${rec.id}`);
  try {
    fs.mkdirSync(usersDir(snap.dir), { recursive: true });
    fs.writeFileSync(f, '');
  } catch {
    // the snapshot went meanwhile: the restore fails and the run boots cold
  }
  return () => fs.rmSync(f, { force: true });
}

export function snapshotInUse(dir: string, now = Date.now()): boolean {
  try {
    if (now - fs.statSync(path.join(dir, 'meta.json')).mtimeMs < SNAPSHOT_LOOKUP_GRACE_MS) return true;
  } catch {
    // no meta.json: a broken snapshot, not in use
  }
  let users: string[] = [];
  try {
    users = fs.readdirSync(usersDir(dir));
  } catch {
    return false;
  }
  return users.some((u) => pidAlive(Number(u.split('-')[0])));
}

export function dropSnapshot(snap: BootSnapshot): void {
  fs.rmSync(snap.dir, { recursive: true, force: true });
}

/**
 * Saves the running machine (booted forkable, nothing run yet) as the snapshot for key. The machine pauses
 * for the device-state save and the RAM copy, then continues. Losing a race with another run is fine.
 */
export async function captureSnapshot(svc: MachineService, rec: MachineRecord, k: SnapshotKey, ch?: GuestChannel): Promise<BootSnapshot> {
  if (ch && k.disk) await prewarm(ch);
  const root = snapshotsDir(svc.home);
  fs.mkdirSync(root, { recursive: true });
  const tmp = fs.mkdtempSync(path.join(root, '.tmp-'));
  try {
    const layout = svc.layout(rec);
    const t0 = performance.now();
    // a disk freezes where boot left it: the machine goes on in a new overlay over it, and the snapshot keeps a copy
    const nextDisk = k.disk ? path.join(layout.dir, `disk-${crypto.randomBytes(4).toString('hex')}.qcow2`) : null;
    if (nextDisk) await createCloneDisk(layout.disk, nextDisk, k.disk!.virtualSize);
    const cap = await svc.engine.fork!.capture(layout, {
      stateFile: path.join(tmp, 'state'), nextDisk, memCopy: path.join(tmp, 'mem'), hold: false,
      onDiskMoved: () => svc.store.update(rec.id, { diskFile: path.basename(nextDisk!) }),
    });
    const snap = snapshotAt(root, k.key, !!k.disk);
    if (cap.frozenDisk) {
      fs.copyFileSync(cap.frozenDisk, path.join(tmp, 'disk.qcow2'));
      // names the copy where it will live once tmp is renamed into place
      await createCloneDisk(snap.diskFile!, path.join(tmp, 'overlay.qcow2'), k.disk!.virtualSize);
    }
    const meta: SnapshotMeta = {
      format: FORMAT, key: k.key, vm: k.vm, disk: k.disk, createdAt: new Date().toISOString(), memBytes: fs.statSync(path.join(tmp, 'mem')).blocks * 512,
      stateBytes: cap.stateBytes, captureMs: Math.round(performance.now() - t0),
    };
    fs.writeFileSync(path.join(tmp, 'meta.json'), `${JSON.stringify(meta, null, 2)}\n`);
    try {
      fs.renameSync(tmp, snap.dir);
    } catch {
      fs.rmSync(tmp, { recursive: true, force: true }); // another run saved the same snapshot first
    }
    prune(root, KEEP);
    return snap;
  } catch (err) {
    fs.rmSync(tmp, { recursive: true, force: true });
    throw err;
  }
}

/**
 * Starts rec from the snapshot: launch paused on the template, load the state, then give the guest its own
 * identity (hostname, machine-id, clock, and fresh entropy: there is no VMGENID to reseed the RNG otherwise).
 * Returns the channel on the port the snapshot was taken through. On failure QEMU is gone and rec is stopped.
 */
const pristineOf = (disk: string) => `${disk}.pristine`;

/**
 * A restored machine's channel; with volumes, also their mount, still running: it started beside the agent's
 * configure, and its failure is the run's (volumes/hotplug.ts), not a sign that the snapshot is bad.
 */
export interface RestoredMachine { ch: GuestChannel; release: () => void; volumesMounted?: Promise<void> }

export async function startFromSnapshot(svc: MachineService, rec: MachineRecord, snap: BootSnapshot, o: { timeoutMs: number; onProgress?: Progress }): Promise<RestoredMachine> {
  const ops: ForkOps = svc.engine.fork!;
  const layout = svc.layout(rec);
  const unlock = svc.store.lock(rec.id, 'start', rec.name);
  const unmark = markInUse(snap, rec);
  // with volumes: the RAM copy (made while QEMU starts), the plug (while the agent connects), the mount (while it configures)
  let copying: Promise<void> | undefined;
  let plugging: Promise<Pick<SharedFs, 'tag' | 'mounts'>> | undefined;
  let mounting: Promise<void> | undefined;
  try {
    svc.store.update(rec.id, { state: 'starting', lastError: null });
    fs.mkdirSync(layout.runDir, { recursive: true });
    o.onProgress?.('restoring the boot snapshot');
    // the overlay create() made sits on the bare base; the saved guest expects the disk as boot left it.
    // The bare one is kept aside: if the restore fails (the snapshot pruned by another smol between lookup
    // and launch, say), the cold boot that follows needs it, not an overlay over a file that has gone.
    if (snap.overlayFile) {
      fs.copyFileSync(layout.disk, pristineOf(layout.disk));
      fs.copyFileSync(snap.overlayFile, layout.disk);
    }
    // a virtiofs device reads guest RAM through its own mapping, so it must be shared: a private copy, not the template
    const fsHotplug = !!rec.spec.volumes?.length;
    trace('restore: start');
    if (fsHotplug) (copying = startRamCopy(snap.memFile, layout.memFile, rec.spec.memory * 2 ** 20)).catch(() => undefined);
    const clone = fsHotplug ? { memFile: layout.memFile, share: true } : { memFile: snap.memFile };
    const pid = await svc.engine.launch(rec.spec, layout, { diskless: !snap.diskFile, forkable: false, clone, fsHotplug });
    svc.store.update(rec.id, { pid, startedAt: Date.now() });
    const release = svc.store.lock(`${rec.id}#p${PORT}`, 'channel', rec.name);
    let ch: GuestChannel | undefined;
    try {
      await copying;
      trace('restore: ram copied');
      await ops.restore(layout, snap.stateFile, o.timeoutMs);
      trace('restore: state loaded');
      if (fsHotplug) (plugging = svc.engine.plugVolumes!(rec.spec, layout)).catch(() => undefined);
      const c = (ch = await svc.engine.connect(layout, PORT, o.timeoutMs));
      trace('restore: agent connected');
      (mounting = plugging?.then((v) => mountInGuest(c, v, rec.name)))?.catch(() => undefined);
      await ch.configure({ hostname: rec.name, machineId: crypto.randomBytes(16).toString('hex'), entropy: crypto.randomBytes(64), timeMs: Date.now() });
    } catch (err) {
      ch?.close();
      release();
      throw err;
    }
    trace('restore: configured');
    svc.store.update(rec.id, { state: 'running', booted: true });
    fs.rmSync(pristineOf(layout.disk), { force: true });
    return { ch, release, volumesMounted: mounting };
  } catch (err) {
    // nothing may still be writing the RAM file or talking to QEMU when the machine goes
    await Promise.all([copying, plugging, mounting].map((p) => p?.catch(() => undefined)));
    const cur = svc.store.get(rec.id);
    if (cur.pid) await svc.engine.terminate(cur.pid, layout, 0).catch(() => undefined);
    if (copying) fs.rmSync(layout.memFile, { force: true }); // a cold boot after this must not start on the snapshot's RAM
    if (fs.existsSync(pristineOf(layout.disk))) fs.renameSync(pristineOf(layout.disk), layout.disk);
    svc.store.update(rec.id, { state: 'stopped', pid: null, booted: false, lastError: (err as Error).message });
    throw err;
  } finally {
    unmark();
    unlock();
  }
}

/**
 * Reads the commonest exec path (the shell, `true`, and the loader and libc where binaries are dynamic) into
 * the guest's page cache before the save: on a disk image they would otherwise come through the qcow2 chain
 * on every restored run (~60 ms of `pack run -- true` under TCG). Best effort: an image without them is fine.
 */
async function prewarm(ch: GuestChannel): Promise<void> {
  for (const argv of [['/bin/sh', '-c', 'true'], ['true']]) {
    try {
      const h = await ch.exec({ argv });
      h.stdin.end();
      h.stdout.resume();
      h.stderr.resume();
      await Promise.race([h.exit, new Promise((r) => setTimeout(r, PREWARM_EXEC_MS).unref())]);
    } catch {
      // not there, or not runnable: nothing to warm
    }
  }
}

function prune(root: string, keep: number): void {
  for (const n of fs.readdirSync(root).filter((x) => x.startsWith('.tmp-'))) {
    const p = path.join(root, n);
    // a capture killed with -9 leaves its temp dir; a live one finishes in well under a minute
    try { if (Date.now() - fs.statSync(p).mtimeMs > SNAPSHOT_CAPTURE_STALE_MS) fs.rmSync(p, { recursive: true, force: true }); } catch { /* gone already */ }
  }
  const entries = fs.readdirSync(root).filter((n) => !n.startsWith('.')).map((n) => {
    try {
      return { n, t: fs.statSync(path.join(root, n, 'meta.json')).mtimeMs };
    } catch {
      return { n, t: 0 };
    }
  }).sort((a, b) => b.t - a.t);
  for (const e of entries.slice(keep)) if (!snapshotInUse(path.join(root, e.n))) fs.rmSync(path.join(root, e.n), { recursive: true, force: true });
}
