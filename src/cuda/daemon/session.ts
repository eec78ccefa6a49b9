/**
 * One guest process's view of the GPU: its handles, allocations, quota and pending async error.
 * Runs inside the session's own process; `dispatch` executes one decoded frame against the driver.
 * Every handle and device pointer a guest names is looked up in this session's own tables first, so a
 * guest can reach only what it created (the real driver would crash the daemon on a forged handle).
 */
import type { CudaDriver } from './driver/cuda.js';
import { OP, OP_ROWS, PROTOCOL, PROTO_HASH } from '../protocol/index.js';
import { ImageParams } from './params/index.js';
import { resolveParams, type ParamInfoFn } from './params/resolve.js';

export const CU = { ok: 0, invalidValue: 1, outOfMemory: 2, invalidImage: 200, invalidContext: 201, invalidHandle: 400, notFound: 500, notSupported: 801, deviceUnavailable: 46 } as const;
/** Status counters (a Float64Array over a SharedArrayBuffer that session-process.ts publishes for `gpu status`). */
export const STAT = { calls: 0, memBytes: 1, allocs: 2, asyncErrors: 3, handles: 4, size: 8 } as const;

export class ProtocolViolation extends Error {}

/** Results each op's reply carries: an error reply carries them too (zeros), or the shim reads it as malformed. */
const NOUTS = new Map(OP_ROWS.map((r) => [r.id, r.nouts]));

interface Alloc { size: number; ctx: number }
/** `known` is false when neither the driver nor the image gave the layout: launches are refused. */
interface FuncInfo { host: number; module: number; known: boolean; nparams: number; argBytes: number; ptrsAddr: number; ptrs: Buffer; wide: number[] }

const pow32 = 2 ** 32;
const ARG_BUF = 64 * 1024;
/** paramCount in a function lookup's reply when the layout is unknown (the blob then says why). */
const LAYOUT_UNKNOWN = 0xffffffff;
const MAX_REASON = 1024;

export interface SessionOptions {
  quotaBytes: number; stats: Float64Array; maxPayload: number; sessionId: number;
  /** 'image' skips the driver's param info and reads every layout from the module image (for checks). */
  paramSource?: 'driver' | 'image';
  /** One line for the daemon's log, e.g. why a kernel cannot be launched. */
  log?: (line: string) => void;
}

export interface Reply { status: number; outs: number[]; blob?: Buffer; blobLen?: number }

export class Session {
  readonly drv: CudaDriver;
  private quota: number;
  private stats: Float64Array;
  private helloDone = false;
  pending = 0;
  private ctxs = new Map<number, number>();        // guest ctx id -> host ctx
  private primaryFlags = new Map<number, number>(); // dev -> flags set before first use
  private primaryRefs = new Map<number, number>();
  private ctxDev = new Map<number, number>();
  private currentCtx = 0;
  private modules = new Map<number, { host: number; image: Buffer; lib: boolean; params?: ImageParams }>();
  private funcs = new Map<number, FuncInfo>();
  private streams = new Map<number, number>();
  private events = new Map<number, number>();
  private allocs = new Map<number, Alloc>();
  private bases: number[] = [];                      // sorted allocation bases
  private memBytes = 0;
  private argBuf = Buffer.allocUnsafeSlow(ARG_BUF);
  private argBase: number;
  private out1 = [0];
  private out2 = [0];
  readonly blobOut: Buffer;

  readonly sessionId: number;
  private paramSource: 'driver' | 'image';
  private log: (line: string) => void;
  private fallbackLogged = false;
  constructor(drv: CudaDriver, opts: SessionOptions) {
    this.drv = drv;
    this.sessionId = opts.sessionId;
    this.paramSource = opts.paramSource ?? 'driver';
    this.log = opts.log ?? (() => {});
    this.quota = opts.quotaBytes;
    this.stats = opts.stats;
    this.argBase = drv.addressOf(this.argBuf);
    this.blobOut = Buffer.allocUnsafeSlow(opts.maxPayload);
  }

  private num(v: number | bigint): number { return typeof v === 'bigint' ? Number(v) : v; }

  /** Device range [p, p+n) must lie inside one of this session's allocations. */
  ownsRange(p: number, n: number): boolean {
    const b = this.bases;
    let lo = 0, hi = b.length - 1, idx = -1;
    while (lo <= hi) { const mid = (lo + hi) >> 1; if (b[mid] <= p) { idx = mid; lo = mid + 1; } else hi = mid - 1; }
    if (idx < 0) return false;
    const a = this.allocs.get(b[idx])!;
    return p + n <= b[idx] + a.size;
  }

