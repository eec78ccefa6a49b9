/**
 * Kernel parameter layouts without the driver's help: the FAKE driver plays one older than CUDA 12.4
 * (FAKE_CUDA_NO_PARAMINFO=1: cuFuncGetParamInfo fails), so the daemon must read every layout from the
 * module image. A wrong layout would hand the kernels wrong pointers or sizes and break the results.
 */
import fs from 'node:fs';
import os from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import path from 'node:path';
import { fatbinEntries } from '../../../src/cuda/daemon/params/fatbin.js';
import { buildNative, layoutFixtures, nvcc, progs, ptx, results, runProgram, shimEnv, startDaemon, type DaemonProc } from './helpers.js';

const noNvcc = nvcc ? '' : ' [skipped: nvcc not installed]';
const DRIVER_CHECKS = ['vecadd', 'saxpy_extra_params', 'reduce_after_event', 'event_elapsed', 'memset_d32', 'mem_get_info', 'ctx_get_device'];
let d: DaemonProc;

beforeAll(async () => {
  buildNative();
  d = await startDaemon([], { FAKE_CUDA_NO_PARAMINFO: '1' });
});
afterAll(async () => { await d?.stop(); });

const allPass = (stdout: string, keys: string[]) => {
  const r = results(stdout);
  expect(Object.keys(r)).toEqual(keys);
  expect(Object.entries(r).filter(([, v]) => v !== 'PASS')).toEqual([]);
};

describe('parameter layouts from the module image (driver without cuFuncGetParamInfo)', () => {
  it('the driver-API program computes correct results from a PTX module, and the daemon says where layouts came from', async () => {
    const r = await runProgram(path.join(progs, 'driver_vecadd'), [ptx], shimEnv(d.endpoint));
    expect(r.code, r.stderr).toBe(0);
    allPass(r.stdout, DRIVER_CHECKS);
    expect(d.log()).toMatch(/kernel parameter layouts come from the module images: cuFuncGetParamInfo failed with CUDA error 500/);
  });

  it('the driver-API program computes correct results from a fatbin (read from its uncompressed cubin)', async () => {
    const r = await runProgram(path.join(progs, 'driver_vecadd'), [path.join(layoutFixtures, 'kernels.fatbin')], shimEnv(d.endpoint));
    expect(r.code, r.stderr).toBe(0);
    allPass(r.stdout, DRIVER_CHECKS);
  });

  it.skipIf(!nvcc)(`an nvcc-built runtime-API program (static cudart) computes correct results from its registered fatbin${noNvcc}`, async () => {
    const r = await runProgram(path.join(progs, 'runtime_vecadd_static'), ['100000'], shimEnv(d.endpoint));
    expect(r.code, r.stderr).toBe(0);
    expect(results(r.stdout)).toEqual({ rt_vecadd: 'PASS', rt_stream_saxpy_reduce: 'PASS', rt_event_elapsed: 'PASS', rt_memset: 'PASS', rt_mem_get_info: 'PASS' });
  });

  it('a fully compressed fatbin (nvcc -compress-all): the zstd entries are inflated and the results are correct', async () => {
    const r = await runProgram(path.join(progs, 'driver_vecadd'), [path.join(layoutFixtures, 'kernels.compressed.fatbin')], shimEnv(d.endpoint));
    expect(r.code, r.stderr).toBe(0);
    allPass(r.stdout, DRIVER_CHECKS);
  });

  it('an unreadable fatbin: the launch fails with CUDA_ERROR_NOT_SUPPORTED and a reason on both sides, and the daemon keeps serving', async () => {
    // the compressed fixture with both entries marked LZ4 (flag 0x2000 for zstd's 0x8000), which the daemon cannot read
    const fb = Buffer.from(fs.readFileSync(path.join(layoutFixtures, 'kernels.compressed.fatbin')));
    for (const e of fatbinEntries(fb)) {
      fb.writeBigUInt64LE((fb.readBigUInt64LE(e.headerAt + 0x28) & ~0x8000n) | 0x2000n, e.headerAt + 0x28);
    }
    const lz4 = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'lz4-')), 'kernels.lz4.fatbin');
    fs.writeFileSync(lz4, fb);
    const r = await runProgram(path.join(progs, 'driver_vecadd'), [lz4, 'ok', '4096'], shimEnv(d.endpoint));
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/cuLaunchKernel\(vecadd.*-> 801 CUDA_ERROR_NOT_SUPPORTED/);
    const why = 'kernel parameter layout failed: vecadd: not in a readable part of the image (sm_75 cubin is compressed (lz4), which the daemon does not read; compute_75 PTX is compressed (lz4), which the daemon does not read)';
    expect(r.stderr).toContain(`cuLaunchKernel of vecadd failed: CUDA_ERROR_NOT_SUPPORTED: ${why}`);
    expect(d.log()).toContain(`launches of vecadd will fail with CUDA_ERROR_NOT_SUPPORTED: ${why}`);
    const again = await runProgram(path.join(progs, 'driver_vecadd'), [ptx, 'ok', '4096'], shimEnv(d.endpoint));
    expect(again.code, again.stderr).toBe(0);
  });

});
