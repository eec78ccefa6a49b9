/** The daemon's per-session rules, with an in-memory stand-in for the driver (no koffi, no GPU). */
import { describe, expect, it } from 'vitest';
import { OP, PROTO_HASH, PROTOCOL } from '../../../src/cuda/protocol/index.js';
import { ProtocolViolation, Session, STAT } from '../../../src/cuda/daemon/session.js';
import type { CudaDriver } from '../../../src/cuda/daemon/driver/cuda.js';
import { fixture } from './params/known.js';
import { fatbinEntries } from '../../../src/cuda/daemon/params/fatbin.js';

function stubDriver(overrides: Record<string, unknown> = {}) {
  const calls: string[] = [];
  let next = 0x10000;
  const handler: ProxyHandler<object> = {
    get(_t, name: string) {
      if (name in overrides) return overrides[name];
      if (name === 'addressOf') return () => 0x5000;
      if (name === 'path') return 'stub';
      return (...args: unknown[]) => {
        calls.push(name);
        if (name === 'cuDriverGetVersion' || name === 'cuDeviceGetCount') (args[0] as number[])[0] = name === 'cuDriverGetVersion' ? 13000 : 1;
        if (name === 'cuMemAlloc' || name === 'cuCtxCreate' || name === 'cuModuleLoadData') { (args[0] as number[])[0] = next; next += 0x10000; }
        if (name === 'cuModuleGetFunction') (args[0] as number[])[0] = 0xf00;
        if (name === 'cuFuncGetParamInfo') { // two params: a pointer at 0, an int at 8
          const i = args[1] as number;
          if (i > 1) return 1;
          (args[2] as number[])[0] = i * 8; (args[3] as number[])[0] = i === 0 ? 8 : 4;
        }
        // the driver knows 0xbad00000 (another session's buffer) and nothing else
        if (name === 'cuMemGetAddressRange') return args[2] === 0xbad00000 ? 0 : 500;
        return 0;
      };
    },
  };
  return { drv: new Proxy({}, handler) as CudaDriver, calls };
}

function session(quotaBytes = 1 << 20, overrides: Record<string, unknown> = {}) {
  const { drv, calls } = stubDriver(overrides);
  const stats = new Float64Array(STAT.size);
  const logged: string[] = [];
  const s = new Session(drv, { quotaBytes, stats, maxPayload: 1 << 16, sessionId: 7, log: (l) => logged.push(l) });
  const hello = s.dispatch(OP.Hello, [PROTOCOL.magic, Number(PROTO_HASH), 1, 0], Buffer.alloc(0));
  return { s, calls, stats, hello, logged };
}

