/**
 * Starting and stopping one QEMU process: microvm, detached with -daemonize so machines outlive the CLI that
 * started them. The engine (engine.ts) and its fork operations (fork-ops.ts) are its only users.
 */
import { rm, mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { run } from '../../util/exec.js';
import { BootError, ConflictError, ValidationError, mapFsError } from '../../errors/index.js';
import { buildQemuArgs, type ChannelSpec } from './args.js';
import { buildCmdline } from './cmdline.js';
import { QmpClient } from './qmp.js';
import { AGENT_VSOCK_PORT } from '../image/init-script.js';
import { isRunning, waitGone } from './process.js';
import { CONSOLE_FD, consoleMaxBytes, keeperPidFile, withConsoleKeeper } from './console-keeper.js';
import type { LaunchResult, LaunchSpec } from './launch-spec.js';
import { KILLED_EXIT_MS, QEMU_LAUNCH_MS, QEMU_QUIT_CONNECT_MS, QEMU_QUIT_TIMEOUT_MS, QEMU_TERM_GRACE_AFTER_QUIT_MS, QEMU_TERM_GRACE_MS } from '../limits.js';

const UNIX_PATH_MAX = 107;

export interface QemuLauncherOptions {
  qemuPath: string;
  accel: 'kvm' | 'tcg';
  /** Host TSC kHz for tsc_early_khz under TCG (null: unknown; boots may then hang now and then). */
  tscKhz: number | null;
  vhostVsock: boolean;
}

export class QemuLauncher {
  readonly accel: 'kvm' | 'tcg';
  constructor(private readonly o: QemuLauncherOptions) { this.accel = o.accel; }

  /** Start a machine detached from this process; resolves once QEMU has daemonized and written its pidfile. */

  async launch(spec: LaunchSpec): Promise<LaunchResult> {
    const runDir = spec.runDir ?? spec.machineDir;
    const useVsock = spec.channel === 'vsock' || (spec.channel === 'auto' && this.o.vhostVsock);
    if (spec.channel === 'vsock' && !this.o.vhostVsock) {
      throw new ValidationError('vsock channel requested but /dev/vhost-vsock is unavailable', [{ path: 'channel', message: 'use "serial" or "auto"' }]);
    }
    const ports = Math.max(1, spec.ports ?? 1);
    const qmpPath = path.join(runDir, 'qmp.sock');
    const channelPaths = useVsock ? [] : Array.from({ length: ports }, (_, i) => path.join(runDir, `agent${i}.sock`));
    for (const p of [qmpPath, ...channelPaths]) {
      if (Buffer.byteLength(p) > UNIX_PATH_MAX) {
        throw new ValidationError(`socket path too long (${Buffer.byteLength(p)} bytes, max ${UNIX_PATH_MAX})`, [{ path: 'runDir', message: p }], { hint: 'Pass a shorter runDir (e.g. under /tmp).' });
      }
    }
    const consoleLogPath = path.join(spec.machineDir, 'console.log');
    const pidfilePath = path.join(spec.machineDir, 'qemu.pid');
    await mkdir(runDir, { recursive: true }).catch((e) => { throw mapFsError(e, 'creating the run directory'); });
    const maxBytes = consoleMaxBytes();
    await Promise.all([qmpPath, pidfilePath, keeperPidFile(consoleLogPath), ...channelPaths].map((p) => rm(p, { force: true })));
    const vsockCid = spec.vsockCid ?? 3;
    const channel: ChannelSpec = useVsock ? { kind: 'vsock', cid: vsockCid } : { kind: 'serial', socketPaths: channelPaths };
    const cmdline = buildCmdline({
      accel: this.accel, tscKhz: this.o.tscKhz, net: spec.net || !!spec.nic, root: spec.rootDisk ? 'vda' : null, vsock: useVsock,
      ports, hostname: spec.hostname, virtiofs: spec.virtiofs, pciHotplug: spec.pciHotplug, volumes: spec.sharedFs?.mounts, test: spec.testHook, extra: spec.extraCmdline,
    });
    const argv = buildQemuArgs({
      accel: this.accel, kernelPath: spec.kernelPath, initrdPath: spec.initrdPath, cmdline,
      memoryMiB: spec.memoryMiB, cpus: spec.cpus, disks: spec.disks, channel, net: spec.net, nic: spec.nic,
      qmpSocketPath: qmpPath, consoleFd: CONSOLE_FD, pidfilePath, daemonize: true,
      memoryBackend: spec.memoryBackend, incomingDefer: spec.incomingDefer, name: spec.name, pciHotplug: spec.pciHotplug,
      sharedFs: spec.sharedFs && { socketPath: spec.sharedFs.socketPath, tag: spec.sharedFs.tag },
    });
    // with -daemonize the parent exits once the machine is set up, so errors (bad disk, busy socket) surface here
    const qemu = spec.netns ? ['ip', 'netns', 'exec', spec.netns, this.o.qemuPath, ...argv] : [this.o.qemuPath, ...argv];
    const [file, args] = withConsoleKeeper({ consoleLogPath, append: !!spec.appendConsole, maxBytes }, qemu);
    const r = await run(file, args, { allowFailure: true, timeoutMs: QEMU_LAUNCH_MS });
    const fwd = /Could not set up host forwarding rule '([^']*)'/.exec(r.stderr);
    if (r.exitCode !== 0 && fwd) {
      throw new ConflictError(`host port in ${fwd[1]} is already in use (QEMU could not publish it)${spec.name ? ` for machine "${spec.name}"` : ''}`, { where: spec.name, hint: 'Pick another host port with -p, or stop what listens there.' });
    }
    if (r.exitCode !== 0) {
      throw new BootError(`boot failed: QEMU exited with ${r.exitCode}${spec.name ? ` for machine "${spec.name}"` : ''}: ${r.stderr.trim().split('\n').slice(-3).join(' ')}`, { where: spec.name });
    }
    const pid = Number((await readFile(pidfilePath, 'utf8').catch(() => '')).trim());
    if (!Number.isInteger(pid) || pid <= 1) throw new BootError(`boot failed: QEMU wrote no pidfile at ${pidfilePath}`, { where: spec.name });
    return {
      pid, accel: this.accel, qmpPath, channelPaths, channelPath: channelPaths[0] ?? null,
      vsock: useVsock ? { cid: vsockCid, port: AGENT_VSOCK_PORT } : null, consoleLogPath, pidfilePath, argv, cmdline,
    };
  }

  /** True while the process exists, is not a zombie, and is QEMU (not a recycled pid). */
  isAlive(pid: number): boolean {
    return isRunning(pid, 'qemu-system');
  }

  /** SIGTERM, then SIGKILL after graceMs; resolves when the process is gone. */
  async kill(pid: number, graceMs = QEMU_TERM_GRACE_MS): Promise<void> {
    if (!this.isAlive(pid)) return;
    try { process.kill(pid, 'SIGTERM'); } catch { return; }
    if (await waitGone(pid, 'qemu-system', graceMs)) return;
    try { process.kill(pid, 'SIGKILL'); } catch { return; }
    await waitGone(pid, 'qemu-system', KILLED_EXIT_MS);
  }

  /** Resolves true when the process exited within timeoutMs. */
  waitExit(pid: number, timeoutMs: number): Promise<boolean> {
    return waitGone(pid, 'qemu-system', timeoutMs);
  }

  /** Ask QEMU to quit over QMP, then wait for the process to go, and signal it if it does not. */
  async quit(qmpPath: string, pid: number, timeoutMs = QEMU_QUIT_TIMEOUT_MS): Promise<void> {
    if (!this.isAlive(pid)) return;
    const start = Date.now();
    try {
      const qmp = await QmpClient.connect(qmpPath, Math.min(QEMU_QUIT_CONNECT_MS, timeoutMs));
      // QEMU may close the socket before or after replying; either way it is on its way out
      await qmp.execute('quit', undefined, timeoutMs).catch(() => undefined);
      qmp.close();
    } catch { /* no QMP: fall through to signals */ }
    if (await this.waitExit(pid, Math.max(100, timeoutMs - (Date.now() - start)))) return;
    await this.kill(pid, QEMU_TERM_GRACE_AFTER_QUIT_MS);
  }
}
