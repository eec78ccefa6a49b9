/**
 * Live fork on QEMU (DESIGN.md §3): RAM in a shared file, migration with x-ignore-shared so the state is the
 * device state only, clones mapping the file copy-on-write and loading the state with `-incoming defer`.
 */
import { once } from 'node:events';
import { pipeline } from 'node:stream/promises';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { ForkError, SnapshotRestoreError, TimeoutError } from '../../errors/index.js';
import type { QemuLauncher } from './launcher.js';
import { findQemu } from './detect.js';
import { QmpClient } from './qmp.js';
import { strayQemuPid, type MachineLayout } from '../layout.js';
import { dieAt } from '../fork/faults.js';
import { armSparseCopy } from '../fork/sparse-copy.js';
import type { CaptureRequest, CaptureResult, ForkOps, Inspection, MemoryMode, PreparedCapture, PrimedRestore, VmIdentity } from '../fork/types.js';
import { FORK_CANCEL_SAVE_MS, FORK_SAVE_STATE_MS, LAYER_MERGE_MS, QMP_CONNECT_MS } from '../limits.js';

/** The default 32 MiB/s cap would make even a device-state-only save slow; the file is local. */
const MAX_BANDWIDTH = 64 * 1024 ** 3;
const ROOT_DEVICE = 'root';

interface BlockInfo { device: string; inserted?: { file: string; image: { 'virtual-size': number } } }
interface MigrateInfo { status?: string; 'error-desc'?: string }

const now = () => performance.now();

export function createQemuForkOps(getLauncher: () => Promise<QemuLauncher>): ForkOps {
  let qemuVersion: Promise<string> | undefined;
  return {
    async inspect(layout: MachineLayout): Promise<Inspection> {
      const qmp = await QmpClient.connect(layout.qmpSocket, QMP_CONNECT_MS);
      try {
        const v = qmp.version;
        const kvm = await qmp.execute<{ enabled: boolean }>('query-kvm');
        const cpus = await qmp.execute<{ 'qom-path': string }[]>('query-cpus-fast');
        const cpuType = cpus[0] ? await qmp.execute<string>('qom-get', { path: cpus[0]['qom-path'], property: 'type' }) : 'unknown';
        const mem = await qmp.execute<{ 'base-memory': number }>('query-memory-size-summary');
        let memory: MemoryMode = 'none';
        try {
          memory = (await qmp.execute<boolean>('qom-get', { path: '/objects/mem', property: 'share' })) ? 'shared' : 'private';
        } catch {
          // no file-backed memory object: started without --forkable
        }
        const status = await qmp.execute<{ running: boolean }>('query-status');
        const root = (await qmp.execute<BlockInfo[]>('query-block')).find((b) => b.device === ROOT_DEVICE)?.inserted;
        return {
          vm: { qemu: v ? `${v.major}.${v.minor}.${v.micro}` : 'unknown', accel: kvm.enabled ? 'kvm' : 'tcg', cpu: cpuType.replace(/-x86_64-cpu$/, ''), memoryMiB: Math.round(mem['base-memory'] / 2 ** 20) },
          memory, running: status.running, diskDevice: root ? ROOT_DEVICE : null, diskSize: root?.image['virtual-size'] ?? null, diskFile: root?.file ?? null,
        };
      } finally {
        qmp.close();
      }
    },

    async identity(memoryMiB: number): Promise<VmIdentity> {
      const b = await getLauncher();
      qemuVersion ??= findQemu().then((q) => q?.version ?? 'unknown');
      // args.ts runs TCG guests on -cpu max and KVM guests on -cpu host
      return { qemu: await qemuVersion, accel: b.accel, cpu: b.accel === 'kvm' ? 'host' : 'max', memoryMiB };
    },

    async capture(layout: MachineLayout, req: CaptureRequest): Promise<CaptureResult> {
      return (await prepareCapture(layout, req)).take();
    },

    prepareCapture,

    async resumeAbandoned(layout: MachineLayout): Promise<boolean> {
      const qmp = await QmpClient.connect(layout.qmpSocket, QMP_CONNECT_MS);
      try {
        if ((await qmp.execute<{ running: boolean }>('query-status')).running) return false;
        // a save the dead fork started may still be writing its (now unwanted) state file
        const m = await qmp.execute<MigrateInfo>('query-migrate');
        if (m.status === 'active' || m.status === 'setup' || m.status === 'device' || m.status === 'cancelling') {
          if (m.status !== 'cancelling') await qmp.execute('migrate_cancel');
          await waitMigration(qmp, FORK_CANCEL_SAVE_MS, 'cancelling the abandoned save').catch(() => undefined);
        }
        await qmp.execute('cont');
        return true;
      } finally {
        qmp.close();
      }
    },

    async restore(layout: MachineLayout, stateFile: string, timeoutMs: number): Promise<void> {
      const primed = await primeRestore(layout, timeoutMs);
      await primed.restore(stateFile, timeoutMs);
    },

    primeRestore,

    async commitLayers(layout: MachineLayout, top: string, base: string): Promise<void> {
      const qmp = await QmpClient.connect(layout.qmpSocket, QMP_CONNECT_MS);
      const job = `smol-merge-${Date.now().toString(36)}`;
      try {
        // an intermediate commit: the guest keeps running on its top overlay, which QEMU re-points at base;
        // auto-dismiss off so a failed job stays to be read
        await qmp.execute('block-commit', { 'job-id': job, device: ROOT_DEVICE, top, base, 'auto-dismiss': false, speed: 0 });
        const deadline = Date.now() + LAYER_MERGE_MS;
        for (;;) {
          const j = (await qmp.execute<JobInfo[]>('query-jobs')).find((x) => x.id === job);
          if (!j) throw new ForkError(`merging disk layers failed: job ${job} vanished`);
          if (j.status === 'concluded') {
            await qmp.execute('job-dismiss', { id: job });
            if (j.error) throw new ForkError(`merging disk layers ${path.basename(top)}…${path.basename(base)} failed: ${j.error}`);
            return;
          }
          if (Date.now() > deadline) throw new TimeoutError(`merging disk layers did not finish within ${LAYER_MERGE_MS / 1000}s`);
          await new Promise((r) => setTimeout(r, 10));
        }
      } finally {
        qmp.close();
      }
    },
  };
}

