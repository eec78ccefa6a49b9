/* Module enumeration, context configuration and exec affinity, device queries the connect-time
 * properties cannot answer, and stream attributes. Arguments the shim can judge fail here with the
 * driver's code; the rest is the host driver's answer. */
#include "shim.h"
#include <stdlib.h>
#include <string.h>

enum { ATTR_VALUE_BYTES = 64, ATTR_WINDOW = 1, ATTR_PRIORITY = 8 };

CUresult cuModuleGetFunction(smol_func **f, smol_module *m, const char *name);   /* exec.c */
CUresult cuLibraryGetKernel(smol_func **k, smol_module *l, const char *name);

static CUresult count(unsigned *n, smol_module *m, unsigned kind) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  if (!smol_handle_ok(m, kind)) return CUDA_ERROR_INVALID_HANDLE;
  uint64_t o = 0;
  r = smol_call(SMOL_OP_MODULE_FUNCTION_COUNT, &m->id, 1, NULL, 0, &o, 1, NULL, 0, NULL);
  if (!r) *n = (unsigned)o;
  return r;
}
EXPORT CUresult cuModuleGetFunctionCount(unsigned *n, smol_module *m) { return count(n, m, SMOL_H_MODULE); }
EXPORT CUresult cuLibraryGetKernelCount(unsigned *n, smol_module *l) { return count(n, l, SMOL_H_LIBRARY); }

/* The host names the functions; each is then looked up as cuModuleGetFunction would, so the handles
 * carry their parameter layouts like any other. */
static CUresult enumerate(smol_func **fns, unsigned n, smol_module *m, unsigned kind) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!fns) return CUDA_ERROR_INVALID_VALUE;
  if (!smol_handle_ok(m, kind)) return CUDA_ERROR_INVALID_HANDLE;
  char *names = malloc(SMOL_MAX_PAYLOAD);
  if (!names) return CUDA_ERROR_OUT_OF_MEMORY;
  uint64_t a[2] = { m->id, n }, got_n = 0; size_t got = 0;
  r = smol_call(SMOL_OP_MODULE_ENUMERATE, a, 2, NULL, 0, &got_n, 1, names, SMOL_MAX_PAYLOAD, &got);
  const char *p = names, *end = names + got;
  for (uint64_t i = 0; !r && i < got_n && i < n; i++) {
    const char *z = memchr(p, 0, (size_t)(end - p));
    if (!z) { r = CUDA_ERROR_UNKNOWN; break; }
    r = kind == SMOL_H_LIBRARY ? cuLibraryGetKernel(&fns[i], m, p) : cuModuleGetFunction(&fns[i], m, p);
    p = z + 1;
  }
  free(names); return r;
}
EXPORT CUresult cuModuleEnumerateFunctions(smol_func **fns, unsigned n, smol_module *m) { return enumerate(fns, n, m, SMOL_H_MODULE); }
EXPORT CUresult cuLibraryEnumerateKernels(smol_func **ks, unsigned n, smol_module *l) { return enumerate(ks, n, l, SMOL_H_LIBRARY); }

/* context configuration: the current context's, on the host */
static CUresult get_cfg(uint16_t op, int *v) {
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  uint64_t o = 0;
  r = smol_call(op, NULL, 0, NULL, 0, &o, 1, NULL, 0, NULL);
  if (!r) *v = (int)o;
  return r;
}
static CUresult set_cfg(uint16_t op, int v, int max) {
  CUresult r = smol_need_ctx(); if (r) return r;
  if (v < 0 || v > max) return CUDA_ERROR_INVALID_VALUE;
  uint64_t a = (uint64_t)v;
  return smol_call(op, &a, 1, NULL, 0, NULL, 0, NULL, 0, NULL);
}
EXPORT CUresult cuCtxGetCacheConfig(int *c) { return get_cfg(SMOL_OP_CTX_GET_CACHE_CONFIG, c); }
EXPORT CUresult cuCtxSetCacheConfig(int c) { return set_cfg(SMOL_OP_CTX_SET_CACHE_CONFIG, c, 3); /* CUfunc_cache */ }
EXPORT CUresult cuCtxGetSharedMemConfig(int *c) { return get_cfg(SMOL_OP_CTX_GET_SHARED_MEM_CONFIG, c); }
EXPORT CUresult cuCtxSetSharedMemConfig(int c) { return set_cfg(SMOL_OP_CTX_SET_SHARED_MEM_CONFIG, c, 2); /* CUsharedconfig */ }
EXPORT CUresult cuCtxResetPersistingL2Cache(void) {
  CUresult r = smol_need_ctx(); if (r) return r;
  return smol_call(SMOL_OP_CTX_RESET_PERSISTING_L2_CACHE, NULL, 0, NULL, 0, NULL, 0, NULL, 0, NULL);
}
typedef struct { int type; unsigned val; } exec_affinity; /* CUexecAffinityParam: SM_COUNT is its one type */
EXPORT CUresult cuCtxGetExecAffinity(exec_affinity *p, int type) {
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!p || type != 0) return CUDA_ERROR_INVALID_VALUE;
  uint64_t a = (uint64_t)type, o = 0;
  r = smol_call(SMOL_OP_CTX_GET_EXEC_AFFINITY, &a, 1, NULL, 0, &o, 1, NULL, 0, NULL);
  if (!r) { p->type = type; p->val = (unsigned)o; }
  return r;
}

