/** The queries area's daemon ops against hostile frames, with an in-memory stand-in for the driver. */
import { describe, expect, it } from 'vitest';
import { OP, PROTO_HASH, PROTOCOL } from '../../../src/cuda/protocol/index.js';
import { Session, STAT } from '../../../src/cuda/daemon/session.js';
import type { CudaDriver } from '../../../src/cuda/daemon/driver/cuda.js';
import { MAX_LINKS, MAX_LOG } from '../../../src/cuda/daemon/ops/queries-jit.js';

const HOST_BUF = 0x5000;

function session(overrides: Record<string, (...a: unknown[]) => unknown> = {}) {
  const calls: { name: string; args: unknown[] }[] = [];
  let next = 0x10000;
  const drv = new Proxy({}, {
    get(_t, name: string) {
      if (name === 'addressOf') return () => HOST_BUF;
      if (name === 'path') return 'stub';
      return (...args: unknown[]) => {
        calls.push({ name, args });
        if (name in overrides) return overrides[name](...args);
        if (name === 'cuDriverGetVersion' || name === 'cuDeviceGetCount') (args[0] as number[])[0] = name === 'cuDriverGetVersion' ? 13000 : 1;
        if (['cuMemAlloc', 'cuCtxCreate', 'cuModuleLoadDataEx', 'cuStreamCreateWithPriority'].includes(name)) { (args[0] as number[])[0] = next; next += 0x10000; }
        if (name === 'cuLinkCreate') { (args[3] as number[])[0] = next; next += 0x10000; }
        return 0;
      };
    },
  }) as CudaDriver;
  const s = new Session(drv, { quotaBytes: 1 << 20, stats: new Float64Array(STAT.size), maxPayload: 1 << 20, sessionId: 3 });
  s.dispatch(OP.Hello, [PROTOCOL.magic, Number(PROTO_HASH), 1, 0], Buffer.alloc(0));
  const called = (name: string) => calls.filter((c) => c.name === name);
  return { s, called };
}

/** (option, value) pairs as the shim sends them. */
function opts(pairs: [number, bigint | number][]): Buffer {
  const b = Buffer.alloc(pairs.length * 16);
  pairs.forEach(([o, v], i) => { b.writeUInt32LE(o, i * 16); b.writeBigUInt64LE(BigInt(v), i * 16 + 8); });
  return b;
}
const ptx = Buffer.from('.version 8.0\n.target sm_90\n.entry k() { ret; }\n\0', 'latin1');
const MODULE = PROTOCOL.kinds.module * 2 ** 48 + 1, LINK = PROTOCOL.kinds.module * 2 ** 48 + 2;

describe('JIT options from a guest', () => {
  it('never hands the driver a guest pointer: log buffers become host buffers, sizes are capped', () => {
    const { s, called } = session();
    const blob = Buffer.concat([opts([[3, 0xdeadbeefn], [4, 1 << 30], [0, 32]]), ptx]);
    const r = s.dispatch(OP.ModuleLoadDataEx, [MODULE, 3], blob)!;
    expect(r.status).toBe(0);
    const [, , n, o, v] = called('cuModuleLoadDataEx')[0].args as [unknown, unknown, number, Buffer, Buffer];
    expect(n).toBe(3);
    expect([o.readInt32LE(0), o.readInt32LE(4), o.readInt32LE(8)]).toEqual([3, 4, 0]);
    expect(Number(v.readBigUInt64LE(0))).toBe(HOST_BUF);
    expect(Number(v.readBigUInt64LE(8))).toBe(MAX_LOG);
    expect(Number(v.readBigUInt64LE(16))).toBe(32);
    // the reply carries the option values back, then the (empty) logs
    expect(r.outs).toEqual([0, 0]);
    expect(r.blobLen).toBe(3 * 8);
  });

  it('refuses options whose values point into the guest, and more options than the cap', () => {
    const { s, called } = session();
    for (const o of [17, 18, 25, 27]) {
      const r = s.dispatch(OP.ModuleLoadDataEx, [MODULE, 1], Buffer.concat([opts([[o, 0x1234]]), ptx]))!;
      expect(r.status).toBe(801);
    }
    expect(s.dispatch(OP.ModuleLoadDataEx, [MODULE, 65], Buffer.concat([opts(Array(65).fill([0, 1])), ptx]))!.status).toBe(1);
    // a count that claims more pairs than the frame holds
    expect(s.dispatch(OP.ModuleLoadDataEx, [MODULE, 4], opts([[0, 1]]))!.status).toBe(1);
    // an option id with high bits set is not silently truncated to a valid one
    const hi = opts([[0, 1]]); hi.writeUInt32LE(1, 4);
    expect(s.dispatch(OP.ModuleLoadDataEx, [MODULE, 1], Buffer.concat([hi, ptx]))!.status).toBe(801);
    expect(called('cuModuleLoadDataEx')).toHaveLength(0);
  });

  it('refuses log buffers and output options in per-input link options', () => {
    const { s, called } = session();
    expect(s.dispatch(OP.LinkCreate, [LINK, 0], Buffer.alloc(0))!.status).toBe(0);
    for (const o of [1, 2, 3, 4, 5, 6]) {
      const blob = Buffer.concat([opts([[o, 0x1000]]), Buffer.from('k.ptx'), ptx]);
      expect(s.dispatch(OP.LinkAddData, [LINK, 1, 1, 5], blob)!.status).toBe(801);
    }
    expect(called('cuLinkAddData')).toHaveLength(0);
  });
});

