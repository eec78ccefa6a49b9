/**
 * Where `smol pack create --from-vm / --image / -s` get their files. The machine lifecycle owns machines,
 * so it implements MachineSource and installs it with setMachineSource(); until then those flags fail
 * with a clear PrerequisiteError and only explicit files (--disk/--kernel/--initrd) can be packed.
 */
import { PrerequisiteError } from '../errors/index.js';
import type { PackInput } from './pack.js';

/** Everything packArtifact needs except where to write and how to sign. */
export type ResolvedSource = Omit<PackInput, 'out' | 'signKey' | 'createdAt' | 'force'> & {
  /** Called after packing, success or not: e.g. resume the paused machine, drop a temporary overlay. */
  release?: () => Promise<void>;
  /** For --with-memory: how long the machine was paused while its state was saved, and the device state's size. */
  captured?: { pausedMs: number; stateBytes: number };
};

export interface MachineSource {
  /** A machine by name; withMemory pauses a running one briefly and saves RAM + device state (DESIGN.md §3). */
  fromVm(name: string, opts: { withMemory: boolean }): Promise<ResolvedSource>;
  /** An image reference as `smol run --image` takes it. */
  fromImage(ref: string): Promise<ResolvedSource>;
  /** A Smolfile: build its machine, then pack it. */
  fromSmolfile(file: string, opts: { withMemory: boolean }): Promise<ResolvedSource>;
}

const unwired = (flag: string) => (): Promise<never> => Promise.reject(new PrerequisiteError(
  `pack create ${flag} is not available yet: the machine lifecycle has not registered a MachineSource`,
  { hint: 'Pack explicit files with --kernel, --initrd and --disk for now.' }));

const notWired: MachineSource = { fromVm: unwired('--from-vm'), fromImage: unwired('--image'), fromSmolfile: unwired('-s') };
let current: MachineSource = notWired;

export function setMachineSource(src: MachineSource): void {
  current = src;
}
export function getMachineSource(): MachineSource {
  return current;
}