static CUresult dev_arg(CUdevice d) {
  CUresult r = smol_need_init(); if (r) return r;
  return d >= 0 && d < smol_device_count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}
EXPORT CUresult cuDeviceGetExecAffinitySupport(int *v, int type, CUdevice d) {
  CUresult r = dev_arg(d); if (r) return r;
  if (!v || type != 0) return CUDA_ERROR_INVALID_VALUE;
  uint64_t a[2] = { (uint64_t)type, (uint64_t)d }, o = 0;
  r = smol_call(SMOL_OP_DEVICE_GET_EXEC_AFFINITY_SUPPORT, a, 2, NULL, 0, &o, 1, NULL, 0, NULL);
  if (!r) *v = (int)o;
  return r;
}
EXPORT CUresult cuDeviceGetTexture1DLinearMaxWidth(size_t *w, int format, unsigned channels, CUdevice d) {
  CUresult r = dev_arg(d); if (r) return r;
  if (!w || (channels != 1 && channels != 2 && channels != 4)) return CUDA_ERROR_INVALID_VALUE;
  uint64_t a[3] = { (uint32_t)format, channels, (uint64_t)d }, o = 0;
  r = smol_call(SMOL_OP_DEVICE_GET_TEXTURE1_DLINEAR_MAX_WIDTH, a, 3, NULL, 0, &o, 1, NULL, 0, NULL);
  if (!r) *w = o;
  return r;
}
/* Target: the current context (0); scope: TO_OWNER (100) or TO_ALL_DEVICES (200). */
EXPORT CUresult cuFlushGPUDirectRDMAWrites(int target, int scope) {
  CUresult r = smol_need_ctx(); if (r) return r;
  if (target != 0 || (scope != 100 && scope != 200)) return CUDA_ERROR_INVALID_VALUE;
  uint64_t a[2] = { (uint64_t)target, (uint64_t)scope };
  return smol_call(SMOL_OP_FLUSH_GPUDIRECT_RDMAWRITES, a, 2, NULL, 0, NULL, 0, NULL, 0, NULL);
}

/* stream attributes: the ones documented valid for streams */
static int stream_attr(int a) { return a == 1 || a == 3 || a == 8 || a == 9 || a == 10 || a == 16; }
/* The legacy streams belong to the current context; a created stream carries its own. */
static CUresult stream_id(void *s, uint64_t *id) {
  CUresult r = (uintptr_t)s <= 2 ? smol_need_ctx() : smol_need_init();
  return r ? r : smol_stream_arg(s, id);
}
static CUresult attr_get(uint64_t id, int attr, void *v) {
  uint64_t a[2] = { id, (uint64_t)attr }; size_t got = 0;
  unsigned char buf[ATTR_VALUE_BYTES];
  CUresult r = smol_call(SMOL_OP_STREAM_GET_ATTRIBUTE, a, 2, NULL, 0, NULL, 0, buf, sizeof buf, &got);
  if (!r) { memset(v, 0, ATTR_VALUE_BYTES); memcpy(v, buf, got); }
  return r;
}
/* cuStreamGetPriority answers from the stream: after a change, ask the driver what it kept (it clamps). */
static void refresh_priority(void *s, uint64_t id) {
  int v[ATTR_VALUE_BYTES / 4];
  if ((uintptr_t)s > 2 && !attr_get(id, ATTR_PRIORITY, v)) ((smol_stream *)s)->priority = v[0];
}
EXPORT CUresult cuStreamGetAttribute(void *s, int attr, void *v) {
  uint64_t id; CUresult r = stream_id(s, &id); if (r) return r;
  if (!v || !stream_attr(attr)) return CUDA_ERROR_INVALID_VALUE;
  return attr_get(id, attr, v);
}
EXPORT CUresult cuStreamSetAttribute(void *s, int attr, const void *v) {
  uint64_t id; CUresult r = stream_id(s, &id); if (r) return r;
  if (!v || !stream_attr(attr)) return CUDA_ERROR_INVALID_VALUE;
  if (attr == ATTR_WINDOW) {
    /* the window names device memory: only this process's (the host checks again) */
    uint64_t base, bytes; memcpy(&base, v, 8); memcpy(&bytes, (const char *)v + 8, 8);
    if (bytes && !smol_range_ok(base, bytes)) return CUDA_ERROR_INVALID_VALUE;
  }
  uint64_t a[2] = { id, (uint64_t)attr };
  r = smol_call(SMOL_OP_STREAM_SET_ATTRIBUTE, a, 2, v, ATTR_VALUE_BYTES, NULL, 0, NULL, 0, NULL);
  if (!r && attr == ATTR_PRIORITY) refresh_priority(s, id);
  return r;
}
EXPORT CUresult cuStreamCopyAttributes(void *dst, void *src) {
  uint64_t a[2]; CUresult r = stream_id(dst, &a[0]); if (!r) r = stream_id(src, &a[1]); if (r) return r;
  r = smol_call(SMOL_OP_STREAM_COPY_ATTRIBUTES, a, 2, NULL, 0, NULL, 0, NULL, 0, NULL);
  if (!r) refresh_priority(dst, a[0]);
  return r;
}