  private addAlloc(p: number, size: number): void {
    this.allocs.set(p, { size, ctx: this.currentHostCtx() });
    const b = this.bases;
    let i = b.length; while (i > 0 && b[i - 1] > p) i--;
    b.splice(i, 0, p);
    this.memBytes += size;
    this.stats[STAT.memBytes] = this.memBytes; this.stats[STAT.allocs] = this.allocs.size;
  }
  private dropAlloc(p: number): boolean {
    const a = this.allocs.get(p);
    if (!a) return false;
    this.allocs.delete(p);
    this.bases.splice(this.bases.indexOf(p), 1);
    this.memBytes -= a.size;
    this.stats[STAT.memBytes] = this.memBytes; this.stats[STAT.allocs] = this.allocs.size;
    return true;
  }

  private currentHostCtx(): number { return this.currentCtx ? this.ctxs.get(this.currentCtx) ?? 0 : 0; }
  private isPrimaryId(id: number): number {
    const base = PROTOCOL.kinds.ctx * 2 ** 48 + PROTOCOL.primaryBase;
    return id >= base && id < base + 64 ? id - base : -1;
  }
  /** A guest's primary context is a context of its own on the host, so one guest's sticky fault
   *  (an illegal address poisons a context) does not take down the other sessions of this daemon. */
  private primaryCtx(dev: number): number {
    const id = PROTOCOL.kinds.ctx * 2 ** 48 + PROTOCOL.primaryBase + dev;
    let host = this.ctxs.get(id);
    if (host === undefined) {
      const r = this.drv.cuCtxCreate(this.out1, this.primaryFlags.get(dev) ?? 0, dev);
      if (r) throw Object.assign(new Error('ctx'), { cuda: r });
      host = this.num(this.out1[0]);
      this.ctxs.set(id, host); this.ctxDev.set(id, dev);
      this.drv.cuCtxSetCurrent(this.currentHostCtx());
    }
    return host;
  }
  private stream(id: number): number {
    if (id <= 2) return id;
    const s = this.streams.get(id);
    if (s === undefined) throw Object.assign(new Error('stream'), { cuda: CU.invalidHandle });
    return s;
  }
  private lookup(map: Map<number, number>, id: number): number {
    const h = map.get(id);
    if (h === undefined) throw Object.assign(new Error('handle'), { cuda: CU.invalidHandle });
    return h;
  }
  private checkRange(p: number, n: number): void {
    if (!this.ownsRange(p, n)) throw Object.assign(new Error('range'), { cuda: CU.invalidValue });
  }

  /** Executes one frame. `a` holds the u64 args as numbers, `blob` the trailing bytes (a view into the
   *  receive buffer, valid only during this call). Returns null for fire-and-forget ops. */
  dispatch(op: number, a: number[], blob: Buffer): Reply | null {
    this.stats[STAT.calls]++;
    if (!this.helloDone && op !== OP.Hello) throw new ProtocolViolation('first frame must be Hello');
    try {
      return this.run(op, a, blob);
    } catch (err) {
      const code = (err as { cuda?: number }).cuda;
      if (code === undefined) throw err;
      return { status: code, outs: new Array<number>(NOUTS.get(op) ?? 0).fill(0) };
    }
  }

  private ret(status: number, outs: number[] = []): Reply { return { status, outs }; }