describe('link states', () => {
  it('answer only for links this session created, with inputs the frame really holds', () => {
    const { s, called } = session();
    expect(s.dispatch(OP.LinkAddData, [LINK, 1, 0, 0], ptx)!.status).toBe(400);
    expect(s.dispatch(OP.LinkComplete, [LINK], Buffer.alloc(0))!.status).toBe(400);
    expect(s.dispatch(OP.LinkCreate, [LINK, 0], Buffer.alloc(0))!.status).toBe(0);
    expect(s.dispatch(OP.LinkCreate, [LINK, 0], Buffer.alloc(0))!.status).toBe(400); // an id in use
    expect(s.dispatch(OP.LinkAddData, [LINK, 1, 0, 1 << 20], ptx)!.status).toBe(1); // name longer than the frame
    expect(s.dispatch(OP.LinkAddData, [LINK, 6, 0, 0], ptx)!.status).toBe(1); // no such input type
    expect(called('cuLinkAddData')).toHaveLength(0);
    expect(s.dispatch(OP.LinkAddData, [LINK, 1, 0, 5], Buffer.concat([Buffer.from('k.ptx'), ptx]))!.status).toBe(0);
    const [, type, , size, name] = called('cuLinkAddData')[0].args as [number, number, Buffer, number, Buffer];
    expect([type, size, name.toString('latin1')]).toEqual([1, ptx.length, 'k.ptx\0']);
    expect(s.dispatch(OP.LinkDestroy, [LINK], Buffer.alloc(0))).toBeNull();
    expect(s.dispatch(OP.LinkComplete, [LINK], Buffer.alloc(0))!.status).toBe(400);
  });

  it('are bounded per session: one past the cap is out of memory, and a destroyed one makes room', () => {
    const { s } = session();
    for (let i = 0; i < MAX_LINKS; i++) expect(s.dispatch(OP.LinkCreate, [LINK + i, 0], Buffer.alloc(0))!.status).toBe(0);
    expect(s.dispatch(OP.LinkCreate, [LINK + MAX_LINKS, 0], Buffer.alloc(0))!.status).toBe(2);
    s.dispatch(OP.LinkDestroy, [LINK], Buffer.alloc(0));
    expect(s.dispatch(OP.LinkCreate, [LINK + MAX_LINKS, 0], Buffer.alloc(0))!.status).toBe(0);
  });

  it('send the linked image back after the option values and logs', () => {
    const image = Buffer.from('\x7fELF linked', 'latin1');
    const { s } = session({
      cuLinkCreate: (_n, _o, _v, out) => { (out as number[])[0] = 0x777; return 0; },
      cuLinkComplete: (_l, cubin, size) => { (cubin as number[])[0] = 0x9000; (size as number[])[0] = image.length; return 0; },
      readAt: (dst, addr, n) => { expect(addr).toBe(0x9000); image.copy(dst as Buffer, 0, 0, n as number); },
    });
    expect(s.dispatch(OP.LinkCreate, [LINK, 1], opts([[7, 4]]))!.status).toBe(0);
    const r = s.dispatch(OP.LinkComplete, [LINK], Buffer.alloc(0))!;
    expect(r.status).toBe(0);
    expect(r.outs).toEqual([0, 0, image.length]);
    expect(r.blob!.subarray(8, r.blobLen).toString('latin1')).toBe(image.toString('latin1'));
  });
});