/**
 * Everything of a capture that needs no pause: the copier (spawning from node costs more than the copy's own
 * start), the control connection and its settings, and the socket the state will come through.
 */
async function prepareCapture(layout: MachineLayout, req: CaptureRequest): Promise<PreparedCapture> {
  const copy = req.memCopy ? armSparseCopy(layout.memFile, req.memCopy) : null;
  let sink: StateSink | undefined;
  let qmp: QmpClient | undefined;
  const close = () => {
    copy?.cancel();
    sink?.close();
    qmp?.close();
  };
  let frozenDisk: string | null;
  try {
    qmp = await QmpClient.connect(layout.qmpSocket, QMP_CONNECT_MS);
    await qmp.execute('migrate-set-capabilities', { capabilities: [{ capability: 'x-ignore-shared', state: true }] });
    await qmp.execute('migrate-set-parameters', { 'max-bandwidth': MAX_BANDWIDTH });
    const root = (await qmp.execute<BlockInfo[]>('query-block')).find((b) => b.device === ROOT_DEVICE)?.inserted;
    frozenDisk = req.nextDisk && root ? root.file : null;
    sink = await receiveState(path.join(layout.runDir, 'save.sock'), req.stateFile);
  } catch (err) {
    close();
    throw err;
  }
  const [ctl, state] = [qmp, sink];
  return {
    async take(): Promise<CaptureResult> {
      const steps: Record<string, number> = {};
      try {
        const t0 = now();
        await ctl.execute('stop');
        steps.stop = now() - t0;
        let resumed = false;
        try {
          // The vCPUs are stopped and `stop` drained the disks' requests, so nothing writes guest RAM until
          // `cont`: the parent then resumes into the shared file, and the clones get a copy of it as it is now.
          // The copy runs beside the disk snapshot and the device-state save, which touch no guest RAM.
          const tc = now();
          const copied = copy?.start().then(() => { steps.memCopy = now() - tc; });
          copied?.catch(() => undefined); // awaited below, after the save
          if (req.nextDisk && frozenDisk) {
            const t = now();
            // mode existing: the new overlay names the frozen file as its backing already (qemu-img create -u)
            await ctl.execute('blockdev-snapshot-sync', { device: ROOT_DEVICE, 'snapshot-file': req.nextDisk, format: 'qcow2', mode: 'existing' });
            dieAt('in-pause');
            req.onDiskMoved?.(frozenDisk);
            steps.snapshot = now() - t;
          }
          const t = now();
          // into a socket smol listens on, not `exec:cat`: that forks QEMU (its guest RAM and code cache
          // mapped) and starts a shell and cat, all inside the pause and beside the copy on the same cores
          await ctl.execute('migrate', { uri: `unix:${state.path}` });
          await waitMigration(ctl, FORK_SAVE_STATE_MS, 'saving the device state');
          await state.written;
          steps.save = now() - t;
          await copied;
        } catch (err) {
          await ctl.execute('cont').then(() => { resumed = true; }, () => undefined);
          throw err;
        }
        if (!req.hold && !resumed) {
          const t = now();
          await ctl.execute('cont');
          steps.cont = now() - t;
        }
        return { frozenDisk, pausedMs: now() - t0, stateBytes: fs.statSync(req.stateFile).size, steps };
      } finally {
        close();
      }
    },
    close,
  };
}

