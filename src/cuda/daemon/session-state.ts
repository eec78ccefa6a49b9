/**
 * What one guest process holds on the GPU: its handles, allocations, quota and pending async error, and
 * the checks every op handler (ops/*.ts) goes through. Every handle and device pointer a guest names is
 * looked up in these tables first, so a guest can reach only what it created (the real driver would crash
 * the daemon on a forged handle).
 */
import type { CudaDriver } from './driver/cuda.js';
import { CudaError } from '../../errors/index.js';
import { PROTOCOL, type OpArgs } from '../protocol/index.js';
import type { ImageParams } from './params/index.js';

export const CU = { ok: 0, invalidValue: 1, outOfMemory: 2, invalidImage: 200, invalidContext: 201, invalidHandle: 400, notFound: 500, notSupported: 801, deviceUnavailable: 46 } as const;
/** Status counters (a Float64Array over a SharedArrayBuffer that session-process.ts publishes for `gpu status`). */
export const STAT = { calls: 0, memBytes: 1, allocs: 2, asyncErrors: 3, handles: 4, size: 8 } as const;

export class ProtocolViolation extends Error {}

export interface Reply { status: number; outs: number[]; blob?: Buffer; blobLen?: number }

/** One handler per op: `a` names the frame's arguments, `blob` is a view into the receive buffer, valid
 *  only during the call. Returns null for fire-and-forget ops. */
export type OpHandlers = { readonly [K in keyof OpArgs]: (s: SessionState, a: OpArgs[K], blob: Buffer) => Reply | null };

interface Alloc { size: number; ctx: number }
/** `known` is false when neither the driver nor the image gave the layout: launches are refused. */
export interface FuncInfo { host: number; module: number; known: boolean; nparams: number; argBytes: number; ptrsAddr: number; ptrs: Buffer; wide: number[] }
export interface ModuleInfo { host: number; image: Buffer; lib: boolean; params?: ImageParams }

/** Bytes of packed kernel arguments a launch can carry (the staging buffer the driver reads them from). */
export const ARG_BUF = 64 * 1024;
const pow32 = 2 ** 32;

export interface SessionOptions {
  quotaBytes: number; stats: Float64Array; maxPayload: number; sessionId: number;
  /** 'image' skips the driver's param info and reads every layout from the module image (for checks). */
  paramSource?: 'driver' | 'image';
  /** One line for the daemon's log, e.g. why a kernel cannot be launched. */
  log?: (line: string) => void;
}

export class SessionState {
  readonly drv: CudaDriver;
  readonly quota: number;
  readonly stats: Float64Array;
  readonly sessionId: number;
  readonly paramSource: 'driver' | 'image';
  readonly log: (line: string) => void;
  helloDone = false;
  fallbackLogged = false;
  /** The first failure of a fire-and-forget op, returned by the guest's next synchronous call. */
  pending = 0;
  readonly ctxs = new Map<number, number>();        // guest ctx id -> host ctx
  readonly primaryFlags = new Map<number, number>(); // dev -> flags set before first use
  readonly primaryRefs = new Map<number, number>();
  readonly ctxDev = new Map<number, number>();
  currentCtx = 0;
  readonly modules = new Map<number, ModuleInfo>();
  readonly funcs = new Map<number, FuncInfo>();
  readonly streams = new Map<number, number>();
  readonly events = new Map<number, number>();
  readonly allocs = new Map<number, Alloc>();
  bases: number[] = [];                              // sorted allocation bases
  /** Device ranges an area owns outside `allocs`, which may span adjacent pieces (VMM mappings with
   *  access set, ops/pools.ts); asked only when `allocs` says no. */
  extraRange: ((p: number, n: number) => boolean) | null = null;
  /** Addresses an area reserved for this session, accessible or not: a kernel argument there is the
   *  session's own (the driver faults if it has no access), never another guest's. */
  ownsAddress: ((p: number) => boolean) | null = null;
  /** Per-area cleanup when the session ends: after its allocations are freed, before its contexts go. */
  readonly cleanups: (() => void)[] = [];
  memBytes = 0;
  /** Kernel arguments are staged here: the driver reads them through `FuncInfo.ptrs`, which point into it. */
  readonly argBuf = Buffer.allocUnsafeSlow(ARG_BUF);
  readonly argBase: number;
  /** Out-parameters for driver calls, reused so that a call allocates nothing. */
  readonly out1 = [0];
  readonly out2 = [0];
  readonly blobOut: Buffer;

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