  private run(op: number, a: number[], blob: Buffer): Reply | null {
    const d = this.drv, o1 = this.out1, o2 = this.out2;
    switch (op) {
      case OP.Hello: {
        if (a[0] !== PROTOCOL.magic) throw new ProtocolViolation('bad magic');
        if (a[1] !== Number(PROTO_HASH)) return this.ret(CU.notSupported, [0, 0, 0, 0, 0]);
        this.helloDone = true;
        d.cuInit(0);
        d.cuDriverGetVersion(o1); const ver = o1[0];
        d.cuDeviceGetCount(o2);
        const caps = PROTOCOL.caps.asyncAlloc | PROTOCOL.caps.nvml | PROTOCOL.caps.libraries | (d.cuFuncGetParamInfo ? PROTOCOL.caps.paramInfo : 0);
        return this.ret(CU.ok, [ver, caps, PROTOCOL.maxPayload, o2[0], this.sessionId]);
      }
      case OP.Nop: return this.ret(CU.ok);
      case OP.DeviceProps: return this.deviceProps(a[0]);
      case OP.CtxCreate: {
        const r = d.cuCtxCreate(o1, a[1], a[2]);
        if (r) return this.ret(r);
        this.ctxs.set(a[0], this.num(o1[0])); this.ctxDev.set(a[0], a[2]);
        this.currentCtx = a[0];
        return this.ret(CU.ok);
      }
      case OP.CtxDestroy: {
        const h = this.lookup(this.ctxs, a[0]);
        this.ctxs.delete(a[0]);
        if (this.currentCtx === a[0]) this.currentCtx = 0;
        return this.fire(d.cuCtxDestroy(h));
      }
      case OP.CtxSetCurrent: {
        const dev = this.isPrimaryId(a[0]);
        const h = a[0] === 0 ? 0 : dev >= 0 ? this.primaryCtx(dev) : this.lookup(this.ctxs, a[0]);
        this.currentCtx = a[0];
        return this.fire(d.cuCtxSetCurrent(h));
      }
      case OP.CtxSynchronize: return this.ret(d.cuCtxSynchronize());
      case OP.CtxGetDevice: { const r = d.cuCtxGetDevice(o1); return this.ret(r, [o1[0]]); }
      case OP.PrimaryCtxRetain: this.primaryCtx(a[0]); this.primaryRefs.set(a[0], (this.primaryRefs.get(a[0]) ?? 0) + 1); return this.ret(CU.ok);
      case OP.PrimaryCtxRelease: this.primaryRefs.set(a[0], Math.max(0, (this.primaryRefs.get(a[0]) ?? 0) - 1)); return null;
      case OP.PrimaryCtxGetState: return this.ret(CU.ok, [this.primaryFlags.get(a[0]) ?? 0, (this.primaryRefs.get(a[0]) ?? 0) > 0 ? 1 : 0]);
      case OP.PrimaryCtxSetFlags: this.primaryFlags.set(a[0], a[1]); return this.ret(CU.ok);
      case OP.PrimaryCtxReset: return this.ret(CU.ok);
      case OP.CtxGetLimit: { const r = d.cuCtxGetLimit(o1, a[0]); return this.ret(r, [this.num(o1[0])]); }
      case OP.CtxSetLimit: return this.ret(d.cuCtxSetLimit(a[0], a[1]));
      case OP.CtxGetStreamPriorityRange: { const r = d.cuCtxGetStreamPriorityRange(o1, o2); return this.ret(r, [o1[0] >>> 0, o2[0] >>> 0]); }
      case OP.CtxGetFlags: { const r = d.cuCtxGetFlags(o1); return this.ret(r, [o1[0]]); }
      case OP.MemAlloc: case OP.MemAllocAsync: {
        const n = a[0];
        if (n <= 0) return this.ret(CU.invalidValue, [0]);
        if (this.memBytes + n > this.quota) return this.ret(CU.outOfMemory, [0]);
        const r = op === OP.MemAlloc ? d.cuMemAlloc(o1, n) : d.cuMemAllocAsync(o1, n, this.stream(a[1]));
        if (r) return this.ret(r, [0]);
        const p = this.num(o1[0]);
        this.addAlloc(p, n);
        return this.ret(CU.ok, [p]);
      }
      case OP.MemFree: case OP.MemFreeAsync: {
        if (!this.allocs.has(a[0])) return this.fire(CU.invalidValue);
        const r = op === OP.MemFree ? d.cuMemFree(a[0]) : d.cuMemFreeAsync(a[0], this.stream(a[1]));
        if (!r) this.dropAlloc(a[0]);
        return this.fire(r);
      }
      case OP.MemGetInfo: {
        const r = d.cuMemGetInfo(o1, o2);
        const total = Math.min(this.num(o2[0]), this.quota);
        return this.ret(r, [Math.max(0, Math.min(this.num(o1[0]), total - this.memBytes)), total]);
      }
      case OP.MemcpyHtoD: case OP.MemcpyHtoDSync: {
        const n = blob.length;
        if (!this.ownsRange(a[0], n)) return op === OP.MemcpyHtoD ? this.fire(CU.invalidValue) : this.ret(CU.invalidValue);
        // The blob lives in the receive buffer, which is reused: async copies are staged synchronously.
        const r = d.cuMemcpyHtoD(a[0], blob, n);
        return op === OP.MemcpyHtoD ? this.fire(r) : this.ret(r);
      }
      case OP.MemcpyDtoH: {
        const n = a[1];
        if (n > this.blobOut.length) throw new ProtocolViolation('DtoH larger than a frame');
        this.checkRange(a[0], n);
        const s = this.stream(a[2]);
        const r = s === 0 ? d.cuMemcpyDtoH(this.blobOut, a[0], n) : d.cuMemcpyDtoHAsync(this.blobOut, a[0], n, s) || d.cuStreamSynchronize(s);
        return { status: r, outs: [], blob: this.blobOut, blobLen: r ? 0 : n };
      }
      case OP.MemcpyDtoD: {
        if (!this.ownsRange(a[0], a[2]) || !this.ownsRange(a[1], a[2])) return this.fire(CU.invalidValue);
        return this.fire(a[4] ? d.cuMemcpyDtoDAsync(a[0], a[1], a[2], this.stream(a[3])) : d.cuMemcpyDtoD(a[0], a[1], a[2]));
      }
      case OP.Memset: {
        const [dst, value, elem, count, sid, isAsync] = a;
        if (![1, 2, 4].includes(elem) || !this.ownsRange(dst, count * elem)) return this.fire(CU.invalidValue);
        const s = this.stream(sid);
        const fn = elem === 1 ? (isAsync ? d.cuMemsetD8Async : d.cuMemsetD8) : elem === 2 ? (isAsync ? d.cuMemsetD16Async : d.cuMemsetD16) : (isAsync ? d.cuMemsetD32Async : d.cuMemsetD32);
        return this.fire(isAsync ? fn(dst, value, count, s) : fn(dst, value, count));
      }
      case OP.MemGetAddressRange: {
        const b = this.bases.filter((x) => x <= a[0]).pop();
        if (b === undefined || !this.ownsRange(a[0], 1)) return this.ret(CU.notFound, [0, 0]);
        return this.ret(CU.ok, [b, this.allocs.get(b)!.size]);
      }
      case OP.ModuleLoadData: case OP.LibraryLoadData: {
        // The driver trusts the sizes inside an image: never hand it one that claims more than it has.
        if (!imageFits(blob)) return this.ret(CU.invalidImage);
        const image = Buffer.allocUnsafeSlow(blob.length + 1);
        blob.copy(image); image[blob.length] = 0;
        const lib = op === OP.LibraryLoadData;
        const r = lib ? d.cuLibraryLoadData(o1, image, null, null, 0, null, null, 0) : d.cuModuleLoadData(o1, image);
        if (!r) this.modules.set(a[0], { host: this.num(o1[0]), image, lib });
        return this.ret(r);
      }
      case OP.ModuleUnload: case OP.LibraryUnload: {
        const m = this.modules.get(a[0]);
        if (!m) return this.fire(CU.invalidHandle);
        this.modules.delete(a[0]);
        // The driver's function handles die with the module: never hand it one again.
        for (const [id, f] of this.funcs) if (f.module === a[0]) this.funcs.delete(id);
        return this.fire(m.lib ? d.cuLibraryUnload(m.host) : d.cuModuleUnload(m.host));
      }
      case OP.ModuleGetFunction: case OP.LibraryGetKernel: return this.getFunction(op === OP.LibraryGetKernel, a, blob);
      case OP.ModuleGetGlobal: case OP.LibraryGetGlobal: {
        const m = this.modules.get(a[0]);
        if (!m) return this.ret(CU.invalidHandle, [0, 0]);
        const name = blob.toString('latin1');
        const r = m.lib ? d.cuLibraryGetGlobal(o1, o2, m.host, name) : d.cuModuleGetGlobal(o1, o2, m.host, name);
        // Globals are device memory the guest may copy to: register them as owned (not freed by us).
        if (!r && !this.allocs.has(this.num(o1[0]))) { this.addAlloc(this.num(o1[0]), this.num(o2[0])); this.memBytes -= this.num(o2[0]); this.allocs.get(this.num(o1[0]))!.ctx = -1; }
        return this.ret(r, [this.num(o1[0]), this.num(o2[0])]);
      }
      case OP.FuncGetAttribute: { const r = d.cuFuncGetAttribute(o1, a[1], this.func(a[0]).host); return this.ret(r, [o1[0] >>> 0]); }
      case OP.FuncSetAttribute: return this.fire(d.cuFuncSetAttribute(this.func(a[0]).host, a[1], a[2] | 0));
      case OP.FuncSetCacheConfig: return this.fire(d.cuFuncSetCacheConfig(this.func(a[0]).host, a[1]));
      case OP.OccupancyMaxActiveBlocks: { const r = d.cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(o1, this.func(a[0]).host, a[1], a[2], a[3]); return this.ret(r, [o1[0]]); }
      case OP.OccupancyMaxPotentialBlockSize: { const r = d.cuOccupancyMaxPotentialBlockSizeWithFlags(o1, o2, this.func(a[0]).host, null, a[1], a[2], a[3]); return this.ret(r, [o1[0], o2[0]]); }
      case OP.LaunchKernel: {
        const f = this.funcs.get(a[0]);
        if (!f) return this.fire(CU.invalidHandle);
        if (!f.known) return this.fire(CU.notSupported);
        if (blob.length !== f.argBytes) return this.fire(CU.invalidValue);
        if (this.foreignPointer(f, blob, 0)) return this.fire(CU.invalidValue);
        blob.copy(this.argBuf, 0);
        return this.fire(d.cuLaunchKernel(f.host, a[1], a[2], a[3], a[4], a[5], a[6], a[7], this.stream(a[8]), f.ptrsAddr, null));
      }
      case OP.StreamCreate: {
        if (a[0] <= 2 || this.streams.has(a[0])) return this.fire(CU.invalidHandle);
        const r = d.cuStreamCreateWithPriority(o1, a[1], a[2] | 0);
        if (!r) this.streams.set(a[0], this.num(o1[0]));
        return this.fire(r);
      }
      case OP.StreamDestroy: { const s = this.lookup(this.streams, a[0]); this.streams.delete(a[0]); return this.fire(d.cuStreamDestroy(s)); }
      case OP.StreamSynchronize: return this.ret(d.cuStreamSynchronize(this.stream(a[0])));
      case OP.StreamQuery: return this.ret(d.cuStreamQuery(this.stream(a[0])));
      case OP.StreamWaitEvent: return this.fire(d.cuStreamWaitEvent(this.stream(a[0]), this.lookup(this.events, a[1]), a[2]));
      case OP.EventCreate: {
        if (this.events.has(a[0])) return this.fire(CU.invalidHandle);
        const r = d.cuEventCreate(o1, a[1]);
        if (!r) this.events.set(a[0], this.num(o1[0]));
        return this.fire(r);
      }
      case OP.EventRecord: return this.fire(d.cuEventRecord(this.lookup(this.events, a[0]), this.stream(a[1])));
      case OP.EventSynchronize: return this.ret(d.cuEventSynchronize(this.lookup(this.events, a[0])));
      case OP.EventQuery: return this.ret(d.cuEventQuery(this.lookup(this.events, a[0])));
      case OP.EventElapsedTime: {
        const r = d.cuEventElapsedTime(o1, this.lookup(this.events, a[0]), this.lookup(this.events, a[1]));
        const f = Buffer.alloc(4); f.writeFloatLE(r ? 0 : o1[0]);
        return this.ret(r, [f.readUInt32LE(0)]);
      }
      case OP.EventDestroy: { const e = this.lookup(this.events, a[0]); this.events.delete(a[0]); return this.fire(d.cuEventDestroy(e)); }
      case OP.NvmlDeviceInfo: return this.nvmlInfo(a[0]);
      default: throw new ProtocolViolation(`unknown op ${op}`);
    }
  }

