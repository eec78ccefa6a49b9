/** 2D/3D copies and memsets, stream memory operations, peer queries (ops of spec-areas/copies.ts). */
import { CU, ProtocolViolation, type OpHandlers, type SessionState } from '../session-state.js';

const MT_HOST = 1, MT_DEVICE = 2;
const MEMOP = { wait32: 1, write32: 2, flush: 3, wait64: 4, write64: 5, barrier: 6 } as const;
/** Above this a product of guest-sent sizes is refused: no allocation is that large, and doubles stay exact. */
const MAX_EXTENT = 2 ** 52;

/** Per-session scratch: one copy descriptor (CUDA_MEMCPY3D is the larger, 200 bytes) and the DtoH buffer's address. */
interface Scratch { desc: Buffer; blobOutAddr: number }
const scratch = new WeakMap<SessionState, Scratch>();
function scratchOf(s: SessionState): Scratch {
  let x = scratch.get(s);
  if (!x) { x = { desc: Buffer.alloc(200), blobOutAddr: s.drv.addressOf(s.blobOut) }; scratch.set(s, x); }
  return x;
}

/**
 * Bytes from the first to one past the last byte of `depth` slices of `rows` rows of `width` bytes, or -1
 * for a shape the driver refuses (a pitch narrower than a row, a slice shorter than the rows) or one too
 * large to be inside any allocation.
 */
export function footprint(width: number, rows: number, depth: number, pitch: number, sliceRows: number): number {
  // A pitch or slice height the copy does not use still reaches the driver's descriptor: bounded too.
  if (pitch > MAX_EXTENT || sliceRows > MAX_EXTENT) return -1;
  if ((rows > 1 || depth > 1) && pitch < width) return -1;
  if (depth > 1 && sliceRows < rows) return -1;
  const n = ((depth - 1) * sliceRows + rows - 1) * pitch + width;
  return Number.isFinite(n) && n <= MAX_EXTENT ? n : -1;
}
function inside(s: SessionState, p: number, n: number): boolean { return n >= 0 && s.ownsRange(p, n); }

/** CUDA_MEMCPY2D (cuda.h, 128 bytes): src/dst X, Y, memory type, host, device, array, pitch; width, height. */
function desc2d(b: Buffer, src: [number, number, number], dst: [number, number, number], width: number, height: number): Buffer {
  b.fill(0, 0, 128);
  const side = (o: number, [type, addr, pitch]: [number, number, number]) => {
    b.writeUInt32LE(type, o + 16);
    b.writeBigUInt64LE(BigInt(addr), type === MT_HOST ? o + 24 : o + 32);
    b.writeBigUInt64LE(BigInt(pitch), o + 48);
  };
  side(0, src); side(56, dst);
  b.writeBigUInt64LE(BigInt(width), 112); b.writeBigUInt64LE(BigInt(height), 120);
  return b;
}
/** CUDA_MEMCPY3D (200 bytes) between two device ranges. */
function desc3d(b: Buffer, dst: number, dpitch: number, dheight: number, src: number, spitch: number, sheight: number, w: number, h: number, d: number): Buffer {
  b.fill(0, 0, 200);
  const side = (o: number, addr: number, pitch: number, height: number) => {
    b.writeUInt32LE(MT_DEVICE, o + 32);
    b.writeBigUInt64LE(BigInt(addr), o + 48);
    b.writeBigUInt64LE(BigInt(pitch), o + 72);
    b.writeBigUInt64LE(BigInt(height), o + 80);
  };
  side(0, src, spitch, sheight); side(88, dst, dpitch, dheight);
  b.writeBigUInt64LE(BigInt(w), 176); b.writeBigUInt64LE(BigInt(h), 184); b.writeBigUInt64LE(BigInt(d), 192);
  return b;
}

