/** Driver entry points for 2D/3D copies, stream memory operations, peer and IPC (see sigs.ts for the row format). */
import type { SigTable } from './sigs.js';

// The copy descriptors (CUDA_MEMCPY2D, CUDA_MEMCPY3D) and batch params are passed as Buffers the handler fills.
export const copySigs = {
  cuMemcpy2D: ['cuMemcpy2D_v2', 'int NAME(const void *p)'],
  cuMemcpy2DAsync: ['cuMemcpy2DAsync_v2', 'int NAME(const void *p, uint64_t s)'],
  cuMemcpy3D: ['cuMemcpy3D_v2', 'int NAME(const void *p)'],
  cuMemcpy3DAsync: ['cuMemcpy3DAsync_v2', 'int NAME(const void *p, uint64_t s)'],
  cuMemsetD2D8: ['cuMemsetD2D8_v2', 'int NAME(uint64_t d, uint64_t pitch, uint8_t v, uint64_t w, uint64_t h)'],
  cuMemsetD2D16: ['cuMemsetD2D16_v2', 'int NAME(uint64_t d, uint64_t pitch, uint16_t v, uint64_t w, uint64_t h)'],
  cuMemsetD2D32: ['cuMemsetD2D32_v2', 'int NAME(uint64_t d, uint64_t pitch, uint32_t v, uint64_t w, uint64_t h)'],
  cuMemsetD2D8Async: ['cuMemsetD2D8Async', 'int NAME(uint64_t d, uint64_t pitch, uint8_t v, uint64_t w, uint64_t h, uint64_t s)'],
  cuMemsetD2D16Async: ['cuMemsetD2D16Async', 'int NAME(uint64_t d, uint64_t pitch, uint16_t v, uint64_t w, uint64_t h, uint64_t s)'],
  cuMemsetD2D32Async: ['cuMemsetD2D32Async', 'int NAME(uint64_t d, uint64_t pitch, uint32_t v, uint64_t w, uint64_t h, uint64_t s)'],
  cuStreamWaitValue32: ['cuStreamWaitValue32_v2', 'int NAME(uint64_t s, uint64_t addr, uint32_t v, unsigned int flags)'],
  cuStreamWaitValue64: ['cuStreamWaitValue64_v2', 'int NAME(uint64_t s, uint64_t addr, uint64_t v, unsigned int flags)'],
  cuStreamWriteValue32: ['cuStreamWriteValue32_v2', 'int NAME(uint64_t s, uint64_t addr, uint32_t v, unsigned int flags)'],
  cuStreamWriteValue64: ['cuStreamWriteValue64_v2', 'int NAME(uint64_t s, uint64_t addr, uint64_t v, unsigned int flags)'],
  cuStreamBatchMemOp: ['cuStreamBatchMemOp_v2', 'int NAME(uint64_t s, unsigned int count, const void *ops, unsigned int flags)'],
  cuDeviceCanAccessPeer: ['cuDeviceCanAccessPeer', 'int NAME(_Out_ int *can, int dev, int peer)'],
  cuDeviceGetP2PAttribute: ['cuDeviceGetP2PAttribute', 'int NAME(_Out_ int *v, int attr, int src, int dst)'],
  cuCtxEnablePeerAccess: ['cuCtxEnablePeerAccess', 'int NAME(uint64_t peer, unsigned int flags)'],
  cuCtxDisablePeerAccess: ['cuCtxDisablePeerAccess', 'int NAME(uint64_t peer)'],
} as const satisfies SigTable;
