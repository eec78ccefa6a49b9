/**
 * The real Engine: Debian's kernel + our initramfs, image bases with qcow2 overlays, the QEMU launcher,
 * and the agent client on the machine's virtio-serial ports.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Readable } from 'node:stream';
import type { Smolfile } from '../../smolfile/schema.js';
import { assetsHome, dataPaths } from '../../util/paths.js';
import { AgentClient } from '../agent/index.js';
import { consoleTail, selectLauncher, type QemuLauncher } from './select.js';
import type { Engine, ExecHandle, ExecRequest, GuestChannel, LaunchOptions, PreparedDisk, Progress } from '../engine.js';
import { createOverlay, resolveImage } from '../image/index.js';
import { registerHome } from '../image/homes.js';
import { findKernel } from '../kernel/index.js';
import { AGENT_PORTS, type MachineLayout } from '../layout.js';
import { bootFilesFor, isArtifactRef } from '../boot-files.js';
import { createQemuForkOps } from './fork-ops.js';
import { checkVolumes, volumesOf } from '../volumes/spec.js';
import { mountsOf, startVirtiofsd, stopVirtiofsd, VIRTIOFS_TAG, virtiofsdFiles } from '../volumes/virtiofsd.js';
import { plugSharedFs } from '../volumes/hotplug.js';
import { trace } from '../../util/trace.js';
import { QmpClient } from './qmp.js';
import { prepareNetwork } from '../net/index.js';
import { teardownEgress } from '../net/netns.js';
import { QEMU_QUIT_AFTER_GRACE_MS, QMP_CONNECT_MS } from '../limits.js';

/** virtiofsd still starting for a machine launched with fsHotplug, by machine dir: plugVolumes waits for it. */
const fsStarting = new Map<string, Promise<unknown>>();

/** Stops a virtiofsd that may still be starting (its start must settle first, or it would outlive the stop). */
async function stopFs(layout: MachineLayout, starting: Promise<unknown>): Promise<void> {
  fsStarting.delete(layout.dir);
  await starting.catch(() => undefined);
  await stopVirtiofsd(layout);
}

export interface QemuEngineOptions {
  /** One-line notices such as "KVM unusable: using TCG"; printed once per data dir by the caller. */
  notice?: (line: string) => void;
}

