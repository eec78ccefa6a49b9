/**
 * The queries area through libcudart: the calls cudart 13 turns into cuCtxGet/SetCacheConfig,
 * cuStreamGet/SetAttribute and cuStreamCopyAttributes (an L2 access policy window over a cudaMalloc
 * buffer), cuCtxResetPersistingL2Cache, cuStreamGetId and cuDeviceGetTexture1DLinearMaxWidth reach the
 * shim through cuGetProcAddress, and a kernel on the windowed stream still computes the right sums. The
 * driver-API cases (JIT options and logs, cuLink*, enumeration) are conf_queries in conformance.test.ts.
 */
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildNative, nvcc, progs, results, runProgram, shimEnv, startDaemon, type DaemonProc } from './helpers.js';

let d: DaemonProc;
beforeAll(async () => { buildNative(); d = await startDaemon(); });
afterAll(async () => { await d?.stop(); });

describe('through libcudart (nvcc-built rt_queries, shared cudart 13)', () => {
  it.skipIf(!nvcc)(`cache config, stream attributes and ids, persisting-L2 reset, texture width, a kernel on a windowed stream${nvcc ? '' : ' [skipped: nvcc not installed]'}`, async () => {
    const r = await runProgram(path.join(progs, 'rt_queries'), [], shimEnv(d.endpoint));
    expect(r.code, r.stderr).toBe(0);
    const got = results(r.stdout);
    expect(Object.keys(got)).toHaveLength(7);
    expect(Object.entries(got).filter(([, v]) => v !== 'PASS')).toEqual([]);
  });
});
