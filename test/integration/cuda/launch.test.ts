/**
 * Tensor maps and attributed launches against a running daemon (on the FAKE driver), with frames a
 * hostile guest could send: a descriptor only ever covers the session's own memory, only descriptors the
 * session was given can be re-pointed, and launch attributes that carry handles or addresses are checked
 * before the driver sees them. conformance.test.ts covers the well-behaved calls through the shim.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import path from 'node:path';
import { OP, PROTOCOL, encodeFrame } from '../../../src/cuda/protocol/index.js';
import { tensorExtent } from '../../../src/cuda/daemon/ops/tensormap.js';
import { buildNative, nvcc, progs, ptx, Raw, results, runProgram, shimEnv, startDaemon, type DaemonProc } from './helpers.js';

let d: DaemonProc;
beforeAll(async () => { buildNative(); d = await startDaemon(); });
afterAll(async () => { await d?.stop(); });

const F32 = 7;
/** The 148-byte encode blob (spec-areas/launch.ts) for a tiled map. */
function tiledBlob(dims: bigint[], strides: bigint[], box: number[]): Buffer {
  const b = Buffer.alloc(148);
  dims.forEach((v, i) => b.writeBigUInt64LE(v, 8 * i));
  strides.forEach((v, i) => b.writeBigUInt64LE(v, 40 + 8 * i));
  box.forEach((v, i) => { b.writeUInt32LE(v, 72 + 4 * i); b.writeUInt32LE(1, 92 + 4 * i); });
  return b;
}
const encode = (c: Raw, addr: bigint, blob: Buffer, rank = 2) => c.call(OP.TensorMapEncode, [0, F32, rank, addr, 0, 0, 0, 0], blob);

describe('tensor maps: the extent a descriptor reaches', () => {
  it('is the inner row plus (dim - 1) strides of each outer dimension, exactly', () => {
    expect(tensorExtent(F32, 2, 0, [64n, 16n], [256n])).toBe(64 * 4 + 15 * 256);
    expect(tensorExtent(9, 3, 0, [64n, 16n, 2n], [256n, 4096n])).toBe(128 + 15 * 256 + 4096);
    // packed 4-bit values, and an interleaved row read in whole 32-byte chunks
    expect(tensorExtent(13, 1, 0, [6n], [])).toBe(3);
    expect(tensorExtent(0, 3, 2, [40n, 2n, 2n], [64n, 128n])).toBe(64 + 64 + 128);
  });
  it('refuses what the driver would, and never loses precision on huge dims', () => {
    expect(tensorExtent(F32, 2, 0, [0n, 1n], [16n])).toBe(-1);
    expect(tensorExtent(F32, 2, 0, [1n, 1n], [1n << 40n])).toBe(-1);
    expect(tensorExtent(16, 1, 0, [1n], [])).toBe(-1);
    expect(tensorExtent(F32, 6, 0, [1n, 1n, 1n, 1n, 1n, 1n], [16n, 16n, 16n, 16n, 16n])).toBe(-1);
    expect(tensorExtent(F32, 5, 0, [1n << 32n, 1n << 32n, 1n << 32n, 1n << 32n, 1n << 32n], [(1n << 40n) - 16n, 16n, 16n, 16n])).toBe(-1);
  });
});

describe('tensor maps from a hostile guest', () => {
  it('an encode covers only memory the session owns, to the last byte', async () => {
    const c = new Raw(d.endpoint), other = new Raw(d.endpoint);
    const p = await c.withMemory(4096), q = await other.withMemory(65536);
    const fits = tiledBlob([64n, 16n], [256n], [32, 8]);            // 256 + 15 * 256 = 4096 bytes
    const ok = await encode(c, p, fits);
    expect(ok?.status).toBe(0);
    expect(ok?.blob.length).toBe(128);
    expect((await encode(c, p, tiledBlob([64n, 17n], [256n], [32, 8])))?.status).toBe(1); // one row past the end
    expect((await encode(c, p + 16n, fits))?.status).toBe(1);
    expect((await encode(c, q, fits))?.status).toBe(1);               // another session's memory
    expect((await encode(c, p, tiledBlob([1n << 32n, 1n << 32n], [(1n << 40n) - 16n], [32, 8])))?.status).toBe(1);
    expect((await encode(c, p, fits, 9))?.status).toBe(1);
    expect((await c.call(OP.TensorMapEncode, [7, F32, 2, p, 0, 0, 0, 0], fits))?.status).toBe(1); // no such kind
    expect((await other.call(OP.Nop, []))?.status).toBe(0);
    other.sock.destroy();
    // a blob of the wrong size is a malformed frame: it ends that session only
    c.send(encodeFrame(OP.TensorMapEncode, [0, F32, 2, p, 0, 0, 0, 0], { seq: 99, blob: Buffer.alloc(100) }));
    expect(await c.hangsUp()).toBe(true);
  });

  it('only a descriptor the session was given can be re-pointed, and only inside its memory', async () => {
    const c = new Raw(d.endpoint), other = new Raw(d.endpoint);
    const p = await c.withMemory(8192), q = await other.withMemory(8192);
    const desc = (await encode(c, p, tiledBlob([64n, 16n], [256n], [32, 8])))!.blob;
    const moved = await c.call(OP.TensorMapReplaceAddress, [p + 4096n], desc);
    expect(moved?.status).toBe(0);
    expect(moved?.blob.equals(desc)).toBe(false);
    expect((await c.call(OP.TensorMapReplaceAddress, [p + 4112n], desc))?.status).toBe(1); // 16 bytes past the end
    expect((await c.call(OP.TensorMapReplaceAddress, [q], desc))?.status).toBe(1);
    const forged = Buffer.from(desc); forged[20] ^= 1;                 // a field changed by the guest
    expect((await c.call(OP.TensorMapReplaceAddress, [p], forged))?.status).toBe(1);
    // another session cannot re-point this session's descriptor, even at its own memory
    expect((await other.call(OP.TensorMapReplaceAddress, [q], desc))?.status).toBe(1);
    // the re-pointed descriptor is itself one the session was given
    expect((await c.call(OP.TensorMapReplaceAddress, [p], moved!.blob))?.status).toBe(0);
    c.sock.destroy(); other.sock.destroy();
  });
});

