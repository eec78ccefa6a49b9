/** The copies area's daemon rules with a stand-in driver: strided footprints, the descriptors handed to the
 *  driver (offsets from cuda.h's CUDA_MEMCPY2D/3D), 64-bit values in two words, and the wait release. */
import { describe, expect, it } from 'vitest';
import { OP, PROTO_HASH, PROTOCOL } from '../../../src/cuda/protocol/index.js';
import { Session, STAT } from '../../../src/cuda/daemon/session.js';
import type { CudaDriver } from '../../../src/cuda/daemon/driver/cuda.js';
import { footprint, satisfying } from '../../../src/cuda/daemon/ops/copies.js';

function session() {
  const calls: [string, unknown[]][] = [];
  let next = 0x100000;
  const drv = new Proxy({}, {
    get(_t, name: string) {
      if (name === 'addressOf') return () => 0x5000;
      return (...args: unknown[]) => {
        // descriptors are copied: the session reuses one buffer
        calls.push([name, args.map((x) => (Buffer.isBuffer(x) ? Buffer.from(x) : x))]);
        if (name === 'cuDriverGetVersion' || name === 'cuDeviceGetCount') (args[0] as number[])[0] = name === 'cuDriverGetVersion' ? 13000 : 1;
        if (name === 'cuMemAlloc' || name === 'cuCtxCreate' || name === 'cuStreamCreateWithPriority') { (args[0] as number[])[0] = next; next += 0x100000; }
        return 0;
      };
    },
  }) as CudaDriver;
  const s = new Session(drv, { quotaBytes: 1 << 24, stats: new Float64Array(STAT.size), maxPayload: 1 << 16, sessionId: 1 });
  s.dispatch(OP.Hello, [PROTOCOL.magic, Number(PROTO_HASH), 1, 0], Buffer.alloc(0));
  const p = s.dispatch(OP.MemAlloc, [65536], Buffer.alloc(0))!.outs[0];
  calls.length = 0;
  return { s, calls, p };
}
const u64 = (b: Buffer, o: number) => Number(b.readBigUInt64LE(o));

describe('copies area', () => {
  it('measures a strided footprint from first to last byte, and refuses impossible or huge shapes', () => {
    expect(footprint(64, 1, 1, 2 ** 64, 0)).toBe(-1);     // an unused pitch is still bounded
    expect(footprint(64, 1, 1, 64, 0)).toBe(64);
    expect(footprint(64, 4, 1, 256, 0)).toBe(3 * 256 + 64);
    expect(footprint(64, 4, 3, 256, 5)).toBe((2 * 5 + 3) * 256 + 64);
    expect(footprint(64, 4, 1, 32, 0)).toBe(-1);          // pitch below the width
    expect(footprint(64, 4, 2, 256, 3)).toBe(-1);         // slice shorter than the rows
    expect(footprint(64, 2 ** 40, 2 ** 30, 256, 2 ** 40)).toBe(-1);
  });

  it('knows a value meeting each wait condition, and when there is none', () => {
    const w = (flags: number, value: bigint, wide = false) => satisfying({ addr: 0, value, flags, wide });
    expect(w(0, 5n)).toBe(5n);                      // GEQ
    expect(w(1 | 2 ** 30, 7n)).toBe(7n);            // EQ with FLUSH
    expect(w(2, 4n)).toBe(2n ** 32n - 1n);          // AND
    expect(w(2, 4n, true)).toBe(2n ** 64n - 1n);
    expect(w(2, 0n)).toBeUndefined();               // AND 0: never
    expect(w(3, 1n)).toBe(0n);                      // NOR
    expect(w(3, 2n ** 32n - 1n)).toBeUndefined();   // NOR all ones: never
  });

  it('hands the driver CUDA_MEMCPY2D/3D descriptors laid out as in cuda.h', () => {
    const { s, calls, p } = session();
    expect(s.dispatch(OP.Memcpy2dHtoD, [p + 256, 1024, 8, 4, 0, 0], Buffer.alloc(32))).toBeNull();
    expect(s.pending).toBe(0);
    const [name, [d2]] = calls.find(([n]) => n === 'cuMemcpy2D')!;
    expect(name).toBe('cuMemcpy2D');
    const b = d2 as Buffer;
    expect(b.readUInt32LE(16)).toBe(1);       // srcMemoryType HOST
    expect(u64(b, 24)).toBe(0x5000);          // srcHost: the frame's blob
    expect(u64(b, 48)).toBe(8);               // srcPitch: rows packed
    expect(b.readUInt32LE(72)).toBe(2);       // dstMemoryType DEVICE
    expect(u64(b, 88)).toBe(p + 256);         // dstDevice
    expect(u64(b, 104)).toBe(1024);           // dstPitch
    expect([u64(b, 112), u64(b, 120)]).toEqual([8, 4]);
    calls.length = 0;
    s.dispatch(OP.Memcpy3dDtoD, [p + 4096, 128, 6, p, 64, 5, 64, 5, 3, 0, 1], Buffer.alloc(0));
    const [n3, [d3, st]] = calls[0];
    expect([n3, st]).toEqual(['cuMemcpy3DAsync', 0]);
    const c = d3 as Buffer;
    expect([c.readUInt32LE(32), u64(c, 48), u64(c, 72), u64(c, 80)]).toEqual([2, p, 64, 5]);
    expect([c.readUInt32LE(120), u64(c, 136), u64(c, 160), u64(c, 168)]).toEqual([2, p + 4096, 128, 6]);
    expect([u64(c, 176), u64(c, 184), u64(c, 192)]).toEqual([64, 5, 3]);
  });

  it('keeps every bit of a 64-bit value and refuses words that are not 32 bits', () => {
    const { s, calls, p } = session();
    s.dispatch(OP.StreamMemOp, [0, 5, p + 8, 0x89abcdef, 0x92345678, 0], Buffer.alloc(0));
    expect(calls[0]).toEqual(['cuStreamWriteValue64', [0, p + 8, 0x9234567889abcdefn, 0]]);
    calls.length = 0;
    s.dispatch(OP.StreamMemOp, [0, 2, p, 2 ** 32, 0, 0], Buffer.alloc(0));
    expect(calls).toEqual([]);
    expect(s.pending).toBe(1);
  });

  it('releases the waits a session left, on a stream of its own, before freeing its memory', () => {
    const { s, calls, p } = session();
    s.dispatch(OP.StreamMemOp, [0, 1, p, 1, 0, 1], Buffer.alloc(0));          // EQ 1
    s.dispatch(OP.StreamMemOp, [0, 4, p + 8, 2, 1, 2], Buffer.alloc(0));      // AND, 64-bit
    s.dispatch(OP.StreamMemOp, [0, 1, p + 16, 0, 0, 2], Buffer.alloc(0));     // AND 0: nothing meets it
    calls.length = 0;
    s.cleanup();
    const names = calls.map(([n]) => n);
    expect(names.slice(0, 4)).toEqual(['cuStreamCreateWithPriority', 'cuStreamWriteValue32', 'cuStreamWriteValue64', 'cuStreamSynchronize']);
    expect(calls[1][1].slice(1, 3)).toEqual([p, 1]);
    expect(calls[2][1].slice(1, 3)).toEqual([p + 8, 2n ** 64n - 1n]);
    expect(names.indexOf('cuMemFree')).toBeGreaterThan(names.indexOf('cuStreamDestroy'));
  });
});