interface JobInfo { id: string; status: string; error?: string }

/** Connects to a waiting clone's QEMU and sets the capability the state needs; the state comes later. */
async function primeRestore(layout: MachineLayout, timeoutMs: number): Promise<PrimedRestore> {
  // the clone's QEMU was started ahead; if it died meanwhile, say so now rather than at the timeout
  const pid = strayQemuPid(layout);
  let conn: QmpClient | undefined;
  try {
    conn = await QmpClient.connect(layout.qmpSocket, timeoutMs, () => pid !== null && strayQemuPid(layout) === pid);
    await conn.execute('migrate-set-capabilities', { capabilities: [{ capability: 'x-ignore-shared', state: true }] });
  } catch (err) {
    conn?.close();
    throw new SnapshotRestoreError(`restoring the fork state failed: ${(err as Error).message}`, { cause: err });
  }
  const qmp = conn;
  return {
    async restore(stateFile: string, loadTimeoutMs: number): Promise<void> {
      try {
        // QEMU listens, smol writes the state file in: `exec:cat` would fork QEMU (256 MiB mapped) and start a
        // shell and cat, ~15-30 ms of a clone start under TCG
        const sock = path.join(layout.runDir, 'incoming.sock');
        fs.rmSync(sock, { force: true });
        await qmp.execute('migrate-incoming', { uri: `unix:${sock}` });
        await sendFile(sock, stateFile);
        await waitMigration(qmp, loadTimeoutMs, 'loading the device state');
        fs.rmSync(sock, { force: true });
        await qmp.execute('cont');
      } catch (err) {
        if (err instanceof SnapshotRestoreError) throw err;
        throw new SnapshotRestoreError(`restoring the fork state failed: ${(err as Error).message}`, { cause: err });
      } finally {
        qmp.close();
      }
    },
    close: () => qmp.close(),
  };
}

/**
 * Writes a state file (tens of KB) into QEMU's listening Unix socket. QEMU hangs up as soon as it has read
 * the stream's end marker, perhaps before our end is acknowledged, so a reset after the connect is no error
 * here: query-migrate says whether the load worked.
 */
async function sendFile(sock: string, file: string): Promise<void> {
  const data = fs.readFileSync(file);
  const conn = net.connect(sock);
  try {
    await once(conn, 'connect');
  } catch (err) {
    conn.destroy();
    throw err;
  }
  conn.on('error', () => undefined);
  conn.end(data);
}

interface StateSink {
  /** The socket QEMU's migration connects to. */
  path: string;
  /** Settles once the stream QEMU sent is in the file and QEMU has hung up. */
  written: Promise<void>;
  close(): void;
}

/** Listens on `sock` for one migration stream and writes it to `file` (tens of KB of device state). */
async function receiveState(sock: string, file: string): Promise<StateSink> {
  fs.rmSync(sock, { force: true });
  const server = net.createServer();
  const written = new Promise<void>((resolve, reject) => {
    server.once('connection', (conn) => {
      server.close(); // one stream: nobody else gets to write the state
      pipeline(conn, fs.createWriteStream(file)).then(resolve, reject);
    });
  });
  written.catch(() => undefined); // awaited only after the migration completed
  server.listen(sock);
  await once(server, 'listening');
  return { path: sock, written, close: () => { server.close(); fs.rmSync(sock, { force: true }); } };
}

async function waitMigration(qmp: QmpClient, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const s = await qmp.execute<MigrateInfo>('query-migrate');
    if (s.status === 'completed') return;
    if (s.status === 'failed' || s.status === 'cancelled') {
      throw new ForkError(`${what} failed: migration ${s.status}${s['error-desc'] ? `: ${s['error-desc']}` : ''}`);
    }
    if (Date.now() > deadline) throw new TimeoutError(`${what} did not finish within ${Math.round(timeoutMs / 1000)}s`);
    await new Promise((r) => setTimeout(r, 2));
  }
}
