/**
 * Memory pools and virtual memory management through the shim and daemon: what a guest holds counts
 * against its quota and shows in `gpu status`, is freed when it is killed, and raw frames naming
 * reservations, handles or pools the session does not own never reach the driver.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OP, PROTOCOL } from '../../../src/cuda/protocol/index.js';
import { encodeFrame } from '../../../src/cuda/protocol/frame.js';
import { buildNative, nvcc, progs, ptx, Raw, results, runProgram, shimEnv, startDaemon, waitFor, type DaemonProc } from './helpers.js';

const conf = path.join(progs, 'conformance', 'conf_vmm');
const MiB = 1 << 20;
let d: DaemonProc;
beforeAll(async () => { buildNative(); d = await startDaemon(['--quota', '8MiB']); });
afterAll(async () => { await d?.stop(); });

describe('pools and VMM: quota, status, cleanup', () => {
  it('mapped chunks and pool allocations count against the quota, show in status, and go when the guest is killed', async () => {
    const p = spawn(conf, [ptx, 'hold'], { env: { ...process.env, ...shimEnv(d.endpoint) }, stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    await new Promise<void>((resolve, reject) => {
      p.stdout.on('data', (b) => { out += b; if (out.includes('READY')) resolve(); });
      p.on('exit', (c) => reject(new Error(`hold exited ${c}: ${out}`)));
    });
    // 2 chunks of the FAKE's 2 MiB granularity + 1 MiB from a created pool + 1 MiB from the default pool
    expect(out).toContain(`READY ${6 * MiB}`);
    // a 64 MiB cuMemCreate on top of 6 MiB held is over the 8 MiB quota
    expect(out).toContain('CREATE_BIG 2');
    // the counters reach status through a file rewritten at most every 100 ms
    const mine = await waitFor(async () => (await d.status()).sessions.find((s) => s.memBytes === 6 * MiB), 3000);
    expect(mine?.memBytes).toBe(6 * MiB);
    const killedAt = Date.now();
    p.kill('SIGKILL');
    const gone = await waitFor(async () => ((await d.status()).sessions.some((s) => s.id === mine!.id) ? undefined : Date.now()), 5000, 10);
    expect(gone! - killedAt).toBeLessThan(1000);
    const st = await d.status();
    expect(st.lastClose?.id).toBe(mine!.id);
    expect(st.lastClose?.cleanupMs).toBeGreaterThanOrEqual(0);
    // its process is gone (or a zombie its parent has not reaped yet): the OS took back whatever was left
    const exited = () => { try { return fs.readFileSync(`/proc/${mine!.pid}/stat`, 'utf8').replace(/^.*\) /s, '')[0] === 'Z'; } catch { return true; } };
    expect(await waitFor(async () => (exited() ? true : undefined), 3000)).toBe(true);
    // the quota is the session's own: the next guest gets all of it again
    const again = spawn(conf, [ptx, 'hold'], { env: { ...process.env, ...shimEnv(d.endpoint) }, stdio: ['pipe', 'pipe', 'pipe'] });
    let out2 = '';
    await new Promise<void>((resolve) => again.stdout.on('data', (b) => { out2 += b; if (out2.includes('READY')) resolve(); }));
    again.stdin.end();
    expect(out2).toContain(`READY ${6 * MiB}`);
  });

});

describe('through libcudart (nvcc-built rt_pools, shared cudart 13)', () => {
  it.skipIf(!nvcc)(`a UINT64_MAX release threshold, cudaMallocFromPoolAsync, a kernel on pool memory, statistics, trim, the current pool${nvcc ? '' : ' [skipped: nvcc not installed]'}`, async () => {
    const r = await runProgram(path.join(progs, 'rt_pools'), [], shimEnv(d.endpoint));
    expect(r.code, r.stderr).toBe(0);
    const got = results(r.stdout);
    expect(Object.keys(got)).toHaveLength(9);
    expect(Object.entries(got).filter(([, v]) => v !== 'PASS')).toEqual([]);
  });
});

describe('hostile frames', () => {
  it('handles, reservations and pools the session does not own are refused before the driver', async () => {
    const c = new Raw(d.endpoint);
    await c.withMemory(4096);
    const gran = await c.call(OP.MemGetAllocationGranularity, [1, 0, 1, 0, 0]);
    expect(gran?.status).toBe(0);
    const g = Number(gran!.outs[0]);
    const res = await c.call(OP.MemAddressReserve, [4 * g, 0, 0, 0]);
    expect(res?.status).toBe(0);
    const base = Number(res!.outs[0]);
    const h = PROTOCOL.kinds.memHandle * 2 ** 48 + 1;
    // a handle id this session never created
    expect((await c.call(OP.MemMap, [base, g, 0, h, 0]))?.status).toBe(1);
    expect((await c.call(OP.MemCreate, [h, g, 1, 0, 1, 0, 0, 0]))?.status).toBe(0);
    // the same id twice, a mapping outside any reservation of this session, past the reservation's end
    expect((await c.call(OP.MemCreate, [h, g, 1, 0, 1, 0, 0, 0]))?.status).toBe(1);
    expect((await c.call(OP.MemMap, [0x10000000, g, 0, h, 0]))?.status).toBe(1);
    expect((await c.call(OP.MemMap, [base + 3 * g, 2 * g, 0, h, 0]))?.status).toBe(1);
    expect((await c.call(OP.MemMap, [base, g, 0, h, 0]))?.status).toBe(0);
    // mapping twice, access or unmap over part of it or beyond it, freeing the reservation under it
    expect((await c.call(OP.MemMap, [base, g, 0, h, 0]))?.status).toBe(1);
    expect((await c.call(OP.MemSetAccess, [base, 2 * g, 1, 0, 3]))?.status).toBe(1);
    expect((await c.call(OP.MemUnmap, [base, g / 2]))?.status).toBe(1);
    expect((await c.call(OP.MemAddressFree, [base, 4 * g]))?.status).toBe(1);
    // no access yet: a copy into it is refused (INVALID_VALUE becomes the pending error)
    c.send(encodeFrame(OP.MemcpyHtoD, [base, 0, 0], { flags: PROTOCOL.flags.async, blob: Buffer.alloc(16) }));
    expect((await c.call(OP.Nop, []))?.status).toBe(1);
    expect((await c.call(OP.MemSetAccess, [base, g, 1, 0, 3]))?.status).toBe(0);
    c.send(encodeFrame(OP.MemcpyHtoD, [base + g - 8, 0, 0], { flags: PROTOCOL.flags.async, blob: Buffer.alloc(8) }));
    expect((await c.call(OP.Nop, []))?.status).toBe(0);
    // pools: an id never created, a default-pool id as a new pool, UINT64_MAX-sized sizes
    const pool = PROTOCOL.kinds.pool * 2 ** 48 + 7;
    expect((await c.call(OP.MemAllocFromPoolAsync, [MiB, pool, 0]))?.status).toBe(1);
    expect((await c.call(OP.MemPoolCreate, [PROTOCOL.kinds.pool * 2 ** 48 + PROTOCOL.primaryBase, 1, 0, 1, 0, 0]))?.status).toBe(1);
    expect((await c.call(OP.MemPoolCreate, [pool, 1, 0, 1, 0, 0]))?.status).toBe(0);
    expect((await c.call(OP.MemAllocFromPoolAsync, [2n ** 64n - 1n, pool, 0]))?.status).toBe(2);
    expect((await c.call(OP.MemCreate, [h + 1, 2n ** 64n - 1n, 1, 0, 1, 0, 0, 0]))?.status).toBe(2);
    c.sock.destroy();
  });
});
