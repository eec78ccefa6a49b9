/** What this host offers QEMU: the binaries, KVM, vhost-vsock. Each probe is cheap and side-effect free. */
import { constants } from 'node:fs';
import { access, open, stat } from 'node:fs/promises';
import { cachedProbe } from '../../util/probe-cache.js';
import { run, which } from '../../util/exec.js';
import { QEMU_PROBE_MS } from '../limits.js';

export const QEMU_SYSTEM = 'qemu-system-x86_64';
export const QEMU_IMG = 'qemu-img';

/** KVM is usable only when /dev/kvm opens read-write (existing but unopenable is common in containers). */
export async function kvmUsable(dev = '/dev/kvm'): Promise<{ ok: boolean; reason?: string }> {
  try {
    const fh = await open(dev, constants.O_RDWR);
    await fh.close();
    return { ok: true };
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    return { ok: false, reason: code === 'ENOENT' ? `${dev} does not exist` : `${dev} cannot be opened read-write (${code})` };
  }
}

export async function vhostVsockAvailable(dev = '/dev/vhost-vsock'): Promise<boolean> {
  return access(dev, constants.R_OK | constants.W_OK).then(() => true, () => false);
}

export interface QemuInstall { path: string; version: string }

let found: Promise<QemuInstall | null> | undefined;

/** Memoised, and the version is cached on disk per binary: running `qemu --version` costs ~100 ms a command. */
export function findQemu(): Promise<QemuInstall | null> {
  found ??= probeQemu();
  return found;
}

async function probeQemu(): Promise<QemuInstall | null> {
  const p = await which(QEMU_SYSTEM);
  if (!p) return null;
  const st = await stat(p);
  const version = await cachedProbe('qemu-version', `${p}:${st.size}:${st.mtimeMs}:${st.ino}`, async () => {
    const r = await run(p, ['--version'], { allowFailure: true, timeoutMs: QEMU_PROBE_MS });
    return /version (\S+)/.exec(r.stdout)?.[1] ?? null;
  });
  return { path: p, version: version ?? 'unknown' };
}
