/** `smol run`: an ephemeral machine that exists for one command and is removed however the command ends. */
import { BootError, ConflictError, NotFoundError } from '../errors/index.js';
import type { Smolfile } from '../smolfile/schema.js';
import type { ExecRequest, Progress } from './engine.js';
import { execOnChannel, interrupted, type ExecIo, type ExecResult } from './exec.js';
import { shmHasRoom } from './layout.js';
import type { MachineRecord } from './store/machines.js';
import type { MachineService, OpenChannel } from './service.js';
import { DEFAULT_BOOT_TIMEOUT_MS, RESTORE_TIMEOUT_MS, RUN_SETTLE_MS } from './limits.js';
import { attachGpu } from './gpu.js';
import { deliverSecrets, resolveSecrets, type ResolvedSecrets } from './secrets.js';
import { mergeSecrets, type SecretDecl } from '../smolfile/secrets.js';
import { checkPortsFree } from './net/ports.js';
import { captureSnapshot, dropSnapshot, findSnapshot, snapshotEligible, snapshotKey, startFromSnapshot, type RestoredMachine, type SnapshotKey } from './boot-snapshot.js';
import { trace } from '../util/trace.js';
import { mountInGuest } from './volumes/hotplug.js';

export interface RunOptions {
  onProgress?: Progress;
  bootTimeoutMs?: number;
  name?: string;
  /** Boot the kernel even when a boot snapshot could be restored (and do not save one). */
  coldBoot?: boolean;
  /** Aborting kills the machine at once (whatever it is doing) and the run fails with InterruptedError. */
  signal?: AbortSignal;
  /** Secrets for this run beyond the spec's own declarations (names; values are read from the host now). */
  secrets?: SecretDecl;
}

export async function runEphemeral(svc: MachineService, spec: Smolfile, req: ExecRequest, io: ExecIo, o: RunOptions = {}): Promise<ExecResult> {
  // a taken host port fails here, before anything is made
  await checkPortsFree(spec.ports ?? [], o.name);
  // a missing secret fails here too; values are delivered after boot (and after any boot snapshot is saved)
  const secrets = resolveSecrets(mergeSecrets(spec.secrets, o.secrets));
  trace('run: start');
  // beside this run, not before it: the machines of runs killed earlier (never this one: its owner lives)
  const reaping = svc.reapDeadRuns().catch(() => []);
  try {
    // a rootfs directory hashed before resolves on trust; its stat listing (begun at launch: cli/prefetch.ts)
    // is checked before the command runs
    const rec = await svc.create(spec, { ephemeral: true, name: o.name, onProgress: o.onProgress, speculativeImage: true });
    try {
      return await runCreated(svc, rec, req, io, { ...o, resolved: secrets, imageConfirmed: rec.imageConfirmed });
    } catch (err) {
      if (!(err instanceof StaleImage)) throw err;
      // the machine booted on the tree's last digest, the tree has changed since, and the command has not run
      o.onProgress?.(`image ${spec.image} changed since it was last hashed: hashing it again`);
      const fresh = await svc.create(spec, { ephemeral: true, name: o.name, onProgress: o.onProgress });
      return runCreated(svc, fresh, req, io, { ...o, resolved: secrets });
    }
  } finally {
    await reaping;
  }
}

/** Internal: the image a run booted was taken on trust and turned out stale; never reaches the user. */
class StaleImage extends Error {}

/**
 * Boot a created throwaway machine, run one command, then remove it (or, with `keep`, leave it stopped:
 * `smol run -d --no-rm`). A `smol machine stop` or `rm` of the machine meanwhile ends the command.
 */
export async function runCreated(svc: MachineService, rec: MachineRecord, req: ExecRequest, io: ExecIo, o: RunOptions & { keep?: boolean; resolved?: ResolvedSecrets; imageConfirmed?: Promise<boolean> } = {}): Promise<ExecResult> {
  const spec = rec.spec;
  // `run -d`'s supervisor reads them here, from the environment it inherited from the CLI
  const secrets = o.resolved ?? resolveSecrets(mergeSecrets(spec.secrets, o.secrets));
  const kill = () => {
    const pid = svc.store.find(rec.id)?.pid;
    if (pid) try { process.kill(pid, 'SIGKILL'); } catch { /* gone already */ }
  };
  o.signal?.addEventListener('abort', kill, { once: true });
  try {
    const { ch, release } = await bootForRun(svc, rec, o).catch((err: unknown) => { throw o.signal?.aborted ? interrupted(o.signal) : err; });
    if (o.imageConfirmed && !(await o.imageConfirmed)) {
      ch.close();
      release();
      throw new StaleImage();
    }
    if (o.imageConfirmed) trace('run: image confirmed');
    const gpu = spec.gpu ? await attachGpu(ch, { home: svc.home }).catch(async (err) => { ch.close(); release(); throw err; }) : undefined;
    try {
      trace('run: ready');
      await deliverSecrets(ch, secrets, svc.store, rec);
      return await execOnChannel(ch, { cwd: spec.workdir, ...req, env: { ...spec.env, ...gpu?.env, ...(req.env ?? {}), ...secrets.env } }, io);
    } finally {
      ch.close();
      release();
      await gpu?.close();
    }
  } finally {
    o.signal?.removeEventListener('abort', kill);
    trace('run: command done');
    await settle(svc, rec.id, !!o.keep);
    trace('run: removed');
  }
}

