/**
 * Machine lifecycle: create, start, stop, remove, list. Every transition takes the machine's lock and
 * records state in the machine database (store/) before and after touching processes, so an interrupted
 * smol leaves a record that reconciliation (reconcile.ts) can read truthfully.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { BootError, ConflictError, GuestChannelError, PrerequisiteError, SmolError, UserError, mapFsError } from '../errors/index.js';
import type { Smolfile } from '../smolfile/schema.js';
import type { Engine, GuestChannel, Progress } from './engine.js';
import { machineLayout, shmHasRoom, strayQemuPid, AGENT_PORTS, type MachineLayout } from './layout.js';
import { MachineStore, newMachineId, pidAlive, type MachineRecord } from './store/machines.js';
import { isOrphan, reconcile } from './reconcile.js';
import { isKeptDetached } from './detach-state.js';
import { installForkHelper } from './fork/guest.js';
import { discardSpare, hasSpare, startSpare } from './fork/spare.js';
import { sweepAbandonedForks } from './fork/abandoned.js';
import { releaseForkPoints } from './fork/cleanup.js';
import { resumePlanFile } from './boot-files.js';
import { hasPausedState } from './pause-files.js';
import { checkVolumes, volumesOf } from './volumes/spec.js';
import { removeStage, stopVirtiofsd, virtiofsdFiles, virtiofsdPid } from './volumes/virtiofsd.js';
import { AGENT_HELLO_TIMEOUT_MS, BOOT_CONNECT_ATTEMPT_MS, CHANNEL_WAIT_MS, DEFAULT_BOOT_TIMEOUT_MS, RESTORE_TIMEOUT_MS, SHUTDOWN_CONNECT_MS, STOP_GRACE_MS } from './limits.js';

export interface ServiceOptions { home: string; store: MachineStore; engine: Engine }

export interface CreateOptions {
  name?: string; ephemeral?: boolean; parent?: string; onProgress?: Progress;
  /** Let the image resolve on trust and be checked meanwhile (PreparedDisk.imageConfirmed): `smol run` only. */
  speculativeImage?: boolean;
}

export interface StartOptions {
  onProgress?: Progress;
  bootTimeoutMs?: number;
  /** Hand the boot-time channel to the caller (saves a reconnect for `smol run`). */
  keepChannel?: boolean;
  /** Run this boot with file-backed memory so it can be forked, whatever the spec says. */
  forkable?: boolean;
  /** Install smol-fork-ready in a forkable machine (default true; a boot snapshot has no use for it). */
  forkHelper?: boolean;
  /** Boot without the volumes' device, to plug it in later (engine.plugVolumes): how a boot snapshot is saved with volumes. */
  fsHotplug?: boolean;
}

export interface OpenChannel { ch: GuestChannel; release: () => void }

export { DEFAULT_BOOT_TIMEOUT_MS };

export class MachineService {
  readonly home: string;
  readonly store: MachineStore;
  readonly engine: Engine;
  /**
   * Agent ports this process has a channel on. The lock table admits its own pid again, so without this two
   * concurrent execs in one long-lived process (`smol mcp`, `smol serve`) both took port 0 and one timed out.
   */
  private readonly portsInUse = new Set<string>();

  constructor(o: ServiceOptions) {
    this.home = o.home;
    this.store = o.store;
    this.engine = o.engine;
  }

  layout(rec: Pick<MachineRecord, 'id'> & { diskFile?: string | null }): MachineLayout {
    const l = machineLayout(this.home, rec.id);
    // a fork moves the machine onto a new overlay (the old one froze as its clones' base)
    return rec.diskFile ? { ...l, disk: path.join(l.dir, rec.diskFile) } : l;
  }

  /** Register a machine and build its disk. A failure removes everything it made. */
  async create(spec: Smolfile, o: CreateOptions = {}): Promise<MachineRecord & { imageConfirmed?: Promise<boolean> }> {
    checkVolumes(volumesOf(spec));
    refuseForkableVolumes(spec, spec.fork.enabled);
    const id = newMachineId();
    const name = o.name ?? `${o.ephemeral ? 'run' : 'vm'}-${id.slice(0, 6)}`;
    // labels live in their own registry column (ls filters on them), not in the machine's spec
    const { labels, ...machineSpec } = spec;
    spec = machineSpec;
    const rec = this.store.insert({ id, name, state: 'creating', ephemeral: !!o.ephemeral, spec, imageId: null, ownerPid: process.pid, parent: o.parent ?? null, generation: 0, labels });
    const layout = this.layout(rec);
    try {
      fs.mkdirSync(layout.dir, { recursive: true });
      const diskless = this.isDiskless(rec);
      const { imageId, imageConfirmed } = diskless ? { imageId: 'default' } : await this.engine.prepareDisk(spec, layout, o.onProgress, { speculative: o.speculativeImage });
      // a persistent machine is nobody's once made; until then its creator's pid marks it half-made (reconcile.ts)
      this.store.update(id, { state: 'stopped', imageId, ...(o.ephemeral ? {} : { ownerPid: null }) });
      return { ...this.store.get(id), imageConfirmed };
    } catch (err) {
      this.removeFiles(layout);
      this.store.delete(id);
      throw mapFsError(err, `creating machine "${name}"`);
    }
  }

