/**
 * The host's libcuda.so.1 through koffi: the only code that calls the real (or FAKE test) driver.
 * Handles and device pointers cross as uint64 so JavaScript holds plain numbers, never raw pointer
 * objects; a guest cannot forge one because sessions only pass handles they looked up themselves.
 * koffi is imported lazily so that loading the daemon's modules does not need the native addon.
 */
import { createRequire } from 'node:module';
import type { FnsOf, SigRow } from './sigs.js';
import { graphSigs } from './sigs-graphs.js';
import { poolSigs } from './sigs-pools.js';
import { copySigs } from './sigs-copies.js';
import { launchSigs } from './sigs-launch.js';
import { querySigs } from './sigs-queries.js';

const AREA_SIGS = { ...graphSigs, ...poolSigs, ...copySigs, ...launchSigs, ...querySigs };

type Fn = (...args: unknown[]) => number;
export interface CudaDriver extends FnsOf<typeof AREA_SIGS> {
  path: string;
  cuInit: Fn; cuDriverGetVersion: Fn; cuDeviceGetCount: Fn; cuDeviceGet: Fn; cuDeviceGetName: Fn;
  cuDeviceGetUuid: Fn; cuDeviceTotalMem: Fn; cuDeviceGetAttribute: Fn; cuDeviceGetPCIBusId: Fn;
  cuCtxCreate: Fn; cuCtxDestroy: Fn; cuCtxSetCurrent: Fn; cuCtxSynchronize: Fn; cuCtxGetDevice: Fn;
  cuDevicePrimaryCtxRetain: Fn; cuDevicePrimaryCtxRelease: Fn; cuDevicePrimaryCtxGetState: Fn;
  cuDevicePrimaryCtxSetFlags: Fn; cuDevicePrimaryCtxReset: Fn; cuCtxGetLimit: Fn; cuCtxSetLimit: Fn;
  cuCtxGetStreamPriorityRange: Fn; cuCtxGetFlags: Fn;
  cuMemAlloc: Fn; cuMemFree: Fn; cuMemAllocAsync: Fn; cuMemFreeAsync: Fn; cuMemGetInfo: Fn;
  cuMemcpyHtoD: Fn; cuMemcpyHtoDAsync: Fn; cuMemcpyDtoH: Fn; cuMemcpyDtoHAsync: Fn; cuMemcpyDtoD: Fn;
  cuMemcpyDtoDAsync: Fn; cuMemsetD8: Fn; cuMemsetD16: Fn; cuMemsetD32: Fn; cuMemsetD8Async: Fn;
  cuMemsetD16Async: Fn; cuMemsetD32Async: Fn; cuMemGetAddressRange: Fn;
  cuModuleLoadData: Fn; cuModuleUnload: Fn; cuModuleGetFunction: Fn; cuModuleGetGlobal: Fn;
  cuLibraryLoadData: Fn; cuLibraryUnload: Fn; cuLibraryGetKernel: Fn; cuLibraryGetGlobal: Fn;
  cuFuncGetParamInfo: Fn | null; cuKernelGetParamInfo: Fn | null; cuFuncGetAttribute: Fn; cuFuncSetAttribute: Fn;
  cuFuncSetCacheConfig: Fn; cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags: Fn;
  cuOccupancyMaxPotentialBlockSizeWithFlags: Fn; cuLaunchKernel: Fn;
  cuStreamCreateWithPriority: Fn; cuStreamDestroy: Fn; cuStreamSynchronize: Fn; cuStreamQuery: Fn;
  cuStreamWaitEvent: Fn; cuEventCreate: Fn; cuEventRecord: Fn; cuEventSynchronize: Fn; cuEventQuery: Fn;
  cuEventElapsedTime: Fn; cuEventDestroy: Fn;
  /** Native address of a Buffer (stable for Buffer.allocUnsafeSlow buffers). */
  addressOf: (buf: Buffer) => number;
  /** Copies n bytes the driver owns at addr (e.g. a linked cubin) into dst. */
  readAt: (dst: Buffer, addr: number, n: number) => void;
}

