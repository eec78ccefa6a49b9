/** What a VMM must offer for live fork; QEMU's implementation is qemu/fork-ops.ts. */
import type { MachineLayout } from '../layout.js';
import type { VmIdentity } from '../store/fork-points.js';

export type { VmIdentity };

/** How a running machine's RAM is held, which decides how it can be forked. */
export type MemoryMode =
  /** In a shared file (a forkable parent): the state carries device state only; clones map the file. */
  | 'shared'
  /** In a private copy-on-write mapping (a clone): the state must carry the RAM too. */
  | 'private'
  /** Anonymous memory: the machine was not started forkable. */
  | 'none';

export interface Inspection {
  vm: VmIdentity;
  memory: MemoryMode;
  running: boolean;
  diskDevice: string | null;
  diskSize: number | null;
  /** The root disk's current top file: what the capture freezes. */
  diskFile: string | null;
}

export interface CaptureRequest {
  /** Where the device state goes. */
  stateFile: string;
  /** A fresh overlay (already created on the current one) that the machine continues on; null for diskless machines. */
  nextDisk: string | null;
  /** Copy the shared memory file here before the machine resumes (null: no copy; the template is the file itself). */
  memCopy: string | null;
  /** Leave the machine paused after the capture. */
  hold: boolean;
  /** Called as soon as the machine writes to nextDisk, so the registry follows even if a later step fails. */
  onDiskMoved?: (frozenDisk: string) => void;
}

export interface CaptureResult {
  /** The overlay that froze (the clones' backing file), or null for a diskless machine. */
  frozenDisk: string | null;
  /** Wall time between stop and cont (or to the end of the capture with hold). */
  pausedMs: number;
  stateBytes: number;
  /** Timings of the steps inside the pause, for benchmarks and --json. */
  steps: Record<string, number>;
}

export interface ForkOps {
  /** How the running machine can be forked, and what it runs on (recorded with the state). */
  inspect(layout: MachineLayout): Promise<Inspection>;
  /** What a clone launched now would run on. */
  identity(memoryMiB: number): Promise<VmIdentity>;
  /** Pause, freeze the disk, save the device state, copy the template, resume (unless hold). */
  capture(layout: MachineLayout, req: CaptureRequest): Promise<CaptureResult>;
  /**
   * capture() in two halves: what needs no pause (the control connection, the copier, the state's socket) now,
   * beside a fork's other preparations; the pause itself when take() is called.
   */
  prepareCapture?(layout: MachineLayout, req: CaptureRequest): Promise<PreparedCapture>;
  /** Runs a machine that a fork killed in its pause left stopped (cancelling its save); false if it was running. */
  resumeAbandoned(layout: MachineLayout): Promise<boolean>;
  /** Load a state into a clone started with `-incoming defer` and run it. */
  restore(layout: MachineLayout, stateFile: string, timeoutMs: number): Promise<void>;
  /**
   * The part of restore() that needs no state: for a clone kept waiting (a rollout worker's next attempt),
   * so that the control connection and its setup are not on the clone start's path.
   */
  primeRestore?(layout: MachineLayout, timeoutMs: number): Promise<PrimedRestore>;
  /**
   * Merges the running machine's frozen layers from `top` down into `base` (both under its active overlay,
   * named as its chain names them); the active overlay then sits on `base`. Nothing else may read them.
   */
  commitLayers(layout: MachineLayout, top: string, base: string): Promise<void>;
}

/** A capture ready but for the pause: take() once, or close() to give it up. */
export interface PreparedCapture {
  take(): Promise<CaptureResult>;
  close(): void;
}

/** A clone's restore, ready but for the state: restore() once, or close() to give it up. */
export interface PrimedRestore {
  restore(stateFile: string, timeoutMs: number): Promise<void>;
  close(): void;
}