describe('daemon session', () => {
  it('refuses every call before the handshake', () => {
    const { drv } = stubDriver();
    const s = new Session(drv, { quotaBytes: 1, stats: new Float64Array(STAT.size), maxPayload: 1024, sessionId: 1 });
    expect(() => s.dispatch(OP.MemAlloc, [16], Buffer.alloc(0))).toThrow(ProtocolViolation);
  });

  it('answers the handshake with the driver version, device count and session id', () => {
    const { hello } = session();
    expect(hello?.status).toBe(0);
    expect(hello?.outs[0]).toBe(13000);
    expect(hello?.outs[3]).toBe(1);
    expect(hello?.outs[4]).toBe(7);
  });

  it('lets copies touch only the session\'s own allocations, within their bounds', () => {
    const { s, calls } = session();
    const p = s.dispatch(OP.MemAlloc, [4096], Buffer.alloc(0))!.outs[0];
    expect(s.ownsRange(p, 4096)).toBe(true);
    expect(s.ownsRange(p + 4000, 97)).toBe(false);
    expect(s.ownsRange(p - 1, 2)).toBe(false);
    calls.length = 0;
    expect(s.dispatch(OP.MemcpyHtoD, [p + 4090, 0, 0], Buffer.alloc(16))).toBeNull();
    expect(calls).not.toContain('cuMemcpyHtoD');
    expect(s.pending).toBe(1); // CUDA_ERROR_INVALID_VALUE, reported at the next synchronous call
    expect(s.dispatch(OP.MemcpyDtoH, [0xdead0000, 8, 0], Buffer.alloc(0))?.status).toBe(1);
    expect(calls).not.toContain('cuMemcpyDtoH');
  });

  it('enforces the per-session quota and tracks memory in the shared stats', () => {
    const { s, stats } = session(8192);
    const a = s.dispatch(OP.MemAlloc, [4096], Buffer.alloc(0))!;
    expect(s.dispatch(OP.MemAlloc, [8192], Buffer.alloc(0))?.status).toBe(2);
    expect(stats[STAT.memBytes]).toBe(4096);
    s.dispatch(OP.MemFree, [a.outs[0]], Buffer.alloc(0));
    expect(stats[STAT.memBytes]).toBe(0);
    expect(s.dispatch(OP.MemAlloc, [8192], Buffer.alloc(0))?.status).toBe(0);
  });

  it('maps guest handle ids and rejects ids it never created', () => {
    const { s } = session();
    expect(s.dispatch(OP.StreamSynchronize, [PROTOCOL.kinds.stream * 2 ** 48 + 99], Buffer.alloc(0))?.status).toBe(400);
    s.dispatch(OP.StreamCreate, [PROTOCOL.kinds.stream * 2 ** 48 + 1, 0, 0], Buffer.alloc(0));
    expect(s.dispatch(OP.StreamSynchronize, [PROTOCOL.kinds.stream * 2 ** 48 + 1], Buffer.alloc(0))?.status).toBe(0);
  });

  it('frees everything on cleanup', () => {
    const { s, calls, stats } = session();
    s.dispatch(OP.PrimaryCtxRetain, [0], Buffer.alloc(0));
    s.dispatch(OP.MemAlloc, [1024], Buffer.alloc(0));
    s.dispatch(OP.MemAlloc, [2048], Buffer.alloc(0));
    s.dispatch(OP.EventCreate, [PROTOCOL.kinds.event * 2 ** 48 + 1, 0], Buffer.alloc(0));
    calls.length = 0;
    s.cleanup();
    expect(calls.filter((c) => c === 'cuMemFree')).toHaveLength(2);
    expect(calls).toContain('cuEventDestroy');
    expect(calls).toContain('cuCtxDestroy');
    expect(stats[STAT.memBytes]).toBe(0);
  });

  it('refuses a launch whose pointer argument is another session\'s memory', () => {
    const { s, calls } = session();
    const mine = s.dispatch(OP.MemAlloc, [4096], Buffer.alloc(0))!.outs[0];
    s.dispatch(OP.ModuleLoadData, [PROTOCOL.kinds.module * 2 ** 48 + 1], Buffer.from('.entry vecadd'));
    const fid = PROTOCOL.kinds.func * 2 ** 48 + 1;
    const fn = s.dispatch(OP.ModuleGetFunction, [PROTOCOL.kinds.module * 2 ** 48 + 1, fid], Buffer.from('vecadd'))!;
    expect(fn.outs[0]).toBe(2);
    const args = (ptr: number) => { const b = Buffer.alloc(12); b.writeBigUInt64LE(BigInt(ptr), 0); b.writeInt32LE(7, 8); return b; };
    const launch = (ptr: number) => { const f = Buffer.alloc(72 + 12); for (const [i, v] of [fid, 1, 1, 1, 32, 1, 1, 0, 0].entries()) f.writeBigUInt64LE(BigInt(v), i * 8); args(ptr).copy(f, 72); return f; };
    calls.length = 0;
    s.launchInPlace(launch(mine), 0, 84);
    expect(calls.filter((c) => c === 'cuLaunchKernel')).toHaveLength(1);
    s.launchInPlace(launch(0xbad00000), 0, 84);
    expect(calls.filter((c) => c === 'cuLaunchKernel')).toHaveLength(1);
    expect(s.pending).toBe(1);
    s.pending = 0;
    s.launchInPlace(launch(12345), 0, 84); // not device memory at all (a size, say): allowed
    expect(calls.filter((c) => c === 'cuLaunchKernel')).toHaveLength(2);
    expect(s.dispatch(OP.LaunchKernel, [fid, 1, 1, 1, 32, 1, 1, 0, 0], args(0xbad00000))).toBeNull();
    expect(calls.filter((c) => c === 'cuLaunchKernel')).toHaveLength(2);
  });

  describe('kernel parameter layouts', () => {
    const mod = PROTOCOL.kinds.module * 2 ** 48 + 1, fid = PROTOCOL.kinds.func * 2 ** 48 + 1;
    const lookup = (s: Session, image: Buffer, name: string) => {
      expect(s.dispatch(OP.ModuleLoadData, [mod], image)?.status).toBe(0);
      return s.dispatch(OP.ModuleGetFunction, [mod, fid], Buffer.from(name))!;
    };
    const pairs = (b: Buffer) => Array.from({ length: b.length / 8 }, (_, i) => [b.readUInt32LE(i * 8), b.readUInt32LE(i * 8 + 4)]);

    it('come from the module image when the driver has no cuFuncGetParamInfo, and the log says so once', () => {
      const { s, logged } = session(1 << 20, { cuFuncGetParamInfo: null });
      const ptx = Buffer.from('.visible .entry k(.param .u8 k_0, .param .u64 k_1, .param .align 16 .b8 k_2[20]) { ret; }');
      const fn = lookup(s, ptx, 'k');
      expect(fn.outs[0]).toBe(3);
      expect(pairs(fn.blob!.subarray(0, fn.blobLen))).toEqual([[0, 1], [8, 8], [16, 20]]);
      s.dispatch(OP.ModuleGetFunction, [mod, fid + 1], Buffer.from('k'));
      expect(logged).toEqual(['kernel parameter layouts come from the module images: the driver has no cuFuncGetParamInfo (CUDA < 12.4)']);
    });

    it('read the image when cuFuncGetParamInfo fails, but trust its "no parameter 0" for a kernel without parameters', () => {
      const failing = session(1 << 20, { cuFuncGetParamInfo: () => 500 });
      expect(lookup(failing.s, fixture('sm_90.cubin'), 'small').outs[0]).toBe(4);
      expect(failing.logged[0]).toMatch(/cuFuncGetParamInfo failed with CUDA error 500/);
      const none = session(1 << 20, { cuFuncGetParamInfo: () => 1 });
      const fn = lookup(none.s, Buffer.from('no image the daemon could read'), 'noargs');
      expect(fn.outs[0]).toBe(0);
      expect(none.logged).toEqual([]);
    });

    it('unknown (every entry LZ4, which nothing here reads): the lookup says why, and launches are refused, never guessed', () => {
      const { s, calls, logged } = session(1 << 20, { cuFuncGetParamInfo: null });
      const fb = Buffer.from(fixture('compressed.fatbin'));
      for (const e of fatbinEntries(fb)) fb.writeBigUInt64LE((fb.readBigUInt64LE(e.headerAt + 0x28) & ~0x8000n) | 0x2000n, e.headerAt + 0x28);
      const fn = lookup(s, fb, 'mixed');
      expect(fn.status).toBe(0);
      expect(fn.outs[0]).toBe(0xffffffff);
      expect(fn.blob!.toString('latin1', 0, fn.blobLen)).toMatch(/^kernel parameter layout failed: mixed: .*sm_90 cubin is compressed \(lz4\)/);
      expect(logged[1]).toMatch(/^launches of mixed will fail with CUDA_ERROR_NOT_SUPPORTED: /);
      calls.length = 0;
      expect(s.dispatch(OP.LaunchKernel, [fid, 1, 1, 1, 32, 1, 1, 0, 0], Buffer.alloc(0))).toBeNull();
      expect(s.pending).toBe(801);
      s.pending = 0;
      const frame = Buffer.alloc(72);
      frame.writeBigUInt64LE(BigInt(fid), 0);
      s.launchInPlace(frame, 0, 72);
      expect(s.pending).toBe(801);
      expect(calls).not.toContain('cuLaunchKernel');
    });
  });
});