export const copyOps = {
  // The rows come packed in the frame's blob, which lives in the reused receive buffer: an async copy
  // from pageable memory returns once the driver has staged it, so the buffer is free when this returns.
  Memcpy2dHtoD(s, a, blob) {
    const w = a.width, rows = a.rows, st = s.stream(a.stream);
    if (w * rows !== blob.length) throw new ProtocolViolation('2D HtoD rows do not match the blob');
    if (!w || !rows) return s.fire(CU.ok);
    if (!inside(s, a.dst, footprint(w, rows, 1, a.dpitch, 0))) return s.fire(CU.invalidValue);
    const d = desc2d(scratchOf(s).desc, [MT_HOST, s.drv.addressOf(blob), w], [MT_DEVICE, a.dst, a.dpitch], w, rows);
    return s.fire(a.isAsync ? s.drv.cuMemcpy2DAsync(d, st) : s.drv.cuMemcpy2D(d));
  },
  Memcpy2dDtoH(s, a) {
    const w = a.width, rows = a.rows, n = w * rows;
    if (n > s.blobOut.length) throw new ProtocolViolation('2D DtoH larger than a frame');
    const st = s.stream(a.stream);
    if (!n) return { status: CU.ok, outs: [], blob: s.blobOut, blobLen: 0 };
    if (!inside(s, a.src, footprint(w, rows, 1, a.spitch, 0))) return { status: CU.invalidValue, outs: [], blob: s.blobOut, blobLen: 0 };
    const x = scratchOf(s), d = s.drv;
    const desc = desc2d(x.desc, [MT_DEVICE, a.src, a.spitch], [MT_HOST, x.blobOutAddr, w], w, rows);
    const r = st === 0 ? d.cuMemcpy2D(desc) : d.cuMemcpy2DAsync(desc, st) || d.cuStreamSynchronize(st);
    return { status: r, outs: [], blob: s.blobOut, blobLen: r ? 0 : n };
  },
  Memcpy3dDtoD(s, a) {
    const w = a.width, rows = a.rows, depth = a.depth, st = s.stream(a.stream);
    if (!w || !rows || !depth) return s.fire(CU.ok);
    if (!inside(s, a.dst, footprint(w, rows, depth, a.dpitch, a.dheight)) ||
        !inside(s, a.src, footprint(w, rows, depth, a.spitch, a.sheight))) return s.fire(CU.invalidValue);
    const d = desc3d(scratchOf(s).desc, a.dst, a.dpitch, a.dheight, a.src, a.spitch, a.sheight, w, rows, depth);
    return s.fire(a.isAsync ? s.drv.cuMemcpy3DAsync(d, st) : s.drv.cuMemcpy3D(d));
  },
  Memset2d(s, a) {
    const elem = a.elemSize, dst = a.dst, w = a.width, h = a.height, st = s.stream(a.stream), d = s.drv;
    if ((elem !== 1 && elem !== 2 && elem !== 4) || dst % elem) return s.fire(CU.invalidValue);
    if (!w || !h) return s.fire(CU.ok);
    if (!inside(s, dst, footprint(w * elem, h, 1, a.pitch, 0))) return s.fire(CU.invalidValue);
    // The value is the element's low bits, as the guest's call narrowed it.
    const v = a.value % 2 ** (8 * elem), p = a.pitch;
    if (a.isAsync) {
      const fn = elem === 1 ? d.cuMemsetD2D8Async : elem === 2 ? d.cuMemsetD2D16Async : d.cuMemsetD2D32Async;
      return s.fire(fn(dst, p, v, w, h, st));
    }
    const fn = elem === 1 ? d.cuMemsetD2D8 : elem === 2 ? d.cuMemsetD2D16 : d.cuMemsetD2D32;
    return s.fire(fn(dst, p, v, w, h));
  },

  // Enqueued on the host stream: a wait that is never satisfied stalls that stream on the GPU, as it
  // would natively, and never this process (which goes on serving the guest's other calls).
  StreamMemOp(s, a) {
    const st = s.stream(a.stream), kind = a.kind, addr = a.addr, flags = a.flags, d = s.drv;
    const wide = kind === MEMOP.wait64 || kind === MEMOP.write64;
    if (flags >= 2 ** 32) return s.fire(CU.invalidValue);
    if (kind === MEMOP.flush || kind === MEMOP.barrier) {
      const p = scratchOf(s).desc;
      p.fill(0, 0, 48); p.writeUInt32LE(kind, 0); p.writeUInt32LE(flags, 4);
      return s.fire(d.cuStreamBatchMemOp(st, 1, p, 0));
    }
    if (kind !== MEMOP.wait32 && kind !== MEMOP.write32 && !wide) return s.fire(CU.invalidValue);
    const size = wide ? 8 : 4;
    if (addr % size || !s.ownsRange(addr, size) || a.valueHi >= 2 ** 32 || a.valueLo >= 2 ** 32) return s.fire(CU.invalidValue);
    const v = (BigInt(a.valueHi) << 32n) | BigInt(a.valueLo);
    if (kind === MEMOP.wait32 || kind === MEMOP.wait64) noteWait(s, { addr, value: v, flags, wide });
    if (!wide) return s.fire((kind === MEMOP.wait32 ? d.cuStreamWaitValue32 : d.cuStreamWriteValue32)(st, addr, a.valueLo, flags));
    return s.fire((kind === MEMOP.wait64 ? d.cuStreamWaitValue64 : d.cuStreamWriteValue64)(st, addr, v, flags));
  },

  /** `attrib` 0: cuDeviceCanAccessPeer; otherwise a CUdevice_P2PAttribute. */
  DevicePeerQuery(s, a) {
    const d = s.drv, attr = a.attrib, dev = a.dev | 0, peer = a.peer | 0;
    const r = attr === 0 ? d.cuDeviceCanAccessPeer(s.out1, dev, peer) : d.cuDeviceGetP2PAttribute(s.out1, attr | 0, dev, peer);
    return s.ret(r, [r ? 0 : s.out1[0] >>> 0]);
  },
  CtxPeerAccess(s, a) {
    const id = a.peerCtx, dev = s.primaryDev(id);
    const peer = dev >= 0 ? s.primaryCtx(dev) : s.lookup(s.ctxs, id);
    if (a.flags >= 2 ** 32) return s.ret(CU.invalidValue);
    return s.ret(a.enable ? s.drv.cuCtxEnablePeerAccess(peer, a.flags) : s.drv.cuCtxDisablePeerAccess(peer));
  },
} satisfies Partial<OpHandlers>;