// [exported symbol, koffi signature with NAME in place of the name]; versioned symbols are what CUDA 13 exports.
const SIGS: Record<string, [string, string]> = {
  cuInit: ['cuInit', 'int NAME(unsigned int flags)'],
  cuDriverGetVersion: ['cuDriverGetVersion', 'int NAME(_Out_ int *v)'],
  cuDeviceGetCount: ['cuDeviceGetCount', 'int NAME(_Out_ int *n)'],
  cuDeviceGet: ['cuDeviceGet', 'int NAME(_Out_ int *d, int ordinal)'],
  cuDeviceGetName: ['cuDeviceGetName', 'int NAME(void *name, int len, int dev)'],
  cuDeviceGetUuid: ['cuDeviceGetUuid_v2', 'int NAME(void *uuid, int dev)'],
  cuDeviceTotalMem: ['cuDeviceTotalMem_v2', 'int NAME(_Out_ uint64_t *bytes, int dev)'],
  cuDeviceGetAttribute: ['cuDeviceGetAttribute', 'int NAME(_Out_ int *v, int attr, int dev)'],
  cuDeviceGetPCIBusId: ['cuDeviceGetPCIBusId', 'int NAME(void *s, int len, int dev)'],
  cuCtxCreate: ['cuCtxCreate_v2', 'int NAME(_Out_ uint64_t *ctx, unsigned int flags, int dev)'],
  cuCtxDestroy: ['cuCtxDestroy_v2', 'int NAME(uint64_t ctx)'],
  cuCtxSetCurrent: ['cuCtxSetCurrent', 'int NAME(uint64_t ctx)'],
  cuCtxSynchronize: ['cuCtxSynchronize', 'int NAME()'],
  cuCtxGetDevice: ['cuCtxGetDevice', 'int NAME(_Out_ int *dev)'],
  cuDevicePrimaryCtxRetain: ['cuDevicePrimaryCtxRetain', 'int NAME(_Out_ uint64_t *ctx, int dev)'],
  cuDevicePrimaryCtxRelease: ['cuDevicePrimaryCtxRelease_v2', 'int NAME(int dev)'],
  cuDevicePrimaryCtxGetState: ['cuDevicePrimaryCtxGetState', 'int NAME(int dev, _Out_ unsigned int *flags, _Out_ int *active)'],
  cuDevicePrimaryCtxSetFlags: ['cuDevicePrimaryCtxSetFlags_v2', 'int NAME(int dev, unsigned int flags)'],
  cuDevicePrimaryCtxReset: ['cuDevicePrimaryCtxReset_v2', 'int NAME(int dev)'],
  cuCtxGetLimit: ['cuCtxGetLimit', 'int NAME(_Out_ uint64_t *v, int limit)'],
  cuCtxSetLimit: ['cuCtxSetLimit', 'int NAME(int limit, uint64_t v)'],
  cuCtxGetStreamPriorityRange: ['cuCtxGetStreamPriorityRange', 'int NAME(_Out_ int *least, _Out_ int *greatest)'],
  cuCtxGetFlags: ['cuCtxGetFlags', 'int NAME(_Out_ unsigned int *flags)'],
  cuMemAlloc: ['cuMemAlloc_v2', 'int NAME(_Out_ uint64_t *p, uint64_t n)'],
  cuMemFree: ['cuMemFree_v2', 'int NAME(uint64_t p)'],
  cuMemAllocAsync: ['cuMemAllocAsync', 'int NAME(_Out_ uint64_t *p, uint64_t n, uint64_t s)'],
  cuMemFreeAsync: ['cuMemFreeAsync', 'int NAME(uint64_t p, uint64_t s)'],
  cuMemGetInfo: ['cuMemGetInfo_v2', 'int NAME(_Out_ uint64_t *free, _Out_ uint64_t *total)'],
  cuMemcpyHtoD: ['cuMemcpyHtoD_v2', 'int NAME(uint64_t d, const void *h, uint64_t n)'],
  cuMemcpyHtoDAsync: ['cuMemcpyHtoDAsync_v2', 'int NAME(uint64_t d, const void *h, uint64_t n, uint64_t s)'],
  cuMemcpyDtoH: ['cuMemcpyDtoH_v2', 'int NAME(void *h, uint64_t d, uint64_t n)'],
  cuMemcpyDtoHAsync: ['cuMemcpyDtoHAsync_v2', 'int NAME(void *h, uint64_t d, uint64_t n, uint64_t s)'],
  cuMemcpyDtoD: ['cuMemcpyDtoD_v2', 'int NAME(uint64_t d, uint64_t s, uint64_t n)'],
  cuMemcpyDtoDAsync: ['cuMemcpyDtoDAsync_v2', 'int NAME(uint64_t d, uint64_t src, uint64_t n, uint64_t s)'],
  cuMemsetD8: ['cuMemsetD8_v2', 'int NAME(uint64_t d, uint8_t v, uint64_t n)'],
  cuMemsetD16: ['cuMemsetD16_v2', 'int NAME(uint64_t d, uint16_t v, uint64_t n)'],
  cuMemsetD32: ['cuMemsetD32_v2', 'int NAME(uint64_t d, uint32_t v, uint64_t n)'],
  cuMemsetD8Async: ['cuMemsetD8Async', 'int NAME(uint64_t d, uint8_t v, uint64_t n, uint64_t s)'],
  cuMemsetD16Async: ['cuMemsetD16Async', 'int NAME(uint64_t d, uint16_t v, uint64_t n, uint64_t s)'],
  cuMemsetD32Async: ['cuMemsetD32Async', 'int NAME(uint64_t d, uint32_t v, uint64_t n, uint64_t s)'],
  cuMemGetAddressRange: ['cuMemGetAddressRange_v2', 'int NAME(_Out_ uint64_t *base, _Out_ uint64_t *size, uint64_t p)'],
  cuModuleLoadData: ['cuModuleLoadData', 'int NAME(_Out_ uint64_t *m, const void *image)'],
  cuModuleUnload: ['cuModuleUnload', 'int NAME(uint64_t m)'],
  cuModuleGetFunction: ['cuModuleGetFunction', 'int NAME(_Out_ uint64_t *f, uint64_t m, const char *name)'],
  cuModuleGetGlobal: ['cuModuleGetGlobal_v2', 'int NAME(_Out_ uint64_t *d, _Out_ uint64_t *n, uint64_t m, const char *name)'],
  cuLibraryLoadData: ['cuLibraryLoadData', 'int NAME(_Out_ uint64_t *l, const void *code, void *jo, void *jv, unsigned int nj, void *lo, void *lv, unsigned int nl)'],
  cuLibraryUnload: ['cuLibraryUnload', 'int NAME(uint64_t l)'],
  cuLibraryGetKernel: ['cuLibraryGetKernel', 'int NAME(_Out_ uint64_t *k, uint64_t l, const char *name)'],
  cuLibraryGetGlobal: ['cuLibraryGetGlobal', 'int NAME(_Out_ uint64_t *d, _Out_ uint64_t *n, uint64_t l, const char *name)'],
  cuFuncGetParamInfo: ['cuFuncGetParamInfo', 'int NAME(uint64_t f, uint64_t i, _Out_ uint64_t *off, _Out_ uint64_t *size)'],
  cuKernelGetParamInfo: ['cuKernelGetParamInfo', 'int NAME(uint64_t k, uint64_t i, _Out_ uint64_t *off, _Out_ uint64_t *size)'],
  cuFuncGetAttribute: ['cuFuncGetAttribute', 'int NAME(_Out_ int *v, int attr, uint64_t f)'],
  cuFuncSetAttribute: ['cuFuncSetAttribute', 'int NAME(uint64_t f, int attr, int v)'],
  cuFuncSetCacheConfig: ['cuFuncSetCacheConfig', 'int NAME(uint64_t f, int c)'],
  cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags: ['cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags', 'int NAME(_Out_ int *n, uint64_t f, int bs, uint64_t smem, unsigned int fl)'],
  cuOccupancyMaxPotentialBlockSizeWithFlags: ['cuOccupancyMaxPotentialBlockSizeWithFlags', 'int NAME(_Out_ int *g, _Out_ int *b, uint64_t f, void *cb, uint64_t smem, int limit, unsigned int fl)'],
  cuLaunchKernel: ['cuLaunchKernel', 'int NAME(uint64_t f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int smem, uint64_t s, uint64_t params, void *extra)'],
  cuStreamCreateWithPriority: ['cuStreamCreateWithPriority', 'int NAME(_Out_ uint64_t *s, unsigned int flags, int prio)'],
  cuStreamDestroy: ['cuStreamDestroy_v2', 'int NAME(uint64_t s)'],
  cuStreamSynchronize: ['cuStreamSynchronize', 'int NAME(uint64_t s)'],
  cuStreamQuery: ['cuStreamQuery', 'int NAME(uint64_t s)'],
  cuStreamWaitEvent: ['cuStreamWaitEvent', 'int NAME(uint64_t s, uint64_t e, unsigned int flags)'],
  cuEventCreate: ['cuEventCreate', 'int NAME(_Out_ uint64_t *e, unsigned int flags)'],
  cuEventRecord: ['cuEventRecord', 'int NAME(uint64_t e, uint64_t s)'],
  cuEventSynchronize: ['cuEventSynchronize', 'int NAME(uint64_t e)'],
  cuEventQuery: ['cuEventQuery', 'int NAME(uint64_t e)'],
  cuEventElapsedTime: ['cuEventElapsedTime_v2', 'int NAME(_Out_ float *ms, uint64_t a, uint64_t b)'],
  cuEventDestroy: ['cuEventDestroy_v2', 'int NAME(uint64_t e)'],
};
const OPTIONAL = new Set(['cuFuncGetParamInfo', 'cuKernelGetParamInfo', 'cuCtxCreate']);
// Older drivers lack some versioned names; fall back to the unversioned symbol.
const FALLBACK: Record<string, string> = { cuEventElapsedTime_v2: 'cuEventElapsedTime', cuDeviceGetUuid_v2: 'cuDeviceGetUuid' };