  /** Throwaway machines on the default image boot from the initramfs alone. */
  isDiskless(rec: MachineRecord): boolean {
    return rec.ephemeral && rec.spec.image === 'default';
  }

  async start(nameOrId: string, o: StartOptions = {}): Promise<MachineRecord & { channel?: OpenChannel }> {
    let rec = this.refresh(this.store.get(nameOrId));
    if (rec.state === 'running') throw new ConflictError(`machine "${rec.name}" is already running`);
    // a paused machine continues where it was (its saved state, or its frozen QEMU) rather than booting again
    if (rec.state === 'paused') return (await import('./pause.js')).resumeMachine(this, rec.id);
    if (!o.fsHotplug) refuseForkableVolumes(rec.spec, o.forkable ?? rec.spec.fork.enabled, rec.name);
    const unlock = this.store.lock(rec.id, 'start', rec.name);
    const layout = this.layout(rec);
    try {
      this.store.update(rec.id, { state: 'starting', lastError: null });
      fs.mkdirSync(layout.runDir, { recursive: true });
      const forkable = o.forkable ?? rec.spec.fork.enabled;
      const resumed = fs.existsSync(resumePlanFile(layout)) ? await this.resume(rec, layout, o) : null;
      if (resumed) {
        this.store.update(rec.id, { state: 'running', booted: true });
        rec = this.store.get(rec.id);
        if (o.keepChannel) return { ...rec, channel: resumed };
        resumed.ch.close();
        resumed.release();
        return rec;
      }
      // after the resume hook: a resuming machine maps its saved RAM and needs no room there
      if (forkable && !shmHasRoom(rec.spec.memory)) {
        throw new PrerequisiteError(`machine "${rec.name}" cannot start forkable: /dev/shm has less than its ${rec.spec.memory} MiB free (its RAM must live there to be shared with clones)`, {
          where: rec.name, hint: 'Give /dev/shm more room (e.g. docker run --shm-size=1g, or mount -o remount,size=2G /dev/shm), or start it without --forkable.',
        });
      }
      // a RAM file left by an earlier forkable boot is stale, and QEMU refuses one of another size (after
      // `machine update --mem`); a clone of a held fork that maps it keeps its mapping when it is unlinked
      if (forkable) fs.rmSync(layout.memFile, { force: true });
      // a fork clone never takes its parent's host ports, also when it boots again later (docs/network.md)
      const pid = await this.engine.launch(rec.spec, layout, { diskless: this.isDiskless(rec), forkable, onProgress: o.onProgress, publishPorts: !rec.parent && !rec.forkPoint, fsHotplug: o.fsHotplug });
      this.store.update(rec.id, { pid, startedAt: Date.now() });
      o.onProgress?.('waiting for the guest agent');
      const release = this.store.lock(`${rec.id}#p0`, 'channel', rec.name);
      let ch: GuestChannel | undefined;
      try {
        ch = await this.waitReady(rec, layout, pid, o.bootTimeoutMs ?? DEFAULT_BOOT_TIMEOUT_MS);
        if (!rec.booted) await this.firstBoot(rec, ch, o.onProgress);
        // a persistent root keeps /etc/hostname, but the kernel's hostname and clock start over each boot
        else await ch.configure({ hostname: rec.name, timeMs: Date.now() }).catch(() => undefined);
        // without the helper a fork still works; only the fork-point handshake is missing
        if (forkable && o.forkHelper !== false) await installForkHelper(ch).catch((e: unknown) => o.onProgress?.(`smol-fork-ready not installed: ${(e as Error).message}`));
      } catch (err) {
        ch?.close();
        release();
        throw err;
      }
      this.store.update(rec.id, { state: 'running', booted: true });
      rec = this.store.get(rec.id);
      if (forkable && o.forkHelper !== false && !this.isDiskless(rec)) await this.prepareSpare(rec, layout);
      if (o.keepChannel) return { ...rec, channel: { ch, release } };
      ch.close();
      release();
      return rec;
    } catch (err) {
      const cur = this.store.get(rec.id);
      if (cur.pid) await this.engine.terminate(cur.pid, layout, 0).catch(() => undefined);
      this.store.update(rec.id, { state: 'stopped', pid: null, lastError: (err as Error).message });
      throw err;
    } finally {
      unlock();
    }
  }

