/** Driver entry points for tensor maps, launch attributes, context and function attributes (see sigs.ts for the row format). */
import type { SigTable } from './sigs.js';

// Tensor maps came with CUDA 12.0, the wide im2col with 12.8: an older driver answers NOT_SUPPORTED.
// The descriptor and the launch config cross as native addresses the daemon aligned (64 bytes for a map).
export const launchSigs = {
  cuTensorMapEncodeTiled: ['cuTensorMapEncodeTiled', 'int NAME(uint64_t map, int dtype, unsigned int rank, uint64_t addr, void *dims, void *strides, void *box, void *estr, int inter, int swz, int l2, int oob)', 'optional'],
  cuTensorMapEncodeIm2col: ['cuTensorMapEncodeIm2col', 'int NAME(uint64_t map, int dtype, unsigned int rank, uint64_t addr, void *dims, void *strides, void *lower, void *upper, unsigned int cpp, unsigned int ppc, void *estr, int inter, int swz, int l2, int oob)', 'optional'],
  cuTensorMapEncodeIm2colWide: ['cuTensorMapEncodeIm2colWide', 'int NAME(uint64_t map, int dtype, unsigned int rank, uint64_t addr, void *dims, void *strides, int lower, int upper, unsigned int cpp, unsigned int ppc, void *estr, int inter, int mode, int swz, int l2, int oob)', 'optional'],
  cuTensorMapReplaceAddress: ['cuTensorMapReplaceAddress', 'int NAME(uint64_t map, uint64_t addr)', 'optional'],
  cuLaunchKernelEx: ['cuLaunchKernelEx', 'int NAME(uint64_t config, uint64_t f, uint64_t params, void *extra)', 'optional'],
  cuOccupancyMaxActiveClusters: ['cuOccupancyMaxActiveClusters', 'int NAME(_Out_ int *n, uint64_t f, uint64_t config)', 'optional'],
  cuOccupancyMaxPotentialClusterSize: ['cuOccupancyMaxPotentialClusterSize', 'int NAME(_Out_ int *n, uint64_t f, uint64_t config)', 'optional'],
  cuOccupancyAvailableDynamicSMemPerBlock: ['cuOccupancyAvailableDynamicSMemPerBlock', 'int NAME(_Out_ uint64_t *n, uint64_t f, int blocks, int bs)', 'optional'],
} as const satisfies SigTable;
