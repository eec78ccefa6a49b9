/**
 * The seam between machine bookkeeping (service.ts) and the parts that make a VM real: images and disks,
 * QEMU, the guest agent channel. The service only talks to this interface (its tests: a fake, test/helpers/fake-engine.ts).
 */
import type { ConfigureRequest } from './agent/payloads.js';
import type { Smolfile } from '../smolfile/schema.js';
import type { MachineLayout } from './layout.js';
import type { ForkOps } from './fork/types.js';
import type { SharedFs } from './volumes/virtiofsd.js';

export type Progress = (message: string) => void;

export interface PreparedDisk {
  imageId: string;
  /**
   * Set when the image id was taken on trust from a cache (a rootfs directory's last digest) and is being
   * checked meanwhile: false means the image has changed, and nothing the user sees may run on this disk.
   */
  imageConfirmed?: Promise<boolean>;
}

export interface LaunchOptions {
  /** Boot from the initramfs alone (tmpfs root): the fastest path for throwaway machines on the default image. */
  diskless: boolean;
  forkable: boolean;
  onProgress?: Progress;
  /** Launch as a fork clone: map this memory template copy-on-write and wait paused for the state (fork/). */
  clone?: { memFile: string; share?: boolean };
  /** Wait paused for a saved state, on ordinary (anonymous) RAM: a machine paused to disk that was not forkable. */
  incoming?: boolean;
  /**
   * Volumes come later (volumes/hotplug.ts): boot with an empty PCIe root port and no virtiofs device, so the
   * machine can be saved and restored as a boot snapshot; plugVolumes adds the device once the guest runs.
   */
  fsHotplug?: boolean;
  /** Bind the spec's published ports (default true); a fork clone shares its parent's policy, not its host ports. */
  publishPorts?: boolean;
}

export interface ExecRequest {
  argv: string[];
  env?: Record<string, string>;
  cwd?: string;
  tty?: boolean;
  rows?: number;
  cols?: number;
}

export interface ExecHandle {
  stdout: NodeJS.ReadableStream;
  stderr: NodeJS.ReadableStream;
  stdin: NodeJS.WritableStream;
  signal(sig: NodeJS.Signals): void;
  resize(rows: number, cols: number): void;
  exit: Promise<{ code: number | null; signal: string | null }>;
}

export interface GuestChannel {
  /** The agent port this channel talks to (its CUDA socket is /run/smol/cuda-<port>.sock). */
  readonly port: number;
  /** Handle guest-initiated forwarded streams (e.g. "cuda"). */
  onStream(service: string, handler: (stream: import('node:stream').Duplex) => void): void;
  exec(req: ExecRequest): Promise<ExecHandle>;
  putFile(source: NodeJS.ReadableStream, guestPath: string, mode: number): Promise<void>;
  getFile(guestPath: string): Promise<{ size: number; mode: number; stream: NodeJS.ReadableStream }>;
  /** `released`: waiters the fork release woke, null when none was asked for. */
  configure(opts: { hostname?: string; machineId?: string; entropy?: Buffer; timeMs?: number; forkRelease?: { dir: string; envFile: string; text: string }; volumes?: ConfigureRequest['volumes'] }): Promise<{ released: number | null }>;
  shutdown(): Promise<void>;
  close(): void;
}

export interface Engine {
  /** Resolve the image and create the machine's disk (a qcow2 overlay on the shared base). */
  prepareDisk(spec: Smolfile, layout: MachineLayout, onProgress?: Progress, o?: { speculative?: boolean }): Promise<PreparedDisk>;
  /** Start QEMU detached from this process; resolves with its pid once it is running. */
  launch(spec: Smolfile, layout: MachineLayout, opts: LaunchOptions): Promise<number>;
  /** Connect to the agent on one of the machine's ports and complete the handshake. */
  connect(layout: MachineLayout, port: number, timeoutMs: number): Promise<GuestChannel>;
  /** Plugs the virtiofs device into a machine launched with fsHotplug and says what the guest must mount. */
  plugVolumes?(spec: Smolfile, layout: MachineLayout): Promise<Pick<SharedFs, 'tag' | 'mounts'>>;
  /** Ask QEMU to quit (QMP), then kill it if it does not exit in time. */
  terminate(pid: number, layout: MachineLayout, graceMs: number): Promise<void>;
  /** Last lines of the guest console, for error messages. */
  consoleTail(layout: MachineLayout, lines: number): string;
  /** Live fork support, where the VMM has it. */
  fork?: ForkOps;
}