  /** A machine made from a memory-carrying artifact continues its saved state instead of booting (once; null: boot it). */
  private async resume(rec: MachineRecord, layout: MachineLayout, o: StartOptions): Promise<OpenChannel | null> {
    const { resumeMachine } = await import('./resume.js'); // the artifact code loads only when a plan exists
    return resumeMachine(this, rec, layout, { timeoutMs: Math.min(o.bootTimeoutMs ?? DEFAULT_BOOT_TIMEOUT_MS, RESTORE_TIMEOUT_MS), onProgress: o.onProgress });
  }

  private async waitReady(rec: MachineRecord, layout: MachineLayout, pid: number, timeoutMs: number): Promise<GuestChannel> {
    const deadline = Date.now() + timeoutMs;
    let lastErr: unknown;
    while (Date.now() < deadline) {
      if (!pidAlive(pid)) {
        throw new BootError(`boot failed: QEMU exited before machine "${rec.name}" was ready`, { where: rec.name, hint: `Console output:\n${this.engine.consoleTail(layout, 20)}` });
      }
      try {
        return await this.engine.connect(layout, 0, Math.min(BOOT_CONNECT_ATTEMPT_MS, Math.max(100, deadline - Date.now())));
      } catch (err) {
        lastErr = err;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    throw new BootError(`boot failed: machine "${rec.name}" did not become ready within ${Math.round(timeoutMs / 1000)}s`, {
      where: rec.name, cause: lastErr, hint: `Last console lines:\n${this.engine.consoleTail(layout, 20)}`,
    });
  }

  private async firstBoot(rec: MachineRecord, ch: GuestChannel, onProgress?: Progress): Promise<void> {
    await ch.configure({ hostname: rec.name, machineId: crypto.randomBytes(16).toString('hex'), timeMs: Date.now() }).catch(() => undefined);
    for (const [i, cmd] of rec.spec.init.entries()) {
      onProgress?.(`init ${i + 1}/${rec.spec.init.length}: ${cmd}`);
      const h = await ch.exec({ argv: ['/bin/sh', '-c', cmd], env: rec.spec.env, cwd: rec.spec.workdir });
      h.stdin.end();
      const out: Buffer[] = [];
      h.stdout.on('data', (d: Buffer) => out.push(d));
      h.stderr.on('data', (d: Buffer) => out.push(d));
      const res = await h.exit;
      if (res.code !== 0) {
        throw new BootError(`init command ${i + 1} failed (exit ${res.code ?? res.signal}): ${cmd}`, { where: rec.name, hint: Buffer.concat(out).toString().trim().split('\n').slice(-10).join('\n') });
      }
    }
  }

  /** Open a channel to a running machine on a free agent port. Several smol processes may do this at once. */
  async channel(nameOrId: string): Promise<{ rec: MachineRecord; ch: GuestChannel; release: () => void }> {
    const rec = this.refresh(this.store.get(nameOrId));
    if (rec.state === 'crashed') throw new GuestChannelError(`machine "${rec.name}" has crashed (its QEMU process is gone)`, { hint: `Remove it with: smol machine rm ${rec.name}, or start it again.` });
    if (rec.state === 'paused') throw new ConflictError(`machine "${rec.name}" is paused`, { where: rec.name, hint: `Resume it first: smol machine resume ${rec.name}` });
    if (rec.state !== 'running') throw new ConflictError(`machine "${rec.name}" is not running (state: ${rec.state})`, { hint: `Start it first: smol machine start ${rec.name}` });
    const layout = this.layout(rec);
    const deadline = Date.now() + CHANNEL_WAIT_MS;
    for (;;) {
      for (let port = 0; port < AGENT_PORTS; port++) {
        const key = `${rec.id}#p${port}`;
        if (this.portsInUse.has(key)) continue;
        let unlock: () => void;
        try {
          unlock = this.store.lock(key, 'channel', rec.name);
        } catch (err) {
          if (err instanceof ConflictError) continue;
          throw err;
        }
        this.portsInUse.add(key);
        let released = false;
        const release = () => {
          if (released) return; // a second call must not free the port for a channel opened on it since
          released = true;
          this.portsInUse.delete(key);
          unlock();
        };
        try {
          const ch = await this.engine.connect(layout, port, AGENT_HELLO_TIMEOUT_MS);
          return { rec, ch, release };
        } catch (err) {
          release();
          if (!pidAlive(rec.pid)) {
            this.store.update(rec.id, { state: 'crashed' });
            throw new GuestChannelError(`machine "${rec.name}" has crashed (its QEMU process is gone)`, { cause: err });
          }
          throw err;
        }
      }
      if (Date.now() > deadline) throw new ConflictError(`machine "${rec.name}" has ${AGENT_PORTS} sessions open already`, { hint: 'Wait for one to finish.' });
      await new Promise((r) => setTimeout(r, 100));
    }
  }

  async stop(nameOrId: string, o: { force?: boolean; timeoutMs?: number } = {}): Promise<MachineRecord> {
    const rec = this.refresh(this.store.get(nameOrId));
    if (rec.state === 'stopped') return rec;
    const unlock = this.store.lock(rec.id, 'stop', rec.name);
    try {
      // as `docker stop` of a paused container: thawed to shut down cleanly, a save on disk discarded (docs/pause.md)
      if (rec.state === 'paused') await (await import('./pause.js')).thawForStop(this, rec);
      this.store.update(rec.id, { state: 'stopping' });
      await this.halt(rec, o.force ? 0 : o.timeoutMs ?? STOP_GRACE_MS);
      this.store.update(rec.id, { state: 'stopped', pid: null });
      return this.store.get(rec.id);
    } finally {
      unlock();
    }
  }

  /** A clone VMM waiting for this machine's first fork (fork/spare.ts); without one a fork just starts its own. */
  private async prepareSpare(rec: MachineRecord, layout: MachineLayout): Promise<void> {
    const insp = await this.engine.fork?.inspect(layout).catch(() => null);
    if (insp?.memory === 'shared' && insp.diskFile && insp.diskSize) await startSpare(this, rec, insp.diskFile, insp.diskSize);
  }

  /** Power the guest off cleanly (so its disk is consistent), or kill QEMU when graceMs is 0. */
  private async halt(rec: MachineRecord, graceMs: number): Promise<void> {
    const layout = this.layout(rec);
    // a smol killed between QEMU's start and the registry update leaves the pid only in QEMU's pidfile
    rec = rec.pid ? rec : { ...rec, pid: strayQemuPid(layout) };
    if (rec.pid && pidAlive(rec.pid) && graceMs > 0) {
      // only port 0's agent is PID 1 and can power the guest off; if it is busy, QMP quit below still
      // leaves a consistent disk because QEMU flushes its block layer on exit
      let release: (() => void) | undefined;
      try {
        release = this.store.lock(`${rec.id}#p0`, 'shutdown', rec.name);
        const ch = await this.engine.connect(layout, 0, SHUTDOWN_CONNECT_MS);
        await ch.shutdown().catch(() => undefined);
        ch.close();
      } catch {
        // an unresponsive or busy guest is terminated below
      } finally {
        release?.();
      }
    }
    if (rec.pid) await this.engine.terminate(rec.pid, layout, graceMs);
    await stopVirtiofsd(layout);
    // the volume stage is empty on the host; should it not be (a mount leaked), never recurse into it
    if (removeStage(virtiofsdFiles(layout).stage)) fs.rmSync(layout.runDir, { recursive: true, force: true });
    await discardSpare(this, rec).catch(() => undefined);
  }

  /** With cascade, clones (and theirs) go first; without it a machine with clones is refused (their disks sit on its). */
  /** Returns the names removed: with `cascade`, the clones (depth first) before the machine itself. */
  async remove(nameOrId: string, o: { force?: boolean; cascade?: boolean } = {}): Promise<string[]> {
    const rec = this.refresh(this.store.get(nameOrId));
    const clones = this.store.children(rec.id);
    if (clones.length && !o.cascade) {
      throw new ConflictError(`machine "${rec.name}" has ${clones.length} clone${clones.length > 1 ? 's' : ''} (${clones.map((c) => c.name).join(', ')})`, { hint: `Remove them first, or remove the whole family: smol machine rm --cascade --force ${rec.name}` });
    }
    if ((rec.state === 'running' || rec.state === 'starting' || rec.state === 'paused') && !o.force) {
      throw new ConflictError(`machine "${rec.name}" is running`, { hint: `Stop it first (smol machine stop ${rec.name}) or use --force.` });
    }
    const removed: string[] = [];
    for (const c of clones) removed.push(...await this.remove(c.id, o));
    const unlock = this.store.lock(rec.id, 'rm', rec.name);
    try {
      await this.halt(rec, 0);
      this.removeFiles(this.layout(rec));
      this.store.delete(rec.id);
      releaseForkPoints(this.store);
    } finally {
      unlock();
    }
    removed.push(rec.name);
    return removed;
  }

  /**
   * All machines, reconciled. Orphans are cleaned up on the way: ephemeral machines of a killed `smol run`, and
   * machines whose creator (`machine create`, `fork`) died or failed before they were made and could not remove them,
   * the files of forks killed before they recorded their fork point (fork/abandoned.ts), and what a machine
   * whose QEMU died still held.
   */
  async list(): Promise<MachineRecord[]> {
    const out: MachineRecord[] = [];
    for (const r of this.store.list()) {
      if (this.reapable(r)) {
        await this.remove(r.id, { force: true }).catch(() => undefined);
        continue;
      }
      const cur = this.refresh(r);
      if (cur.state === 'crashed') await this.releaseCrashed(cur).catch(() => undefined);
      out.push(cur);
    }
    await sweepAbandonedForks(this).catch(() => undefined);
    return out;
  }

  /**
   * The throwaway machines of `smol run`s that died (kill -9, a closed terminal). Each `smol run` reaps them:
   * their QEMU would otherwise run, and hold its memory, until someone's `smol machine ls`.
   */
  async reapDeadRuns(): Promise<string[]> {
    const reaped: string[] = [];
    for (const r of this.store.list()) {
      if (r.ephemeral && this.reapable(r)) reaped.push(...await this.remove(r.id, { force: true }).catch(() => []));
    }
    return reaped;
  }

  /** An orphan nobody works on; a `smol run -d --no-rm` machine outlives its supervisor on purpose (detach.ts). */
  private reapable(r: MachineRecord): boolean {
    return isOrphan(r) && this.store.lockHolder(r.id) === null && !isKeptDetached(this, r);
  }

  /**
   * What a machine whose QEMU died still holds: its warm spare (waiting for a fork that cannot come) and its
   * RAM file in /dev/shm (nothing can resume it; a start makes a new one). Clones of a held fork that map the
   * file keep their pages: unlinking does not unmap.
   */
  private async releaseCrashed(rec: MachineRecord): Promise<void> {
    const layout = this.layout(rec);
    if (strayQemuPid(layout) || !(hasSpare(this, rec) || fs.existsSync(layout.memFile) || virtiofsdPid(layout))) return;
    let unlock: () => void;
    try {
      unlock = this.store.lock(rec.id, 'release', rec.name);
    } catch {
      return; // another smol works on it (a start makes all of this anew)
    }
    try {
      await discardSpare(this, rec);
      fs.rmSync(layout.memFile, { force: true });
      await stopVirtiofsd(layout);
    } finally {
      unlock();
    }
  }

  /** The record as it really is: a running machine whose QEMU is gone is crashed. */
  refresh(rec: MachineRecord): MachineRecord {
    return reconcile(this.store, rec, () => hasPausedState(this.layout(rec)));
  }

  private removeFiles(layout: MachineLayout): void {
    if (!removeStage(virtiofsdFiles(layout).stage)) throw new SmolError(`removing ${virtiofsdFiles(layout).stage} failed: it is not empty (a volume still mounted there?)`);
    for (const p of [layout.dir, layout.runDir, layout.memFile]) {
      try {
        fs.rmSync(p, { recursive: true, force: true });
      } catch (err) {
        throw new SmolError(`removing ${p} failed: ${(err as Error).message}`);
      }
    }
  }
}

/**
 * A forkable machine is saved and restored by migration, and QEMU 7.2 refuses to migrate a vhost-user-fs
 * device ("not migratable"): volumes and fork cannot meet (docs/volumes.md).
 */
function refuseForkableVolumes(spec: Smolfile, forkable: boolean, name?: string): void {
  if (forkable && volumesOf(spec).length) {
    throw new UserError('a machine with volumes cannot be forkable', {
      where: name ?? '--forkable', hint: 'QEMU cannot save a virtiofs device\'s state, so fork and --with-memory packs cannot carry volumes. Drop --forkable (or fork.enabled), or the volumes.',
    });
  }
}
