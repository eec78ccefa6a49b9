/** Driver entry points for memory pools and virtual memory management (see sigs.ts for the row format).
 *  Structs the driver reads (pool props, allocation props, access descriptors, locations) cross as
 *  buffers the handlers fill; attribute values as an 8-byte buffer. */
import type { SigTable } from './sigs.js';

export const poolSigs = {
  cuDeviceGetDefaultMemPool: ['cuDeviceGetDefaultMemPool', 'int NAME(_Out_ uint64_t *pool, int dev)'],
  cuDeviceSetMemPool: ['cuDeviceSetMemPool', 'int NAME(int dev, uint64_t pool)'],
  cuMemPoolCreate: ['cuMemPoolCreate', 'int NAME(_Out_ uint64_t *pool, const void *props)'],
  cuMemPoolDestroy: ['cuMemPoolDestroy', 'int NAME(uint64_t pool)'],
  cuMemPoolSetAttribute: ['cuMemPoolSetAttribute', 'int NAME(uint64_t pool, int attr, void *value)'],
  cuMemPoolGetAttribute: ['cuMemPoolGetAttribute', 'int NAME(uint64_t pool, int attr, void *value)'],
  cuMemPoolTrimTo: ['cuMemPoolTrimTo', 'int NAME(uint64_t pool, uint64_t keep)'],
  cuMemAllocFromPoolAsync: ['cuMemAllocFromPoolAsync', 'int NAME(_Out_ uint64_t *p, uint64_t n, uint64_t pool, uint64_t s)'],
  cuMemPoolSetAccess: ['cuMemPoolSetAccess', 'int NAME(uint64_t pool, const void *map, uint64_t count)'],
  cuMemPoolGetAccess: ['cuMemPoolGetAccess', 'int NAME(_Out_ int *flags, uint64_t pool, const void *loc)'],
  cuMemGetAllocationGranularity: ['cuMemGetAllocationGranularity', 'int NAME(_Out_ uint64_t *g, const void *prop, int option)'],
  cuMemAddressReserve: ['cuMemAddressReserve', 'int NAME(_Out_ uint64_t *p, uint64_t size, uint64_t align, uint64_t addr, uint64_t flags)'],
  cuMemAddressFree: ['cuMemAddressFree', 'int NAME(uint64_t p, uint64_t size)'],
  cuMemCreate: ['cuMemCreate', 'int NAME(_Out_ uint64_t *h, uint64_t size, const void *prop, uint64_t flags)'],
  cuMemRelease: ['cuMemRelease', 'int NAME(uint64_t h)'],
  cuMemMap: ['cuMemMap', 'int NAME(uint64_t p, uint64_t size, uint64_t offset, uint64_t h, uint64_t flags)'],
  cuMemUnmap: ['cuMemUnmap', 'int NAME(uint64_t p, uint64_t size)'],
  cuMemSetAccess: ['cuMemSetAccess', 'int NAME(uint64_t p, uint64_t size, const void *desc, uint64_t count)'],
  cuMemGetAccess: ['cuMemGetAccess', 'int NAME(_Out_ uint64_t *flags, const void *loc, uint64_t p)'],
} as const satisfies SigTable;
