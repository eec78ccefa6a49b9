/**
 * Host TSC frequency for the guest's `tsc_early_khz=`. Under TCG, microvm has no PIT to calibrate against
 * reliably, so without it about one boot in five hangs; a wrong value makes the guest clock run fast or slow,
 * so only sources that report the real TSC rate are trusted (DESIGN.md §2).
 */
import { readFile } from 'node:fs/promises';
import { run } from '../../util/exec.js';
import { cachedProbe } from '../../util/probe-cache.js';
import { TSC_PROBE_MS } from '../limits.js';

export interface TscReading { khz: number; source: string }

/** Parse kernel log text: the refined calibration wins over the first estimate. */
export function parseTscFromKernelLog(text: string): number | null {
  const refined = /tsc: Refined TSC clocksource calibration: (\d+(?:\.\d+)?) MHz/.exec(text);
  if (refined) return Math.round(Number(refined[1]) * 1000);
  const detected = /tsc: Detected (\d+(?:\.\d+)?) MHz (?:processor|TSC)/.exec(text);
  if (detected) return Math.round(Number(detected[1]) * 1000);
  return null;
}

/** /proc/cpuinfo's "cpu MHz" equals the TSC rate only when the TSC is invariant (constant_tsc + nonstop_tsc). */
export function parseTscFromCpuinfo(text: string): number | null {
  const flags = /^flags\s*:(.*)$/m.exec(text)?.[1] ?? '';
  if (!/\bconstant_tsc\b/.test(flags) || !/\bnonstop_tsc\b/.test(flags)) return null;
  const mhz = /^cpu MHz\s*:\s*(\d+(?:\.\d+)?)/m.exec(text);
  return mhz ? Math.round(Number(mhz[1]) * 1000) : null;
}

let cached: TscReading | null | undefined;

/** Best available reading, or null when no source is trustworthy (the caller then omits the parameter). */
export async function detectHostTscKhz(): Promise<TscReading | null> {
  if (cached !== undefined) return cached;
  // the TSC rate is fixed for a host boot; dmesg costs a subprocess on every command otherwise
  const bootId = (await readFile('/proc/sys/kernel/random/boot_id', 'utf8').catch(() => '')).trim();
  cached = bootId ? await cachedProbe('host-tsc', bootId, detect) : await detect();
  return cached;
}

async function detect(): Promise<TscReading | null> {
  const sysfs = await readFile('/sys/devices/system/cpu/cpu0/tsc_freq_khz', 'utf8').catch(() => null);
  if (sysfs && Number(sysfs.trim()) > 0) return { khz: Number(sysfs.trim()), source: 'sysfs tsc_freq_khz' };
  for (const [cmd, args] of [['dmesg', []], ['journalctl', ['-k', '-b', '--no-pager', '-q']]] as const) {
    const r = await run(cmd, args, { allowFailure: true, timeoutMs: TSC_PROBE_MS }).catch(() => null);
    const khz = r && r.exitCode === 0 ? parseTscFromKernelLog(r.stdout) : null;
    if (khz) return { khz, source: cmd };
  }
  const cpuinfo = await readFile('/proc/cpuinfo', 'utf8').catch(() => '');
  const khz = parseTscFromCpuinfo(cpuinfo);
  return khz ? { khz, source: '/proc/cpuinfo' } : null;
}
