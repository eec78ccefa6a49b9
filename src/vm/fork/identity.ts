/** Saved device state is only valid on the VMM that wrote it (microvm has no versioned machine type). */
import { ForkError, ExitCode } from '../../errors/index.js';
import type { VmIdentity } from './types.js';

/** The differences that make a state unloadable, as "field: recorded → now" strings (empty: compatible). */
export function identityMismatch(recorded: VmIdentity, current: VmIdentity): string[] {
  const out: string[] = [];
  for (const k of ['qemu', 'accel', 'cpu', 'memoryMiB'] as const) {
    if (recorded[k] !== current[k]) out.push(`${k}: ${recorded[k]} → ${current[k]}`);
  }
  return out;
}

export function assertCompatible(recorded: VmIdentity, current: VmIdentity, what: string): void {
  const diff = identityMismatch(recorded, current);
  if (diff.length) {
    throw new ForkError(`${what} failed: the saved state was made by a different VMM setup (${diff.join(', ')})`, {
      hint: 'A fork state only loads on the same QEMU build, accelerator, CPU model and memory size; restart the parent on this host and fork again.',
    }, ExitCode.conflict);
  }
}