  /** The hot path: a fire-and-forget launch decoded in place from the receive buffer (no arg array,
   *  no blob view), since programs issue them by the hundred thousand. */
  launchInPlace(b: Buffer, off: number, len: number): void {
    this.stats[STAT.calls]++;
    if (!this.helloDone) throw new ProtocolViolation('first frame must be Hello');
    if (len < 72) throw new ProtocolViolation('short LaunchKernel frame');
    const f = this.funcs.get(u64(b, off));
    if (!f) { this.fire(CU.invalidHandle); return; }
    if (!f.known) { this.fire(CU.notSupported); return; }
    if (len - 72 !== f.argBytes) { this.fire(CU.invalidValue); return; }
    if (this.foreignPointer(f, b, off + 72)) { this.fire(CU.invalidValue); return; }
    b.copy(this.argBuf, 0, off + 72, off + len);
    const sid = u64(b, off + 64);
    const s = sid <= 2 ? sid : this.streams.get(sid);
    if (s === undefined) { this.fire(CU.invalidHandle); return; }
    this.fire(this.drv.cuLaunchKernel(f.host, b.readUInt32LE(off + 8), b.readUInt32LE(off + 16), b.readUInt32LE(off + 24),
      b.readUInt32LE(off + 32), b.readUInt32LE(off + 40), b.readUInt32LE(off + 48), b.readUInt32LE(off + 56), s, f.ptrsAddr, null));
  }

