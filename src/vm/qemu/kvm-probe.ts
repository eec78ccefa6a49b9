/**
 * Whether KVM really runs a guest here. /dev/kvm opening read-write is not enough: nested hosts exist whose
 * KVM refuses `-cpu host` (QEMU asserts on MSR 0x10a, IA32_ARCH_CAPABILITIES) or spins in the host kernel
 * without ever running the guest, and smol would then fail or hang on every boot. The probe boots the real
 * guest kernel with the exact accelerator flags smol uses, to its first console line, and is cached per
 * host boot: a healthy KVM answers in well under a second, so the wait only costs hosts where it is broken.
 */
import { readFile, stat } from 'node:fs/promises';
import { cachedProbe } from '../../util/probe-cache.js';
import { spawn } from '../../util/exec.js';
import { accelArgs } from './args.js';
import { KVM_PROBE_TIMEOUT_MS } from '../limits.js';

export interface ProbeResult { ok: boolean; reason?: string; ms?: number }

const FIRST_LINE = 'Linux version';
export { KVM_PROBE_TIMEOUT_MS };

/** Boots `kernel` under `accel` until it prints its banner on the serial port; kills QEMU either way. */
export async function bootProbe(qemuPath: string, kernel: string, accel: 'kvm' | 'tcg', timeoutMs = KVM_PROBE_TIMEOUT_MS): Promise<ProbeResult> {
  const t0 = performance.now();
  const { child } = await spawn(qemuPath, [
    '-machine', 'microvm,isa-serial=on', ...accelArgs(accel), '-m', '64M', '-nodefaults', '-no-user-config',
    '-display', 'none', '-monitor', 'none', '-serial', 'stdio', '-no-reboot',
    '-kernel', kernel, '-append', 'console=ttyS0 earlyprintk=ttyS0 panic=-1',
  ], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  const result = await new Promise<ProbeResult>((resolve) => {
    const timer = setTimeout(() => resolve({ ok: false, reason: `a ${accel.toUpperCase()} guest printed nothing within ${timeoutMs / 1000} s` }), timeoutMs);
    child.stdout!.on('data', (c: Buffer) => {
      out = (out + c.toString('latin1')).slice(-4096);
      if (out.includes(FIRST_LINE)) { clearTimeout(timer); resolve({ ok: true, ms: Math.round(performance.now() - t0) }); }
    });
    child.stderr!.on('data', (c: Buffer) => { err = (err + c.toString()).slice(-4096); });
    void child.then((r) => {
      clearTimeout(timer);
      const lines = err.trim().split('\n').map((l) => l.replace(/^\S*qemu-system-\S+: /, '')).filter(Boolean);
      const why = lines.find((l) => l.startsWith('error:'))?.slice(7) ?? lines[0] ?? `exit ${r.exitCode ?? r.signal}`;
      resolve({ ok: false, reason: `QEMU failed to run a ${accel.toUpperCase()} guest: ${why}` });
    });
  });
  child.kill('SIGKILL');
  await child;
  return result;
}

/** The probe under KVM, remembered until the host reboots or QEMU or the kernel change. */
export async function kvmBoots(qemuPath: string, kernel: string): Promise<ProbeResult> {
  const bootId = (await readFile('/proc/sys/kernel/random/boot_id', 'utf8').catch(() => '')).trim();
  const [q, k] = await Promise.all([stat(qemuPath), stat(kernel)]);
  const key = `${bootId}:${qemuPath}:${q.size}:${q.mtimeMs}:${kernel}:${k.size}:${k.mtimeMs}`;
  return (await cachedProbe('kvm-boots', key, () => bootProbe(qemuPath, kernel, 'kvm'))) ?? { ok: false, reason: 'probe failed' };
}
