/**
 * Choosing a backend, and saying precisely why when none is usable (smolvm's lesson): QEMU missing is a
 * PrerequisiteError with the apt command; KVM missing is not an error but a one-line notice, and TCG.
 */
import { PrerequisiteError } from '../../errors/index.js';
import { detectHostTscKhz } from '../kernel/tsc.js';
import { findQemu, kvmUsable, vhostVsockAvailable, QEMU_IMG } from '../qemu/detect.js';
import { which } from '../../util/exec.js';
import { QemuBackend } from './qemu.js';
import type { VmBackend } from './types.js';

export type { VmBackend, LaunchSpec, LaunchResult, DiskSpec, MemoryBackendSpec } from './types.js';
export { QemuBackend } from './qemu.js';
export { waitForConsole, consoleTail } from './console.js';
export { isRunning } from './process.js';

export const QEMU_APT_HINT = 'Install QEMU: sudo apt-get install qemu-system-x86 qemu-utils (or run `npm run setup`).';

export interface SelectBackendOptions {
  /** Receives one-line notices (e.g. "KVM unusable … using TCG"). */
  notice?: (line: string) => void;
  /** Force an accelerator (tests, or KVM present but unwanted). */
  accel?: 'kvm' | 'tcg';
}

export async function selectBackend(opts: SelectBackendOptions = {}): Promise<VmBackend> {
  const qemu = await findQemu();
  if (!qemu) throw new PrerequisiteError('no usable VM backend: qemu-system-x86_64 is not installed', { hint: QEMU_APT_HINT });
  if (!(await which(QEMU_IMG))) throw new PrerequisiteError('no usable VM backend: qemu-img is not installed', { hint: QEMU_APT_HINT });
  let accel = opts.accel;
  if (!accel) {
    const kvm = await kvmUsable();
    accel = kvm.ok ? 'kvm' : 'tcg';
    if (!kvm.ok) opts.notice?.(`KVM unusable (${kvm.reason}): using TCG emulation, which is several times slower`);
  }
  const tsc = accel === 'tcg' ? await detectHostTscKhz() : null;
  if (accel === 'tcg' && !tsc) opts.notice?.('host TSC frequency unknown: TCG boots may occasionally hang at TSC calibration');
  return new QemuBackend({ qemuPath: qemu.path, accel, tscKhz: tsc?.khz ?? null, vhostVsock: await vhostVsockAvailable() });
}
