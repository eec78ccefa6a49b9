/**
 * 2D/3D copies, memsets and stream memory operations through the daemon on the FAKE driver: strided
 * runtime-API copies bigger than a frame, hostile frames that name another session's memory or shapes
 * that overflow, and a wait nobody satisfies, which must not keep its session alive after the guest goes.
 * (conformance.test.ts runs conf_copies: the return codes and the small data checks.)
 */
import { afterAll, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import path from 'node:path';
import { OP, PROTOCOL, encodeFrame } from '../../../src/cuda/protocol/index.js';
import { buildNative, nvcc, progs, Raw, results, runProgram, shimEnv, startDaemon, waitFor, type DaemonProc } from './helpers.js';

let d: DaemonProc;
beforeAll(async () => { buildNative(); d = await startDaemon(); });
afterAll(async () => { await d?.stop(); });

const fire = (c: Raw, op: number, args: (number | bigint)[], blob?: Buffer) =>
  c.send(encodeFrame(op, args, { flags: PROTOCOL.flags.async, blob }));
/** The pending error a fire-and-forget op left, as the next synchronous call reports it. */
const pending = async (c: Raw) => (await c.call(OP.Nop, []))?.status;

describe('2D/3D copies and stream memory operations through the daemon', () => {
  it.skipIf(!nvcc)('runtime-API strided copies larger than a frame arrive intact; IPC is refused with a log line', async () => {
    const r = await runProgram(path.join(progs, 'rt_copies'), [], shimEnv(d.endpoint), 120_000);
    expect(r.code, r.stdout + r.stderr).toBe(0);
    const res = results(r.stdout);
    expect(Object.keys(res).sort()).toEqual(['can_access_peer_self', 'ipc_refused_or_given', 'memcpy2d_many_frames', 'memcpy2d_wide_rows', 'memcpy3d', 'memset2d']);
    for (const [name, v] of Object.entries(res)) expect(v, name).toBe('PASS');
    expect(r.stdout).toContain('INFO ipc_get_mem_handle cudaErrorNotSupported');
    expect(r.stderr).toMatch(/cuIpcGetMemHandle: IPC would share .* CUDA_ERROR_NOT_SUPPORTED 801/);
  });

  it("checks every strided footprint against the session's own memory", async () => {
    const owner = new Raw(d.endpoint), thief = new Raw(d.endpoint);
    onTestFinished(() => { owner.sock.destroy(); thief.sock.destroy(); });
    const p = Number(await owner.withMemory(8192)), t = Number(await thief.withMemory(4096));
    expect((await owner.call(OP.MemcpyHtoDSync, [p], Buffer.alloc(8192, 0)))?.status).toBe(0);
    // 4 rows of 8 bytes at a pitch of 1024 from row 1: packed on the wire, spread out on the device
    const rows = Buffer.from(Array.from({ length: 32 }, (_, i) => i + 1));
    fire(owner, OP.Memcpy2dHtoD, [p + 1024, 1024, 8, 4, 0, 0], rows);
    const packed = await owner.call(OP.Memcpy2dDtoH, [p + 1024, 1024, 8, 4, 0]);
    expect(packed?.status).toBe(0);
    expect(packed!.blob.equals(rows)).toBe(true);
    const flat = await owner.call(OP.MemcpyDtoH, [p + 1024, 1032, 0]);
    expect(flat!.blob.subarray(0, 8).equals(rows.subarray(0, 8))).toBe(true);
    expect(flat!.blob.subarray(8, 1024).equals(Buffer.alloc(1016, 0))).toBe(true);
    expect(flat!.blob.subarray(1024, 1032).equals(rows.subarray(8, 16))).toBe(true);

    // Another session naming the owner's memory as a destination, or a source, gets INVALID_VALUE.
    fire(thief, OP.Memcpy3dDtoD, [p, 64, 1, t, 64, 1, 64, 1, 1, 0, 0]);
    expect(await pending(thief)).toBe(1);
    fire(thief, OP.Memcpy3dDtoD, [t, 64, 1, p, 64, 1, 64, 1, 1, 0, 0]);
    expect(await pending(thief)).toBe(1);
    expect((await thief.call(OP.Memcpy2dDtoH, [p, 64, 8, 2, 0]))?.status).toBe(1);
    fire(thief, OP.Memset2d, [p, 64, 0xff, 1, 8, 2, 0, 0]);
    expect(await pending(thief)).toBe(1);
    fire(thief, OP.StreamMemOp, [0, 2, p, 0xdead, 0, 0]);
    expect(await pending(thief)).toBe(1);
    // Shapes whose products overflow, on its own memory, and words that are not what the driver takes.
    fire(thief, OP.Memcpy3dDtoD, [t, 2 ** 60, 2 ** 60, t, 64, 1, 64, 2 ** 40, 2 ** 30, 0, 0]);
    expect(await pending(thief)).toBe(1);
    fire(thief, OP.Memcpy3dDtoD, [t, 64, 1, t + 64, 2 ** 63, 2, 64, 2, 1, 0, 0]);
    expect(await pending(thief)).toBe(1);
    fire(thief, OP.Memcpy2dHtoD, [t, 2 ** 63, 8, 1, 0, 0], Buffer.alloc(8)); // one row: the pitch is unused, yet bounded
    expect(await pending(thief)).toBe(1);
    fire(thief, OP.Memcpy3dDtoD, [t, 64, 2 ** 63, t + 64, 64, 1, 64, 1, 1, 0, 0]);
    expect(await pending(thief)).toBe(1);
    fire(thief, OP.Memset2d, [t, 2 ** 62, 0, 4, 1, 3, 0, 0]);
    expect(await pending(thief)).toBe(1);
    fire(thief, OP.Memset2d, [t, 64, 0, 3, 1, 1, 0, 0]);
    expect(await pending(thief)).toBe(1);
    fire(thief, OP.StreamMemOp, [0, 99, t, 0, 0, 0]);
    expect(await pending(thief)).toBe(1);
    fire(thief, OP.StreamMemOp, [0, 2, t, 0, 0, 2 ** 40]);
    expect(await pending(thief)).toBe(1);
    fire(thief, OP.StreamMemOp, [0, 5, t + 4, 1, 0, 0]);
    expect(await pending(thief)).toBe(1);
    fire(thief, OP.StreamMemOp, [0, 2, t, 2 ** 33, 0, 0]);
    expect(await pending(thief)).toBe(1);
    // ...and a 64-bit write with both words set keeps all 64 bits.
    fire(thief, OP.StreamMemOp, [0, 5, t + 8, 0x89abcdef, 0x92345678, 0]);
    const word = await thief.call(OP.MemcpyDtoH, [t + 8, 8, 0]);
    expect(word!.blob.readBigUInt64LE(0)).toBe(0x9234567889abcdefn);

    // The owner's memory is as it left it.
    const again = await owner.call(OP.Memcpy2dDtoH, [p + 1024, 1024, 8, 4, 0]);
    expect(again!.blob.equals(rows)).toBe(true);
    const rest = await owner.call(OP.MemcpyDtoH, [p, 64, 0]);
    expect(rest!.blob.equals(Buffer.alloc(64, 0))).toBe(true);

    // Frames that lie about their size end their own session only.
    thief.send(encodeFrame(OP.Memcpy2dDtoH, [t, 2 ** 20, 2 ** 20, 2 ** 20, 0], { seq: ++thief.seq }));
    expect(await thief.hangsUp()).toBe(true);
    const liar = new Raw(d.endpoint);
    const l = Number(await liar.withMemory(4096));
    fire(liar, OP.Memcpy2dHtoD, [l, 8, 8, 4, 0, 0], Buffer.alloc(31));
    expect(await liar.hangsUp()).toBe(true);
    expect(await pending(owner)).toBe(0);
    owner.sock.destroy();
  });

  it('a wait nobody satisfies is released when its guest goes, so the session ends', async () => {
    // The earlier tests' sessions are closing; this one must be the only one.
    await waitFor(async () => ((await d.status()).sessions.length === 0 ? true : undefined), 10_000);
    const c = new Raw(d.endpoint);
    const p = Number(await c.withMemory(4096));
    const sid = PROTOCOL.kinds.stream * 2 ** 48 + 7;
    fire(c, OP.StreamCreate, [sid, 1, 0]);
    fire(c, OP.StreamMemOp, [sid, 1, p, 1, 0, 1]);                     // wait32 until *p == 1
    fire(c, OP.StreamMemOp, [sid, 4, p + 8, 0x89abcdef, 0x92345678, 1]); // then wait64 until equal
    fire(c, OP.StreamMemOp, [sid, 1, p + 16, 4, 0, 2]);                // then wait32 until *p & 4
    expect((await c.call(OP.StreamQuery, [sid]))?.status).toBe(600);
    expect((await d.status()).sessions.length).toBe(1);
    c.sock.destroy();
    // The FAKE's stream gives up on its own only after 30 s; the release must come well before that.
    const st = await waitFor(async () => { const s = await d.status(); return s.sessions.length === 0 ? s : undefined; }, 10_000);
    expect(st, 'the session is still open').toBeDefined();
    expect(st!.lastClose!.cleanupMs).toBeLessThan(10_000);
  });
});
