import { describe, expect, it } from 'vitest';
import { parseTscFromCpuinfo, parseTscFromKernelLog } from '../../../../src/vm/kernel/tsc.js';

describe('host TSC detection', () => {
  it('prefers the refined calibration over the first estimate', () => {
    const log = '[    0.000000] tsc: Detected 2095.983 MHz processor\n[    1.9] tsc: Refined TSC clocksource calibration: 2096.061 MHz\n';
    expect(parseTscFromKernelLog(log)).toBe(2096061);
    expect(parseTscFromKernelLog('[    0.000304] tsc: Detected 2095.983 MHz processor\n')).toBe(2095983);
    expect(parseTscFromKernelLog('nothing here')).toBeNull();
  });

  it('trusts /proc/cpuinfo only for an invariant TSC', () => {
    const inv = 'cpu MHz\t\t: 2095.983\nflags\t\t: fpu tsc constant_tsc nonstop_tsc\n';
    expect(parseTscFromCpuinfo(inv)).toBe(2095983);
    expect(parseTscFromCpuinfo('cpu MHz\t\t: 1200.000\nflags\t\t: fpu tsc constant_tsc\n')).toBeNull();
  });
});
