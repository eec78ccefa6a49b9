/**
 * Setting up the QEMU launcher, and saying precisely why QEMU is unusable (smolvm's lesson): QEMU missing is a
 * PrerequisiteError with the apt command; KVM missing is not an error but a one-line notice, and TCG.
 */
import { PrerequisiteError, UserError } from '../../errors/index.js';
import { assetsHome } from '../../util/paths.js';
import { findKernel } from '../kernel/index.js';
import { detectHostTscKhz } from '../kernel/tsc.js';
import { findQemu, kvmUsable, vhostVsockAvailable, QEMU_IMG } from './detect.js';
import { which } from '../../util/exec.js';
import { kvmBoots } from './kvm-probe.js';
import { QemuLauncher } from './launcher.js';

export type { LaunchSpec, LaunchResult, DiskSpec, MemoryBackendSpec } from './launch-spec.js';
export { QemuLauncher } from './launcher.js';
export { waitForConsole, consoleTail } from './console.js';
export { isRunning } from './process.js';

export const QEMU_APT_HINT = 'Install QEMU: sudo apt-get install qemu-system-x86 qemu-utils (or run `npm run setup`).';

export interface SelectLauncherOptions {
  /** Receives one-line notices (e.g. "KVM unusable … using TCG"). */
  notice?: (line: string) => void;
  /** Force an accelerator (tests, or KVM present but unwanted). */
  accel?: 'kvm' | 'tcg';
}

export async function selectLauncher(opts: SelectLauncherOptions = {}): Promise<QemuLauncher> {
  const qemu = await findQemu();
  if (!qemu) throw new PrerequisiteError('no usable VM backend: qemu-system-x86_64 is not installed', { hint: QEMU_APT_HINT });
  if (!(await which(QEMU_IMG))) throw new PrerequisiteError('no usable VM backend: qemu-img is not installed', { hint: QEMU_APT_HINT });
  const accel = opts.accel ?? accelFromEnv() ?? await chooseAccel(qemu.path, opts.notice);
  const tsc = accel === 'tcg' ? await detectHostTscKhz() : null;
  if (accel === 'tcg' && !tsc) opts.notice?.('host TSC frequency unknown: TCG boots may occasionally hang at TSC calibration');
  return new QemuLauncher({ qemuPath: qemu.path, accel, tscKhz: tsc?.khz ?? null, vhostVsock: await vhostVsockAvailable() });
}

/** SMOL_ACCEL=kvm|tcg: the user's choice, for hosts where the automatic one is wrong; unset means automatic. */
export function accelFromEnv(env: NodeJS.ProcessEnv = process.env): 'kvm' | 'tcg' | undefined {
  const v = env.SMOL_ACCEL?.trim();
  if (!v || v === 'auto') return undefined;
  if (v === 'kvm' || v === 'tcg') return v;
  throw new UserError(`SMOL_ACCEL=${v} is not an accelerator`, { hint: 'Set SMOL_ACCEL to kvm, tcg or auto (or unset it).' });
}

/** KVM when /dev/kvm opens and a guest kernel really starts under it (kvm-probe.ts); TCG with a notice otherwise. */
export async function chooseAccel(qemuPath: string, notice?: (line: string) => void): Promise<'kvm' | 'tcg'> {
  const kvm = await kvmUsable();
  const kernel = kvm.ok ? await findKernel(assetsHome()) : null;
  // without a kernel yet (before `smol setup`) nothing boots anyway: trust the device
  const probe = kvm.ok && kernel ? await kvmBoots(qemuPath, kernel.vmlinux) : kvm;
  if (probe.ok) return 'kvm';
  notice?.(`KVM unusable (${probe.reason}): using TCG emulation, which is several times slower; SMOL_ACCEL=kvm forces KVM`);
  return 'tcg';
}