  /** A kernel argument that is device memory the driver knows but this session does not own (another
   *  guest's buffer) blocks the launch. Arguments inside the session's own allocations cost one binary
   *  search; other 8-byte values (sizes, doubles) one cuMemGetAddressRange. */
  private foreignPointer(f: FuncInfo, b: Buffer, off: number): boolean {
    for (const o of f.wide) {
      const v = u64(b, off + o);
      if (v === 0 || this.ownsRange(v, 1)) continue;
      if (this.drv.cuMemGetAddressRange(this.out1, this.out2, v) === 0) return true;
    }
    return false;
  }

  /** Fire-and-forget result: a failure is kept for the guest's next synchronous call. */
  private fire(r: number): null {
    if (r && !this.pending) { this.pending = r; this.stats[STAT.asyncErrors]++; }
    return null;
  }

  private func(id: number): FuncInfo {
    const f = this.funcs.get(id);
    if (!f) throw Object.assign(new Error('func'), { cuda: CU.invalidHandle });
    return f;
  }

  private getFunction(kernel: boolean, a: number[], blob: Buffer): Reply {
    const d = this.drv, o1 = this.out1;
    const m = this.modules.get(a[0]);
    if (!m) return this.ret(CU.invalidHandle, [0]);
    const name = blob.toString('latin1');
    const r = m.lib ? d.cuLibraryGetKernel(o1, m.host, name) : d.cuModuleGetFunction(o1, m.host, name);
    if (r) return this.ret(r, [0]);
    const host = this.num(o1[0]);
    const info = this.paramSource === 'image' ? null : (m.lib ? d.cuKernelGetParamInfo : d.cuFuncGetParamInfo) as ParamInfoFn | null;
    const res = resolveParams(info, host, name, () => (m.params ??= new ImageParams(m.image, this.smArch())),
      this.paramSource === 'image' ? 'SMOL_CUDA_PARAM_LAYOUT=image' : undefined);
    if (res.fallback && !this.fallbackLogged) {
      this.fallbackLogged = true;
      this.log(`kernel parameter layouts come from the module images: ${res.fallback}`);
    }
    if (!res.slots) {
      const why = res.reason!.slice(0, MAX_REASON);
      this.log(`launches of ${name} will fail with CUDA_ERROR_NOT_SUPPORTED: ${why}`);
      this.funcs.set(a[1], { host, module: a[0], known: false, nparams: 0, argBytes: 0, ptrs: Buffer.alloc(0), ptrsAddr: 0, wide: [] });
      const text = Buffer.from(why, 'latin1');
      return { status: CU.ok, outs: [LAYOUT_UNKNOWN], blob: text, blobLen: text.length };
    }
    const slots = res.slots, nparams = slots.length;
    let argBytes = 0;
    const ptrs = Buffer.allocUnsafeSlow(Math.max(8, nparams * 8));
    for (let i = 0; i < nparams; i++) {
      const { offset, size } = slots[i];
      if (offset + size > ARG_BUF) return this.ret(CU.notSupported, [0]);
      ptrs.writeBigUInt64LE(BigInt(this.argBase + offset), i * 8);
      argBytes = Math.max(argBytes, offset + size);
    }
    const wide = slots.filter((p) => p.size === 8).map((p) => p.offset);
    this.funcs.set(a[1], { host, module: a[0], known: true, nparams, argBytes, ptrs, ptrsAddr: this.drv.addressOf(ptrs), wide });
    const out = Buffer.alloc(nparams * 8);
    slots.forEach((p, i) => { out.writeUInt32LE(p.offset, i * 8); out.writeUInt32LE(p.size, i * 8 + 4); });
    return { status: CU.ok, outs: [nparams], blob: out, blobLen: out.length };
  }