  num(v: number | bigint): number { return typeof v === 'bigint' ? Number(v) : v; }
  ret(status: number, outs: number[] = []): Reply { return { status, outs }; }

  /** Fire-and-forget result: a failure is kept for the guest's next synchronous call. */
  fire(r: number): null {
    if (r && !this.pending) { this.pending = r; this.stats[STAT.asyncErrors]++; }
    return null;
  }

  /** Device range [p, p+n) must lie inside one of this session's allocations. */
  ownsRange(p: number, n: number): boolean {
    const b = this.bases;
    let lo = 0, hi = b.length - 1, idx = -1;
    while (lo <= hi) { const mid = (lo + hi) >> 1; if (b[mid] <= p) { idx = mid; lo = mid + 1; } else hi = mid - 1; }
    if (idx >= 0 && p + n <= b[idx] + this.allocs.get(b[idx])!.size) return true;
    return this.extraRange !== null && this.extraRange(p, n);
  }
  checkRange(p: number, n: number): void {
    if (!this.ownsRange(p, n)) throw new CudaError('range check', CU.invalidValue);
  }

  addAlloc(p: number, size: number): void {
    this.allocs.set(p, { size, ctx: this.currentHostCtx() });
    const b = this.bases;
    let i = b.length; while (i > 0 && b[i - 1] > p) i--;
    b.splice(i, 0, p);
    this.memBytes += size;
    this.stats[STAT.memBytes] = this.memBytes; this.stats[STAT.allocs] = this.allocs.size;
  }
  dropAlloc(p: number): boolean {
    const a = this.allocs.get(p);
    if (!a) return false;
    this.allocs.delete(p);
    this.bases.splice(this.bases.indexOf(p), 1);
    this.memBytes -= a.size;
    this.stats[STAT.memBytes] = this.memBytes; this.stats[STAT.allocs] = this.allocs.size;
    return true;
  }

  currentHostCtx(): number { return this.currentCtx ? this.ctxs.get(this.currentCtx) ?? 0 : 0; }
  /** The device of a primary context id, or -1 when `id` names no primary context. */
  primaryDev(id: number): number {
    const base = PROTOCOL.kinds.ctx * 2 ** 48 + PROTOCOL.primaryBase;
    return id >= base && id < base + 64 ? id - base : -1;
  }
  /** A guest's primary context is a context of its own on the host, so one guest's sticky fault
   *  (an illegal address poisons a context) does not take down the other sessions of this daemon. */
  primaryCtx(dev: number): number {
    const id = PROTOCOL.kinds.ctx * 2 ** 48 + PROTOCOL.primaryBase + dev;
    let host = this.ctxs.get(id);
    if (host === undefined) {
      const r = this.drv.cuCtxCreate(this.out1, this.primaryFlags.get(dev) ?? 0, dev);
      if (r) throw new CudaError('cuCtxCreate', r);
      host = this.num(this.out1[0]);
      this.ctxs.set(id, host); this.ctxDev.set(id, dev);
      this.drv.cuCtxSetCurrent(this.currentHostCtx());
    }
    return host;
  }
  /** Ids 0-2 are the legacy and per-thread default streams, the same on every side. */
  stream(id: number): number {
    if (id <= 2) return id;
    const s = this.streams.get(id);
    if (s === undefined) throw new CudaError('stream lookup', CU.invalidHandle);
    return s;
  }
  lookup(map: Map<number, number>, id: number): number {
    const h = map.get(id);
    if (h === undefined) throw new CudaError('handle lookup', CU.invalidHandle);
    return h;
  }
  func(id: number): FuncInfo {
    const f = this.funcs.get(id);
    if (!f) throw new CudaError('function lookup', CU.invalidHandle);
    return f;
  }

  /** A kernel argument that is device memory the driver knows but this session does not own (another
   *  guest's buffer) blocks the launch. Arguments inside the session's own allocations cost one binary
   *  search; other 8-byte values (sizes, doubles) one cuMemGetAddressRange. */
  foreignPointer(f: FuncInfo, b: Buffer, off: number): boolean {
    for (const o of f.wide) {
      const v = u64(b, off + o);
      if (v === 0 || this.ownsRange(v, 1) || (this.ownsAddress !== null && this.ownsAddress(v))) continue;
      if (this.drv.cuMemGetAddressRange(this.out1, this.out2, v) === 0) return true;
    }
    return false;
  }
}

export function u64(buf: Buffer, off: number): number {
  return buf.readUInt32LE(off) + buf.readUInt32LE(off + 4) * pow32;
}
