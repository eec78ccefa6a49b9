/**
 * CUDA remoting end to end with real processes: C and nvcc-built programs load the guest shim
 * (build/libcuda.so.1), which talks to `smol gpu serve` running on the FAKE CUDA driver.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { buildNative, fakeLibcuda, nvcc, progs, ptx, results, runProgram, shimEnv, startDaemon, waitFor, type DaemonProc } from './helpers.js';

const noNvcc = nvcc ? '' : ' [skipped: nvcc not installed]';
let d: DaemonProc;

beforeAll(async () => {
  buildNative();
  d = await startDaemon();
});
afterAll(async () => { await d?.stop(); });

describe('guest shim -> daemon -> FAKE driver', () => {
  it('the driver-API program gives the same results natively on the FAKE driver and remoted', async () => {
    const native = await runProgram(path.join(progs, 'driver_vecadd'), [ptx], { LD_LIBRARY_PATH: path.dirname(fakeLibcuda) });
    const remote = await runProgram(path.join(progs, 'driver_vecadd'), [ptx], shimEnv(d.endpoint));
    expect(native.code, native.stderr).toBe(0);
    expect(remote.code, remote.stderr).toBe(0);
    const r = results(remote.stdout);
    expect(r).toEqual(results(native.stdout));
    expect(Object.keys(r)).toEqual(['vecadd', 'saxpy_extra_params', 'reduce_after_event', 'event_elapsed', 'memset_d32', 'mem_get_info', 'ctx_get_device']);
    expect(Object.values(r).every((v) => v === 'PASS')).toBe(true);
    expect(remote.stdout).toContain('Smol FAKE GPU');
  });

  it.skipIf(!nvcc)(`an nvcc-built runtime-API program (static cudart) runs unmodified through the shim${noNvcc}`, async () => {
    const r = await runProgram(path.join(progs, 'runtime_vecadd_static'), ['100000'], shimEnv(d.endpoint));
    expect(r.code, r.stderr).toBe(0);
    expect(results(r.stdout)).toEqual({ rt_vecadd: 'PASS', rt_stream_saxpy_reduce: 'PASS', rt_event_elapsed: 'PASS', rt_memset: 'PASS', rt_mem_get_info: 'PASS' });
  });

  it.skipIf(!nvcc)(`an nvcc-built runtime-API program (shared libcudart) runs unmodified through the shim${noNvcc}`, async () => {
    const r = await runProgram(path.join(progs, 'runtime_vecadd_shared'), ['4096'], shimEnv(d.endpoint));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('ALL PASS');
  });

  it('NVML queries answer from the host device', async () => {
    const r = await runProgram(path.join(progs, 'nvml_query'), [], shimEnv(d.endpoint));
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('count: 1');
    expect(r.stdout).toContain('gpu0.name: Smol FAKE GPU (test double)');
    expect(r.stdout).toMatch(/gpu0\.uuid: GPU-5a11fa6e-c0da-4f00-9e57-000000000001/);
    expect(r.stdout).toMatch(/gpu0\.memory: total=17179869184 free=\d+ used=\d+/);
    expect(r.stdout).toContain('cuda_version: 13000');
  });

  it('an asynchronous fault is reported at the next synchronising call, not at the launch', async () => {
    const r = await runProgram(path.join(progs, 'driver_vecadd'), [ptx, 'sticky', '4096'], shimEnv(d.endpoint));
    expect(r.stdout).toContain('launch=0 sync=700');
    expect(r.code).toBe(0);
  });

  it('a client killed mid-stream has everything freed within 1 s, and the daemon keeps serving', async () => {
    const p = spawn(path.join(progs, 'driver_vecadd'), [ptx, 'hold', String(1 << 20)], { env: { ...process.env, ...shimEnv(d.endpoint) }, stdio: ['ignore', 'pipe', 'pipe'] });
    await new Promise<void>((resolve, reject) => {
      p.stdout.on('data', (b) => { if (String(b).includes('READY')) resolve(); });
      p.on('exit', (c) => reject(new Error(`hold program exited ${c}`)));
    });
    const held = await d.status();
    const mine = held.sessions.find((s) => s.memBytes > 0);
    expect(mine?.memBytes).toBe(3 * 4 * (1 << 20) + 4);
    expect(mine?.allocations).toBe(4);
    const killedAt = Date.now();
    p.kill('SIGKILL');
    const gone = await waitFor(async () => ((await d.status()).sessions.some((s) => s.id === mine!.id) ? undefined : Date.now()), 5000, 10);
    expect(gone).toBeDefined();
    expect(gone! - killedAt).toBeLessThan(1000);
    // The driver itself got the memory back: NVML (cuMemGetInfo on the host) sees nothing in use.
    const q = await runProgram(path.join(progs, 'nvml_query'), [], shimEnv(d.endpoint));
    expect(q.stdout).toMatch(/gpu0\.memory: total=17179869184 free=17179869184 used=0/);
  });

  it('two client processes at once each get their own session and correct results', async () => {
    const before = (await d.status()).closedSessions;
    const [a, b] = await Promise.all([
      runProgram(path.join(progs, 'driver_vecadd'), [ptx, 'ok', '262144'], shimEnv(d.endpoint)),
      runProgram(path.join(progs, 'driver_vecadd'), [ptx, 'ok', '262144'], shimEnv(d.endpoint)),
    ]);
    expect(a.code, a.stderr).toBe(0);
    expect(b.code, b.stderr).toBe(0);
    expect(a.stdout).toContain('ALL PASS');
    expect(b.stdout).toContain('ALL PASS');
    const after = await waitFor(async () => { const s = await d.status(); return s.closedSessions >= before + 2 ? s : undefined; }, 3000);
    expect(after?.closedSessions).toBeGreaterThanOrEqual(before + 2);
  });

  it('`smol gpu status --json` lists sessions with memory and call counts', async () => {
    const p = spawn(path.join(progs, 'driver_vecadd'), [ptx, 'hold', '1024'], { env: { ...process.env, ...shimEnv(d.endpoint) }, stdio: ['ignore', 'pipe', 'pipe'] });
    await new Promise<void>((resolve) => p.stdout.on('data', (b) => { if (String(b).includes('READY')) resolve(); }));
    const cli = await runProgram(process.execPath, ['--import', 'tsx', path.join(import.meta.dirname, 'smol-dev.ts'), 'gpu', 'status', '--control', d.control, '--json'], {});
    p.kill('SIGKILL');
    expect(cli.code, cli.stderr).toBe(0);
    const st = JSON.parse(cli.stdout);
    expect(st.endpoint).toBe(d.endpoint);
    expect(st.sessions).toHaveLength(1);
    expect(st.sessions[0].memBytes).toBe(3 * 4 * 1024 + 4);
    expect(st.sessions[0].calls).toBeGreaterThan(100); // 100 launches plus setup
  });
});

describe('per-session quota', () => {
  it('an allocation over the quota fails with CUDA_ERROR_OUT_OF_MEMORY in the guest', async () => {
    const q = await startDaemon(['--quota', '1MiB']);
    try {
      const r = await runProgram(path.join(progs, 'driver_vecadd'), [ptx, 'ok', String(1 << 20)], shimEnv(q.endpoint));
      expect(r.code).toBe(2);
      expect(r.stderr).toMatch(/cuMemAlloc_v2\(&da, bytes\) -> 2 CUDA_ERROR_OUT_OF_MEMORY/);
      const small = await runProgram(path.join(progs, 'driver_vecadd'), [ptx, 'ok', '4096'], shimEnv(q.endpoint));
      expect(small.code, small.stderr).toBe(0);
    } finally {
      await q.stop();
    }
  });
});

describe('tcp endpoint', () => {
  it('the shim reaches a daemon listening on tcp:127.0.0.1:PORT', async () => {
    const port = 20000 + (process.pid % 20000);
    const t = await startDaemon(['--listen', `tcp:127.0.0.1:${port}`]);
    try {
      expect(t.endpoint).toBe(`tcp:127.0.0.1:${port}`);
      const r = await runProgram(path.join(progs, 'driver_vecadd'), [ptx, 'ok', '65536'], shimEnv(t.endpoint));
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout).toContain('ALL PASS');
    } finally {
      await t.stop();
    }
  });
});