  /** SM version (e.g. 90) of the current context's device, so the image's matching cubin is read first. */
  private smArch(): number {
    const dev = this.ctxDev.get(this.currentCtx) ?? 0;
    if (this.drv.cuDeviceGetAttribute(this.out1, 75, dev) || this.drv.cuDeviceGetAttribute(this.out2, 76, dev)) return 0;
    return (this.out1[0] | 0) * 10 + (this.out2[0] | 0);
  }

  private deviceProps(dev: number): Reply {
    const d = this.drv, o1 = this.out1, b = this.blobOut;
    b.fill(0, 0, 280 + PROTOCOL.attrCount * 4);
    let r = d.cuDeviceGetName(b, 256, dev);
    if (r) return this.ret(r);
    r = d.cuDeviceGetUuid(b.subarray(256, 272), dev);
    if (r) return this.ret(r);
    d.cuDeviceTotalMem(o1, dev);
    b.writeBigUInt64LE(BigInt(Math.min(this.num(o1[0]), this.quota)), 272);
    for (let i = 1; i <= PROTOCOL.attrCount; i++) {
      if (!d.cuDeviceGetAttribute(o1, i, dev)) b.writeInt32LE(o1[0] | 0, 280 + (i - 1) * 4);
    }
    return { status: CU.ok, outs: [], blob: b, blobLen: 280 + PROTOCOL.attrCount * 4 };
  }