/**
 * Waits a guest enqueued, so that when its session ends they can be released: a wait nobody satisfies
 * would otherwise hold its stream, and with it the cleanup (cuMemFree, cuCtxDestroy wait for the
 * stream's work) and this whole session process, forever. Natively the process's exit frees the GPU
 * regardless; here the daemon must. The most recent ones are kept: older ones were most likely met.
 */
interface Wait { addr: number; value: bigint; flags: number; wide: boolean }
const MAX_WAITS = 1024;
const waits = new WeakMap<SessionState, Wait[]>();
function noteWait(s: SessionState, w: Wait): void {
  let list = waits.get(s);
  if (!list) { list = []; waits.set(s, list); }
  if (list.length >= MAX_WAITS) list.shift();
  list.push(w);
}

/** A value that meets the wait's condition, or undefined when none can (AND with 0, NOR with all ones). */
export function satisfying(w: Wait): bigint | undefined {
  const ones = w.wide ? 2n ** 64n - 1n : 2n ** 32n - 1n;
  switch (w.flags & 3) {
    case 0: case 1: return w.value;  // GEQ, EQ
    case 2: return w.value ? ones : undefined; // AND
    default: return w.value === ones ? undefined : 0n; // NOR
  }
}

/**
 * Called as the session ends, before its streams and memory are released: writes, on a stream of its
 * own that waits for nothing, a value meeting each recorded wait whose memory the session still owns.
 */
export function releaseStreamWaits(s: SessionState): void {
  const list = waits.get(s);
  if (!list?.length) return;
  waits.delete(s);
  const d = s.drv;
  if (d.cuStreamCreateWithPriority(s.out1, 1, 0)) return;
  const st = s.num(s.out1[0]);
  for (const w of list) {
    const v = satisfying(w);
    if (v === undefined || !s.ownsRange(w.addr, w.wide ? 8 : 4)) continue;
    if (w.wide) d.cuStreamWriteValue64(st, w.addr, v, 0); else d.cuStreamWriteValue32(st, w.addr, Number(v), 0);
  }
  d.cuStreamSynchronize(st);
  d.cuStreamDestroy(st);
}