export function koffiModule(): typeof import('koffi') {
  const require = createRequire(import.meta.url);
  return require('koffi') as typeof import('koffi');
}

export function loadCudaDriver(path: string): CudaDriver {
  const koffi = koffiModule();
  const lib = koffi.load(path);
  const out: Record<string, unknown> = { path };
  for (const [key, row] of Object.entries(AREA_SIGS) as [string, SigRow][]) {
    try { out[key] = lib.func(row[1].replace('NAME', row[0])); } catch (err) {
      if (row[2] !== 'optional') throw new Error(`libcuda ${path} lacks ${row[0]}: ${(err as Error).message}`);
      out[key] = null;
    }
  }
  for (const [key, [sym, sig]] of Object.entries(SIGS)) {
    const tryBind = (name: string) => lib.func(sig.replace('NAME', name));
    try {
      out[key] = tryBind(sym);
    } catch (err) {
      const fb = FALLBACK[sym];
      if (fb) { try { out[key] = tryBind(fb); continue; } catch { /* fall through */ } }
      if (OPTIONAL.has(key)) { out[key] = null; continue; }
      throw new Error(`libcuda ${path} lacks ${sym}: ${(err as Error).message}`);
    }
  }
  // A driver without cuCtxCreate_v2 (CUDA 13 headers map cuCtxCreate to _v4) still has _v4.
  if (!out.cuCtxCreate) {
    const v4 = lib.func('int cuCtxCreate_v4(_Out_ uint64_t *ctx, void *params, unsigned int flags, int dev)');
    out.cuCtxCreate = (o: unknown, flags: unknown, dev: unknown) => v4(o, null, flags, dev);
  }
  const libc = koffi.load('libc.so.6');
  const memmove = libc.func('uint64_t memmove(void *d, void *s, uint64_t n)');
  out.addressOf = (buf: Buffer) => Number(memmove(buf, buf, 0));
  const copyIn = libc.func('void *memmove(void *d, uint64_t s, uint64_t n)');
  out.readAt = (dst: Buffer, addr: number, n: number) => { if (n > dst.length) throw new RangeError('readAt past the buffer'); copyIn(dst, addr, n); };
  return out as unknown as CudaDriver;
}