  private nvmlInfo(dev: number): Reply {
    const d = this.drv, o1 = this.out1, o2 = this.out2;
    let r = d.cuInit(0);
    if (!r) r = d.cuDeviceTotalMem(o1, dev);
    if (r) return this.ret(r, [0, 0, 0, 0, 0]);
    const total = this.num(o1[0]);
    // Free memory needs a context: borrow this session's own.
    const ctx = this.primaryCtx(dev);
    d.cuCtxSetCurrent(ctx);
    const mr = d.cuMemGetInfo(o1, o2);
    d.cuCtxSetCurrent(this.currentHostCtx());
    const free = mr ? total : this.num(o1[0]);
    this.blobOut.fill(0, 0, 32);
    d.cuDeviceGetPCIBusId(this.blobOut, 32, dev);
    return { status: CU.ok, outs: [total, free, total - free, 0, 0], blob: this.blobOut, blobLen: 32 };
  }

  /** Frees everything the guest held: called when its connection ends, however it ended. */
  cleanup(): void {
    const d = this.drv;
    for (const s of this.streams.values()) d.cuStreamDestroy(s);
    for (const e of this.events.values()) d.cuEventDestroy(e);
    for (const [p, a] of this.allocs) {
      if (a.ctx < 0) continue;
      d.cuCtxSetCurrent(a.ctx);
      d.cuMemFree(p);
    }
    for (const m of this.modules.values()) (m.lib ? d.cuLibraryUnload : d.cuModuleUnload)(m.host);
    for (const h of this.ctxs.values()) d.cuCtxDestroy(h);
    d.cuCtxSetCurrent(0);
    this.streams.clear(); this.events.clear(); this.allocs.clear(); this.bases = []; this.modules.clear(); this.ctxs.clear();
    this.memBytes = 0;
    this.stats[STAT.memBytes] = 0; this.stats[STAT.allocs] = 0;
  }
}

export function u64(buf: Buffer, off: number): number {
  return buf.readUInt32LE(off) + buf.readUInt32LE(off + 4) * pow32;
}

/** A fatbin or ELF image whose own header claims no more bytes than were sent; PTX is NUL-terminated by us. */
export function imageFits(b: Buffer): boolean {
  if (b.length < 16) return b.length > 0 && ![0x7f, 0x50, 0xb1].includes(b[0]); // too short for any binary header
  const magic = b.readUInt32LE(0);
  if (magic === 0x466243b1) return false; // a wrapper holds a guest pointer; the shim unwraps it
  if (magic === 0xba55ed50) return b.readUInt16LE(6) + Number(b.readBigUInt64LE(8)) <= b.length;
  if (magic === 0x464c457f) {
    if (b.length < 64) return false;
    return Number(b.readBigUInt64LE(0x28)) + b.readUInt16LE(0x3a) * b.readUInt16LE(0x3c) <= b.length;
  }
  return true;
}
