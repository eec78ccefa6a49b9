/** Driver entry points for module loading variants and context, stream and module queries (see sigs.ts for the row format). */
import type { SigTable } from './sigs.js';

export const querySigs = {
  cuModuleLoadDataEx: ['cuModuleLoadDataEx', 'int NAME(_Out_ uint64_t *m, const void *image, unsigned int n, void *opts, void *vals)'],
  cuLinkCreate: ['cuLinkCreate_v2', 'int NAME(unsigned int n, void *opts, void *vals, _Out_ uint64_t *state)'],
  cuLinkAddData: ['cuLinkAddData_v2', 'int NAME(uint64_t state, int type, void *data, uint64_t size, const char *name, unsigned int n, void *opts, void *vals)'],
  cuLinkComplete: ['cuLinkComplete', 'int NAME(uint64_t state, _Out_ uint64_t *cubin, _Out_ uint64_t *size)'],
  cuLinkDestroy: ['cuLinkDestroy', 'int NAME(uint64_t state)'],
  cuModuleGetFunctionCount: ['cuModuleGetFunctionCount', 'int NAME(_Out_ unsigned int *n, uint64_t m)', 'optional'],
  cuModuleEnumerateFunctions: ['cuModuleEnumerateFunctions', 'int NAME(void *fns, unsigned int n, uint64_t m)', 'optional'],
  cuLibraryGetKernelCount: ['cuLibraryGetKernelCount', 'int NAME(_Out_ unsigned int *n, uint64_t l)', 'optional'],
  cuLibraryEnumerateKernels: ['cuLibraryEnumerateKernels', 'int NAME(void *ks, unsigned int n, uint64_t l)', 'optional'],
  funcNameOf: ['cuFuncGetName', 'int NAME(_Out_ const char **name, uint64_t f)', 'optional'],
  kernelNameOf: ['cuKernelGetName', 'int NAME(_Out_ const char **name, uint64_t k)', 'optional'],
  cuCtxGetCacheConfig: ['cuCtxGetCacheConfig', 'int NAME(_Out_ int *c)'],
  cuCtxSetCacheConfig: ['cuCtxSetCacheConfig', 'int NAME(int c)'],
  cuCtxGetSharedMemConfig: ['cuCtxGetSharedMemConfig', 'int NAME(_Out_ int *c)', 'optional'],
  cuCtxSetSharedMemConfig: ['cuCtxSetSharedMemConfig', 'int NAME(int c)', 'optional'],
  cuCtxResetPersistingL2Cache: ['cuCtxResetPersistingL2Cache', 'int NAME()'],
  cuCtxGetExecAffinity: ['cuCtxGetExecAffinity', 'int NAME(void *param, int type)'],
  cuDeviceGetExecAffinitySupport: ['cuDeviceGetExecAffinitySupport', 'int NAME(_Out_ int *v, int type, int dev)'],
  cuDeviceGetTexture1DLinearMaxWidth: ['cuDeviceGetTexture1DLinearMaxWidth', 'int NAME(_Out_ uint64_t *w, int format, unsigned int channels, int dev)'],
  cuFlushGPUDirectRDMAWrites: ['cuFlushGPUDirectRDMAWrites', 'int NAME(int target, int scope)'],
  cuStreamGetAttribute: ['cuStreamGetAttribute', 'int NAME(uint64_t s, int attr, void *value)'],
  cuStreamSetAttribute: ['cuStreamSetAttribute', 'int NAME(uint64_t s, int attr, const void *value)'],
  cuStreamCopyAttributes: ['cuStreamCopyAttributes', 'int NAME(uint64_t dst, uint64_t src)'],
} as const satisfies SigTable;
