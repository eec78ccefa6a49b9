/**
 * A CUDA driver stand-in for fuzzing the daemon's session: it keeps its own table of device
 * allocations and throws DriverMisuse whenever the session hands it a range outside them, a host buffer
 * shorter than the byte count, or a pointer it never allocated. The real driver would read or write
 * memory out of bounds there (or another guest's buffer), so each throw is a hole in the session's checks.
 */
import type { CudaDriver } from '../../../src/cuda/daemon/driver/cuda.js';

export class DriverMisuse extends Error {
  constructor(message: string) { super(message); this.name = 'DriverMisuse'; }
}

/** Where the fake hands out device memory, and a range it knows that belongs to "another guest". */
export const DEVICE_BASE = 0x7f00_0000_0000;
export const FOREIGN = { base: 0xbad0_0000, size: 0x1000 };

export function fakeDriver(): CudaDriver {
  const allocs = new Map<number, number>();
  let next = DEVICE_BASE;
  let handles = 0x1000;
  const inside = (p: number, n: number, what: string) => {
    if (!(n >= 0) || !Number.isFinite(p)) throw new DriverMisuse(`${what}: range ${p}+${n}`);
    for (const [b, s] of allocs) if (p >= b && p + n <= b + s) return;
    throw new DriverMisuse(`${what}: [0x${p.toString(16)}, +${n}) is not inside one allocation`);
  };
  const host = (buf: unknown, n: number, what: string) => {
    if (!Buffer.isBuffer(buf) || buf.length < n) throw new DriverMisuse(`${what}: host buffer of ${(buf as Buffer | null)?.length} bytes for ${n}`);
  };
  const out = (o: unknown, v: number) => { (o as number[])[0] = v; };
  const alloc = (o: unknown, n: number) => {
    if (!(n > 0) || n > 2 ** 40) throw new DriverMisuse(`cuMemAlloc of ${n} bytes`);
    allocs.set(next, n); out(o, next);
    next += Math.ceil(n / 0x100000 + 1) * 0x100000;
    return 0;
  };
  const free = (p: number) => { if (!allocs.delete(p)) throw new DriverMisuse(`cuMemFree of 0x${p.toString(16)}, never allocated`); return 0; };
  const memset = (size: number) => (dst: number, _v: number, count: number) => { inside(dst, count * size, `cuMemsetD${size * 8}`); return 0; };
  const handle = (o: unknown) => { out(o, handles += 0x10); return 0; };
  const impl: Record<string, unknown> = {
    path: 'fuzz',
    addressOf: () => 0x5000,
    cuDriverGetVersion: (o: unknown) => { out(o, 13000); return 0; },
    cuDeviceGetCount: (o: unknown) => { out(o, 1); return 0; },
    cuDeviceGetName: (b: unknown, n: number) => { host(b, n, 'cuDeviceGetName'); return 0; },
    cuDeviceGetUuid: (b: unknown) => { host(b, 16, 'cuDeviceGetUuid'); return 0; },
    cuDeviceGetPCIBusId: (b: unknown, n: number) => { host(b, n, 'cuDeviceGetPCIBusId'); return 0; },
    cuDeviceTotalMem: (o: unknown) => { out(o, 16 * 2 ** 30); return 0; },
    cuDeviceGetAttribute: (o: unknown, attr: number) => { out(o, attr === 75 ? 9 : 1); return 0; },
    cuMemGetInfo: (f: unknown, t: unknown) => { out(f, 8 * 2 ** 30); out(t, 16 * 2 ** 30); return 0; },
    cuCtxCreate: handle, cuStreamCreateWithPriority: handle, cuEventCreate: handle,
    cuModuleLoadData: (o: unknown, img: unknown) => { host(img, 1, 'cuModuleLoadData'); return handle(o); },
    cuLibraryLoadData: (o: unknown, img: unknown) => { host(img, 1, 'cuLibraryLoadData'); return handle(o); },
    cuModuleGetFunction: handle, cuLibraryGetKernel: handle,
    cuModuleGetGlobal: (p: unknown, s: unknown) => alloc(p, 256) || (out(s, 256), 0),
    cuLibraryGetGlobal: (p: unknown, s: unknown) => alloc(p, 256) || (out(s, 256), 0),
    cuMemAlloc: alloc,
    cuMemAllocAsync: alloc,
    cuMemFree: free,
    cuMemFreeAsync: free,
    cuMemcpyHtoD: (dst: number, src: unknown, n: number) => { host(src, n, 'cuMemcpyHtoD'); inside(dst, n, 'cuMemcpyHtoD'); return 0; },
    cuMemcpyDtoH: (dst: unknown, src: number, n: number) => { host(dst, n, 'cuMemcpyDtoH'); inside(src, n, 'cuMemcpyDtoH'); return 0; },
    cuMemcpyDtoHAsync: (dst: unknown, src: number, n: number) => { host(dst, n, 'cuMemcpyDtoHAsync'); inside(src, n, 'cuMemcpyDtoHAsync'); return 0; },
    cuMemcpyDtoD: (d: number, s: number, n: number) => { inside(d, n, 'cuMemcpyDtoD dst'); inside(s, n, 'cuMemcpyDtoD src'); return 0; },
    cuMemcpyDtoDAsync: (d: number, s: number, n: number) => { inside(d, n, 'cuMemcpyDtoDAsync dst'); inside(s, n, 'cuMemcpyDtoDAsync src'); return 0; },
    cuMemsetD8: memset(1), cuMemsetD16: memset(2), cuMemsetD32: memset(4),
    cuMemsetD8Async: memset(1), cuMemsetD16Async: memset(2), cuMemsetD32Async: memset(4),
    cuMemGetAddressRange: (b: unknown, s: unknown, p: number) => {
      if (p >= FOREIGN.base && p < FOREIGN.base + FOREIGN.size) { out(b, FOREIGN.base); out(s, FOREIGN.size); return 0; }
      for (const [base, size] of allocs) if (p >= base && p < base + size) { out(b, base); out(s, size); return 0; }
      return 1;
    },
    // The driver's own param info is absent, so layouts come from the guest's module image (the parser under test).
    cuFuncGetParamInfo: null,
    cuKernelGetParamInfo: null,
  };
  return new Proxy(impl, {
    get(t, name: string) {
      if (name in t) return t[name];
      return () => 0;
    },
  }) as unknown as CudaDriver;
}
