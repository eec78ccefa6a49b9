/** Device memory: allocations (within the session's quota), copies and memsets inside what the session owns. */
import { CU, ProtocolViolation, type OpHandlers, type Reply, type SessionState } from '../session-state.js';

export const memoryOps = {
  MemAlloc: (s, a) => alloc(s, a.bytes, -1),
  MemAllocAsync: (s, a) => alloc(s, a.bytes, a.stream),
  MemFree: (s, a) => free(s, a.dptr, -1),
  MemFreeAsync: (s, a) => free(s, a.dptr, a.stream),
  MemGetInfo(s) {
    const r = s.drv.cuMemGetInfo(s.out1, s.out2);
    const total = Math.min(s.num(s.out2[0]), s.quota);
    return s.ret(r, [Math.max(0, Math.min(s.num(s.out1[0]), total - s.memBytes)), total]);
  },
  MemGetAddressRange(s, a) {
    const p = a.dptr;
    const b = s.bases.filter((x) => x <= p).pop();
    if (b === undefined || !s.ownsRange(p, 1)) return s.ret(CU.notFound, [0, 0]);
    return s.ret(CU.ok, [b, s.allocs.get(b)!.size]);
  },

  // The blob lives in the receive buffer, which is reused: even the async copy is staged synchronously.
  MemcpyHtoD(s, a, blob) {
    if (!s.ownsRange(a.dst, blob.length)) return s.fire(CU.invalidValue);
    return s.fire(s.drv.cuMemcpyHtoD(a.dst, blob, blob.length));
  },
  MemcpyHtoDSync(s, a, blob) {
    if (!s.ownsRange(a.dst, blob.length)) return s.ret(CU.invalidValue);
    return s.ret(s.drv.cuMemcpyHtoD(a.dst, blob, blob.length));
  },
  MemcpyDtoH(s, a) {
    const n = a.bytes, src = a.src;
    if (n > s.blobOut.length) throw new ProtocolViolation('DtoH larger than a frame');
    s.checkRange(src, n);
    const st = s.stream(a.stream), d = s.drv;
    const r = st === 0 ? d.cuMemcpyDtoH(s.blobOut, src, n) : d.cuMemcpyDtoHAsync(s.blobOut, src, n, st) || d.cuStreamSynchronize(st);
    return { status: r, outs: [], blob: s.blobOut, blobLen: r ? 0 : n };
  },
  MemcpyDtoD(s, a) {
    const dst = a.dst, src = a.src, n = a.bytes;
    if (!s.ownsRange(dst, n) || !s.ownsRange(src, n)) return s.fire(CU.invalidValue);
    return s.fire(a.isAsync ? s.drv.cuMemcpyDtoDAsync(dst, src, n, s.stream(a.stream)) : s.drv.cuMemcpyDtoD(dst, src, n));
  },
  Memset(s, a) {
    const dst = a.dst, elem = a.elemSize, count = a.count, isAsync = a.isAsync, d = s.drv;
    if ((elem !== 1 && elem !== 2 && elem !== 4) || !s.ownsRange(dst, count * elem)) return s.fire(CU.invalidValue);
    const st = s.stream(a.stream);
    const fn = elem === 1 ? (isAsync ? d.cuMemsetD8Async : d.cuMemsetD8) : elem === 2 ? (isAsync ? d.cuMemsetD16Async : d.cuMemsetD16) : (isAsync ? d.cuMemsetD32Async : d.cuMemsetD32);
    return s.fire(isAsync ? fn(dst, a.value, count, st) : fn(dst, a.value, count));
  },
} satisfies Partial<OpHandlers>;

/** `sid` -1: the synchronous cuMemAlloc. */
function alloc(s: SessionState, n: number, sid: number): Reply {
  if (n <= 0) return s.ret(CU.invalidValue, [0]);
  if (s.memBytes + n > s.quota) return s.ret(CU.outOfMemory, [0]);
  const r = sid < 0 ? s.drv.cuMemAlloc(s.out1, n) : s.drv.cuMemAllocAsync(s.out1, n, s.stream(sid));
  if (r) return s.ret(r, [0]);
  const p = s.num(s.out1[0]);
  s.addAlloc(p, n);
  return s.ret(CU.ok, [p]);
}

/** `sid` -1: the synchronous cuMemFree. */
function free(s: SessionState, p: number, sid: number): null {
  if (!s.allocs.has(p)) return s.fire(CU.invalidValue);
  const r = sid < 0 ? s.drv.cuMemFree(p) : s.drv.cuMemFreeAsync(p, s.stream(sid));
  if (!r) s.dropAlloc(p);
  return s.fire(r);
}