export function createQemuEngine(home: string, o: QemuEngineOptions = {}): Engine {
  const assets = assetsHome({ ...process.env, SMOL_HOME: home });
  let launcher: Promise<QemuLauncher> | undefined;
  const getLauncher = () => (launcher ??= selectLauncher({ notice: o.notice }));

  return {
    async prepareDisk(spec: Smolfile, layout: MachineLayout, onProgress?: Progress, po: { speculative?: boolean } = {}): Promise<PreparedDisk> {
      // before the overlay exists: another home's `image prune` must see this disk from its first byte
      registerHome(assets, home);
      onProgress?.(`resolving image ${spec.image}`);
      const sizeBytes = spec.disk ? spec.disk * 1024 * 1024 : undefined;
      const templateDir = path.join(dataPaths(home).cache, 'overlay-templates');
      if (isArtifactRef(spec.image)) {
        const { prepareArtifactImage } = await import('../pack-source.js'); // artifact code loads only when used
        const a = await prepareArtifactImage(spec.image, home, layout);
        if (a.notice) o.notice?.(a.notice);
        await createOverlay(a.base, layout.disk, { sizeBytes, templateDir });
        return { imageId: a.imageId };
      }
      const img = await resolveImage(spec.image, assets, { log: onProgress, speculative: po.speculative });
      await createOverlay(img.basePath, layout.disk, { sizeBytes, templateDir });
      return { imageId: img.id, imageConfirmed: img.confirmed };
    },

    async launch(spec: Smolfile, layout: MachineLayout, lo: LaunchOptions): Promise<number> {
      const q = await getLauncher();
      const boot = await bootFilesFor(layout, assets);
      const volumes = volumesOf(spec);
      if (volumes.length) {
        // the directories may have gone since create: say so before starting anything
        checkVolumes(volumes, undefined, { home, assets });
        lo.onProgress?.('starting virtiofsd');
      }
      const fsStart = volumes.length ? startVirtiofsd(layout, volumes, { home, assets }, path.basename(layout.dir)) : undefined;
      // a device plugged in later (plugVolumes) needs the socket only then: the daemon starts beside QEMU
      if (fsStart && lo.fsHotplug) {
        fsStart.catch(() => undefined);
        fsStarting.set(layout.dir, fsStart);
      }
      const sharedFs = lo.fsHotplug ? undefined : await fsStart;
      // a clone (fork, spare) shares its parent's policy but not its host ports: one socket cannot serve two guests
      const net = await prepareNetwork(spec, layout, { publish: lo.publishPorts !== false, onProgress: lo.onProgress })
        .catch(async (err: unknown) => { if (fsStart) await stopFs(layout, fsStart); throw err; });
      lo.onProgress?.('booting');
      let pid: number | undefined;
      try {
        pid = (await q.launch({
          nic: net.nic, netns: net.netns,
          machineDir: layout.dir, runDir: layout.runDir, name: path.basename(layout.dir),
          kernelPath: boot.kernel, initrdPath: boot.initrd, memoryMiB: spec.memory, cpus: spec.cpus,
          disks: lo.diskless ? [] : [{ path: layout.disk, format: 'qcow2', id: 'root' }], rootDisk: !lo.diskless,
          net: spec.net, ports: AGENT_PORTS, channel: 'serial',
          memoryBackend: lo.clone ? { path: lo.clone.memFile, share: !!lo.clone.share } : lo.forkable ? { path: layout.memFile, share: true } : undefined,
          incomingDefer: !!lo.clone || !!lo.incoming, sharedFs, pciHotplug: !!(lo.fsHotplug && fsStart),
        })).pid;
        trace('qemu: launched');
        await net.afterLaunch();
        return pid;
      } catch (err) {
        if (pid) await q.kill(pid, 0);
        if (fsStart) await stopFs(layout, fsStart);
        await net.undo();
        throw err;
      }
    },

    async plugVolumes(spec: Smolfile, layout: MachineLayout) {
      const starting = fsStarting.get(layout.dir);
      fsStarting.delete(layout.dir);
      await starting; // its failure (virtiofsd exited, with its log's tail) is the run's
      const qmp = await QmpClient.connect(layout.qmpSocket, QMP_CONNECT_MS);
      try {
        await plugSharedFs(qmp, virtiofsdFiles(layout).socket, VIRTIOFS_TAG);
      } finally {
        qmp.close();
      }
      return { tag: VIRTIOFS_TAG, mounts: mountsOf(volumesOf(spec)) };
    },

    async connect(layout: MachineLayout, port: number, timeoutMs: number): Promise<GuestChannel> {
      const client = await AgentClient.connectUnix(layout.agentSockets[port], { timeoutMs, name: path.basename(layout.dir) });
      return channelOf(client, port);
    },

    async terminate(pid: number, layout: MachineLayout, graceMs: number): Promise<void> {
      const q = await getLauncher();
      if (graceMs > 0) {
        if (!(await q.waitExit(pid, graceMs))) await q.quit(layout.qmpSocket, pid, QEMU_QUIT_AFTER_GRACE_MS);
      } else {
        await q.kill(pid, 0);
      }
      // virtiofsd exits when QEMU hangs up; this also covers a QEMU that never connected, or one still starting
      const starting = fsStarting.get(layout.dir);
      if (starting) await stopFs(layout, starting);
      else await stopVirtiofsd(layout);
      await teardownEgress(layout);
    },

    consoleTail(layout: MachineLayout, lines: number): string {
      return consoleTail(layout.consoleLog, lines);
    },

    fork: createQemuForkOps(getLauncher),
  };
}

function channelOf(client: AgentClient, port: number): GuestChannel {
  return {
    port,
    onStream: (service, handler) => client.onStream(service, handler),
    async exec(req: ExecRequest): Promise<ExecHandle> {
      const s = client.exec({ argv: req.argv, env: req.env, cwd: req.cwd, tty: req.tty, rows: req.rows, cols: req.cols });
      return {
        stdout: s.stdout, stderr: s.stderr, stdin: s.stdin,
        signal: (sig) => s.signal(sig), resize: (r, c) => s.resize(r, c), exit: s.exit,
      };
    },
    async putFile(source, guestPath, mode) {
      await client.putFile(source as Readable, guestPath, mode, { mkdirs: true });
    },
    getFile: (guestPath) => client.getFile(guestPath),
    configure: (c) => client.configure({ hostname: c.hostname, machineId: c.machineId, entropy: c.entropy, clock: c.timeMs, forkRelease: c.forkRelease, volumes: c.volumes }),
    shutdown: () => client.shutdown(),
    close: () => client.close(),
  };
}

/** True once the kernel and agent exist, without fetching anything. */
export async function assetsReady(home: string): Promise<boolean> {
  const kernel = await findKernel(assetsHome({ ...process.env, SMOL_HOME: home }));
  return !!kernel && fs.existsSync(kernel.vmlinux);
}