describe('stream attributes from a guest', () => {
  it('pass only stream attributes, whole values and windows over the session\'s own memory', () => {
    const { s, called } = session();
    const STREAM = PROTOCOL.kinds.stream * 2 ** 48 + 9;
    s.dispatch(OP.StreamCreate, [STREAM, 0, 0], Buffer.alloc(0));
    const dptr = s.dispatch(OP.MemAlloc, [4096], Buffer.alloc(0))!.outs[0];
    const win = (base: number, bytes: number) => { const v = Buffer.alloc(64); v.writeBigUInt64LE(BigInt(base), 0); v.writeBigUInt64LE(BigInt(bytes), 8); return v; };
    expect(s.dispatch(OP.StreamSetAttribute, [STREAM, 1], win(0xbad00000, 4096))!.status).toBe(1);
    expect(s.dispatch(OP.StreamSetAttribute, [STREAM, 1], win(dptr, 8192))!.status).toBe(1);
    expect(s.dispatch(OP.StreamSetAttribute, [STREAM, 7], Buffer.alloc(64))!.status).toBe(1); // PROGRAMMATIC_EVENT holds an event handle
    expect(s.dispatch(OP.StreamSetAttribute, [STREAM, 8], Buffer.alloc(8))!.status).toBe(1);
    expect(s.dispatch(OP.StreamSetAttribute, [STREAM + 1, 8], Buffer.alloc(64))!.status).toBe(400);
    expect(s.dispatch(OP.StreamGetAttribute, [STREAM, 12], Buffer.alloc(0))!.status).toBe(1);
    expect(called('cuStreamSetAttribute')).toHaveLength(0);
    expect(called('cuStreamGetAttribute')).toHaveLength(0);
    expect(s.dispatch(OP.StreamSetAttribute, [STREAM, 1], win(dptr, 4096))!.status).toBe(0);
    expect(s.dispatch(OP.StreamCopyAttributes, [STREAM, 0], Buffer.alloc(0))!.status).toBe(0);
    expect(s.dispatch(OP.StreamCopyAttributes, [STREAM, STREAM + 1], Buffer.alloc(0))!.status).toBe(400);
  });
});

describe('module enumeration', () => {
  it('asks the driver for no more handles than the module has', () => {
    const { s, called } = session({
      cuModuleGetFunctionCount: (out) => { (out as number[])[0] = 2; return 0; },
      cuModuleEnumerateFunctions: (hs) => { (hs as Buffer).writeBigUInt64LE(0x100n, 0); (hs as Buffer).writeBigUInt64LE(0x200n, 8); return 0; },
      funcNameOf: (name, f) => { (name as string[])[0] = f === 0x100 ? 'vecadd' : 'saxpy'; return 0; },
    });
    expect(s.dispatch(OP.ModuleLoadDataEx, [MODULE, 0], ptx)!.status).toBe(0);
    const r = s.dispatch(OP.ModuleEnumerate, [MODULE, 1 << 30], Buffer.alloc(0))!;
    expect(r.status).toBe(0);
    expect(r.outs).toEqual([2]);
    expect(r.blob!.subarray(0, r.blobLen).toString('latin1')).toBe('vecadd\0saxpy\0');
    expect(called('cuModuleEnumerateFunctions')[0].args[1]).toBe(2);
    expect(s.dispatch(OP.ModuleEnumerate, [MODULE + 5, 4], Buffer.alloc(0))!.status).toBe(400);
  });
});