describe('attributed launches from a hostile guest', () => {
  const ATTR = 72;
  function attr(id: number, fill: (v: Buffer) => void): Buffer {
    const b = Buffer.alloc(ATTR); b.writeUInt32LE(id, 0); fill(b.subarray(8)); return b;
  }
  async function withKernel() {
    const c = new Raw(d.endpoint);
    const p = await c.withMemory(4096);
    const mod = PROTOCOL.kinds.module * 2 ** 48 + 1, fn = PROTOCOL.kinds.func * 2 ** 48 + 2;
    expect((await c.call(OP.ModuleLoadData, [mod], fs.readFileSync(ptx)))?.status).toBe(0);
    expect((await c.call(OP.ModuleGetFunction, [mod, fn], Buffer.from('vecadd')))?.status).toBe(0);
    const params = Buffer.alloc(28);
    for (let i = 0; i < 3; i++) params.writeBigUInt64LE(p + BigInt(256 * i), 8 * i);
    params.writeInt32LE(32, 24);
    /** Fires a 1x32 launch of vecadd with these attributes; resolves to the code the next sync call returns. */
    const launch = async (attrs: Buffer[], n = attrs.length) => {
      c.send(encodeFrame(OP.LaunchKernelEx, [fn, 1, 1, 1, 32, 1, 1, 0, 0, n], { flags: PROTOCOL.flags.async, blob: Buffer.concat([...attrs, params]) }));
      return (await c.call(OP.Nop, []))?.status;
    };
    return { c, p, launch };
  }

  it('events must be the session\'s own, windows its own memory, ids known ones', async () => {
    const { c, p, launch } = await withKernel();
    const cluster = attr(4, (v) => { v.writeUInt32LE(1, 0); v.writeUInt32LE(1, 4); v.writeUInt32LE(1, 8); });
    const prio = attr(8, (v) => v.writeInt32LE(-1, 0));
    expect(await launch([cluster, prio])).toBe(0);
    expect(await launch([attr(12, (v) => v.writeBigUInt64LE(BigInt(PROTOCOL.kinds.event * 2 ** 48 + 77), 0))])).toBe(400);
    expect(await launch([attr(1, (v) => { v.writeBigUInt64LE(p, 0); v.writeBigUInt64LE(1n << 20n, 8); })])).toBe(1);
    expect(await launch([attr(1, (v) => { v.writeBigUInt64LE(p, 0); v.writeBigUInt64LE(4096n, 8); v.writeFloatLE(0.5, 16); })])).toBe(0);
    expect(await launch([attr(13, (v) => v.writeInt32LE(1, 0))])).toBe(1);  // the driver would write a node handle back
    expect(await launch([attr(99, () => {})])).toBe(1);
    expect(await launch([], 1000)).toBe(1);                                // more attributes than any launch has
    // an event the session made is translated to its driver event
    const ev = PROTOCOL.kinds.event * 2 ** 48 + 5;
    c.send(encodeFrame(OP.EventCreate, [ev, 2], { flags: PROTOCOL.flags.async }));
    expect(await launch([attr(12, (v) => v.writeBigUInt64LE(BigInt(ev), 0))])).toBe(0);
    expect((await c.call(OP.EventSynchronize, [ev]))?.status).toBe(0);
    // a claimed attribute count past the frame is malformed
    c.send(encodeFrame(OP.LaunchKernelEx, [PROTOCOL.kinds.func * 2 ** 48 + 2, 1, 1, 1, 32, 1, 1, 0, 0, 2], { flags: PROTOCOL.flags.async, blob: Buffer.alloc(100 + 28) }));
    c.send(encodeFrame(OP.Nop, [], { seq: 500 }));
    expect(await c.hangsUp()).toBe(true);
  });
});

describe('the runtime API (cudart) through the shim', () => {
  it.skipIf(!nvcc)(`rt_launch: cudaLaunchKernelEx with a cluster, a priority, a completion event and 64 KiB of shared memory${nvcc ? '' : ' [skipped: nvcc not installed]'}`, async () => {
    const r = await runProgram(path.join(progs, 'rt_launch'), [], shimEnv(d.endpoint), 120_000);
    expect(r.code, r.stderr).toBe(0);
    expect(results(r.stdout)).toEqual({
      rt_func_attributes: 'PASS', rt_launch_ex_cluster: 'PASS', rt_launch_ex_cluster_not_dividing: 'PASS', rt_occupancy_max_active_clusters: 'PASS',
    });
  });
});