/** Remove (or stop) the machine once nobody else holds its lock; someone's `machine rm` may have beaten us. */
async function settle(svc: MachineService, id: string, keep: boolean): Promise<void> {
  const deadline = Date.now() + RUN_SETTLE_MS;
  for (;;) {
    try {
      if (keep) await svc.stop(id, { force: true });
      else await svc.remove(id, { force: true });
      return;
    } catch (err) {
      if (err instanceof NotFoundError) return;
      // a concurrent `smol machine stop` holds the lock for at most its grace period
      if (!(err instanceof ConflictError) || Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}

/**
 * Restore from the boot snapshot when there is a usable one; otherwise boot cold and save one on the way.
 * Volumes then come after the restore or the save (volumes/hotplug.ts), so the snapshot holds no virtiofs device.
 */
async function bootForRun(svc: MachineService, rec: MachineRecord, o: RunOptions): Promise<OpenChannel> {
  // a disk smol cannot read the header of just boots: the snapshot is an optimisation, never a reason to fail
  const k = o.coldBoot || !snapshotEligible(svc, rec) ? null : await snapshotKey(svc, rec).catch(() => null);
  const hotplug = !!k && !!rec.spec.volumes?.length;
  const opened = await bootOrRestore(svc, rec, o, k, hotplug);
  if (hotplug) {
    try {
      o.onProgress?.('mounting the volumes');
      // a restore plugs and mounts them as it goes; a cold boot saved the snapshot first, without them
      await (opened.volumesMounted ?? mountInGuest(opened.ch, await svc.engine.plugVolumes!(rec.spec, svc.layout(rec)), rec.name));
    } catch (err) {
      opened.ch.close();
      opened.release();
      throw err;
    }
  }
  return opened;
}

async function bootOrRestore(svc: MachineService, rec: MachineRecord, o: RunOptions, k: SnapshotKey | null, fsHotplug: boolean): Promise<OpenChannel & Pick<RestoredMachine, 'volumesMounted'>> {
  const cold = async (forkable: boolean) =>
    (await svc.start(rec.id, { keepChannel: true, forkable, forkHelper: false, onProgress: o.onProgress, bootTimeoutMs: o.bootTimeoutMs, fsHotplug })).channel!;
  if (!k) return cold(false);
  const snap = findSnapshot(svc.home, k);
  // with volumes the restore copies the snapshot's RAM to /dev/shm (boot-snapshot.ts): without room, boot
  if (snap && (!fsHotplug || shmHasRoom(rec.spec.memory))) {
    const timeoutMs = o.bootTimeoutMs ?? DEFAULT_BOOT_TIMEOUT_MS;
    const t0 = Date.now();
    try {
      return await startFromSnapshot(svc, rec, snap, { timeoutMs: Math.min(timeoutMs, RESTORE_TIMEOUT_MS), onProgress: o.onProgress });
    } catch (err) {
      if (o.signal?.aborted) throw interrupted(o.signal); // the snapshot is fine: we killed its machine
      if (Date.now() - t0 >= timeoutMs) {
        throw new BootError(`boot failed: machine "${rec.name}" did not become ready within ${timeoutMs / 1000}s (restoring its boot snapshot)`, { where: rec.name, cause: err, hint: 'Allow more time with --boot-timeout, or boot the kernel with --cold-boot.' });
      }
      // a snapshot that does not load never will: drop it, so the cold boot below saves a good one
      dropSnapshot(snap);
      o.onProgress?.(`boot snapshot unusable (${(err as Error).message}); booting`);
    }
  }
  if (o.signal?.aborted) throw interrupted(o.signal);
  if (!shmHasRoom(rec.spec.memory)) {
    o.onProgress?.(`not saving a boot snapshot: /dev/shm has less free space than the guest's ${rec.spec.memory} MiB`);
    return cold(false);
  }
  const ch = await cold(true);
  try {
    o.onProgress?.('saving the boot snapshot');
    await captureSnapshot(svc, svc.store.get(rec.id), k, ch.ch);
  } catch (err) {
    o.onProgress?.(`boot snapshot not saved: ${(err as Error).message}`);
  }
  return ch;
}
