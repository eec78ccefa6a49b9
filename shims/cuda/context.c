/* Init, versions, devices (answered from properties fetched once at connect), contexts, errors. */
#include "shim.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static smol_ctx g_primary[SMOL_MAX_DEVICES];
static pthread_mutex_t g_primary_mu = PTHREAD_MUTEX_INITIALIZER;
static __thread smol_ctx *t_stack[32];
static __thread int t_depth;
int smol_inited;

smol_ctx *smol_primary(int dev) {
  smol_ctx *c = &g_primary[dev];
  if (__atomic_load_n(&c->magic, __ATOMIC_ACQUIRE)) return c;
  pthread_mutex_lock(&g_primary_mu);
  if (!c->magic) {
    c->dev = dev; c->primary = 1; c->id = (SMOL_KIND_CTX << 48) | (uint64_t)(SMOL_PRIMARY_BASE + dev);
    smol_handle_add(c, SMOL_H_CTX);
    __atomic_store_n(&c->magic, SMOL_MAGIC_CTX, __ATOMIC_RELEASE);
  }
  pthread_mutex_unlock(&g_primary_mu);
  return c;
}
smol_ctx *smol_current(void) { return t_depth ? t_stack[t_depth - 1] : NULL; }
uint64_t smol_current_id(void) { smol_ctx *c = smol_current(); return c ? c->id : 0; }
static int valid_ctx(smol_ctx *c) { return smol_handle_ok(c, SMOL_H_CTX); }
CUresult smol_need_init(void) {
  if (!__atomic_load_n(&smol_inited, __ATOMIC_ACQUIRE)) return CUDA_ERROR_NOT_INITIALIZED;
  return smol_connect();
}
CUresult smol_need_ctx(void) {
  CUresult r = smol_need_init();
  if (r) return r;
  return smol_current() ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}
static CUresult need_dev(int dev) {
  CUresult r = smol_need_init();
  if (r) return r;
  return dev >= 0 && dev < smol_device_count ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

/* Like the real driver, every call but a few (versions, error strings, entry points) fails with
 * CUDA_ERROR_NOT_INITIALIZED until cuInit has succeeded. */
EXPORT CUresult cuInit(unsigned flags) {
  if (flags) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = smol_connect();
  if (!r) __atomic_store_n(&smol_inited, 1, __ATOMIC_RELEASE);
  return r;
}
EXPORT CUresult cuDriverGetVersion(int *v) {
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  /* cudart asks before cuInit; without a daemon, answer what this shim was built for. */
  *v = smol_connect() ? 13000 : smol_driver_version;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetCount(int *n) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  *n = smol_device_count; return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGet(CUdevice *d, int ordinal) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  r = need_dev(ordinal); if (r) return r;
  *d = ordinal; return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
  CUresult r = need_dev(d); if (r) return r;
  if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  snprintf(name, (size_t)len, "%s", smol_devices[d].name); return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetUuid_v2(unsigned char *uuid, CUdevice d) { CUresult r = need_dev(d); if (r) return r; if (!uuid) return CUDA_ERROR_INVALID_VALUE; memcpy(uuid, smol_devices[d].uuid, 16); return CUDA_SUCCESS; }
EXPORT CUresult cuDeviceGetUuid(unsigned char *uuid, CUdevice d) { return cuDeviceGetUuid_v2(uuid, d); }
EXPORT CUresult cuDeviceTotalMem_v2(size_t *b, CUdevice d) { CUresult r = need_dev(d); if (r) return r; if (!b) return CUDA_ERROR_INVALID_VALUE; *b = smol_devices[d].total_mem; return CUDA_SUCCESS; }
EXPORT CUresult cuDeviceTotalMem(unsigned *b, CUdevice d) { size_t n; CUresult r = cuDeviceTotalMem_v2(&n, d); if (!r) *b = (unsigned)n; return r; }
EXPORT CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
  CUresult r = need_dev(d); if (r) return r;
  if (!v || attr < 1 || attr > SMOL_ATTR_COUNT) return CUDA_ERROR_INVALID_VALUE;
  *v = smol_devices[d].attrs[attr - 1]; return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetPCIBusId(char *s, int len, CUdevice d) {
  CUresult r = need_dev(d); if (r) return r;
  if (!s || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  const int32_t *a = smol_devices[d].attrs;
  snprintf(s, (size_t)len, "%04x:%02x:%02x.0", a[50 - 1], a[33 - 1], a[34 - 1]); return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice d) {
  CUresult r = need_dev(d); if (r) return r;
  if (!major || !minor) return CUDA_ERROR_INVALID_VALUE;
  *major = smol_devices[d].attrs[75 - 1]; *minor = smol_devices[d].attrs[76 - 1]; return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetLuid(char *luid, unsigned *mask, CUdevice d) { (void)luid; (void)mask; (void)d; return CUDA_ERROR_NOT_SUPPORTED; }

/* contexts: the stack of current contexts is per guest thread, as in the real driver */
static void push(smol_ctx *c) { if (t_depth < 32) t_stack[t_depth++] = c; }
EXPORT CUresult cuCtxSetCurrent(smol_ctx *c) {
  CUresult r = smol_need_init(); if (r) return r;
  if (c && !valid_ctx(c)) return CUDA_ERROR_INVALID_CONTEXT;
  if (!c) { if (t_depth) t_depth--; return CUDA_SUCCESS; }
  if (t_depth) t_stack[t_depth - 1] = c; else push(c);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxGetCurrent(smol_ctx **c) { CUresult r = smol_need_init(); if (r) return r; if (!c) return CUDA_ERROR_INVALID_VALUE; *c = smol_current(); return CUDA_SUCCESS; }
/* NULL is INVALID_VALUE for push and destroy on the real driver (H200, 580.159), not INVALID_CONTEXT */
EXPORT CUresult cuCtxPushCurrent_v2(smol_ctx *c) { CUresult r = smol_need_init(); if (r) return r; if (!c) return CUDA_ERROR_INVALID_VALUE; if (!valid_ctx(c)) return CUDA_ERROR_INVALID_CONTEXT; push(c); return CUDA_SUCCESS; }
EXPORT CUresult cuCtxPopCurrent_v2(smol_ctx **c) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!t_depth) return CUDA_ERROR_INVALID_CONTEXT;
  smol_ctx *x = t_stack[--t_depth]; if (c) *c = x; return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxCreate_v2(smol_ctx **out, unsigned flags, CUdevice d) {
  CUresult r = need_dev(d); if (r) return r;
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  smol_ctx *c = aligned_alloc(16, sizeof *c);
  memset(c, 0, sizeof *c);
  c->magic = SMOL_MAGIC_CTX; c->dev = d; c->flags = flags; c->id = smol_mint(SMOL_KIND_CTX);
  uint64_t a[3] = { c->id, flags, (uint64_t)d };
  r = smol_call(SMOL_OP_CTX_CREATE, a, 3, NULL, 0, NULL, 0, NULL, 0, NULL);
  if (r) { free(c); return r; }
  smol_handle_add(c, SMOL_H_CTX);
  push(c); *out = c; return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxCreate_v3(smol_ctx **out, void *p, int n, unsigned flags, CUdevice d) { (void)p; (void)n; return cuCtxCreate_v2(out, flags, d); }
EXPORT CUresult cuCtxCreate_v4(smol_ctx **out, void *p, unsigned flags, CUdevice d) { (void)p; return cuCtxCreate_v2(out, flags, d); }
EXPORT CUresult cuCtxDestroy_v2(smol_ctx *c) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_ctx(c) || c->primary || !smol_handle_take(c, SMOL_H_CTX)) return CUDA_ERROR_INVALID_CONTEXT;
  for (int i = 0; i < t_depth; i++) if (t_stack[i] == c) { memmove(&t_stack[i], &t_stack[i + 1], (size_t)(t_depth - i - 1) * sizeof c); t_depth--; i--; }
  uint64_t id = c->id;
  c->magic = 0; free(c);
  return smol_fire(SMOL_OP_CTX_DESTROY, &id, 1, NULL, 0);
}
EXPORT CUresult cuCtxGetDevice(CUdevice *d) {
  uint64_t dev = 0;
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  r = smol_call(SMOL_OP_CTX_GET_DEVICE, NULL, 0, NULL, 0, &dev, 1, NULL, 0, NULL);
  if (!r) *d = (int)dev;
  return r;
}
EXPORT CUresult cuCtxGetDevice_v2(CUdevice *d, smol_ctx *c) {
  if (!c) return cuCtxGetDevice(d);
  CUresult r = smol_need_init(); if (r) return r;
  if (!d) return CUDA_ERROR_INVALID_VALUE;
  if (!valid_ctx(c)) return CUDA_ERROR_INVALID_CONTEXT;
  *d = c->dev; return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxSynchronize(void) {
  CUresult r = smol_need_ctx(); if (r) return r;
  return smol_call(SMOL_OP_CTX_SYNCHRONIZE, NULL, 0, NULL, 0, NULL, 0, NULL, 0, NULL);
}
EXPORT CUresult cuCtxSynchronize_v2(smol_ctx *c) { (void)c; return cuCtxSynchronize(); }
EXPORT CUresult cuCtxGetApiVersion(smol_ctx *c, unsigned *v) {
  CUresult r = smol_need_init(); if (r) return r;
  if (c && !valid_ctx(c)) return CUDA_ERROR_INVALID_CONTEXT;
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  *v = 13000; return CUDA_SUCCESS;
}
EXPORT CUresult cuCtxGetFlags(unsigned *f) { CUresult r = smol_need_ctx(); if (r) return r; if (!f) return CUDA_ERROR_INVALID_VALUE; *f = smol_current()->flags; return CUDA_SUCCESS; }
EXPORT CUresult cuCtxGetId(smol_ctx *c, unsigned long long *id) { CUresult r = smol_need_init(); if (r) return r; if (!id) return CUDA_ERROR_INVALID_VALUE; if (!c) c = smol_current(); if (!valid_ctx(c)) return CUDA_ERROR_INVALID_CONTEXT; *id = c->id; return CUDA_SUCCESS; }
EXPORT CUresult cuCtxGetLimit(size_t *v, int limit) {
  uint64_t a = (uint64_t)limit, o = 0;
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!v) return CUDA_ERROR_INVALID_VALUE;
  r = smol_call(SMOL_OP_CTX_GET_LIMIT, &a, 1, NULL, 0, &o, 1, NULL, 0, NULL);
  if (!r) *v = o;
  return r;
}
EXPORT CUresult cuCtxSetLimit(int limit, size_t v) { CUresult r = smol_need_ctx(); if (r) return r; uint64_t a[2] = { (uint64_t)limit, v }; return smol_call(SMOL_OP_CTX_SET_LIMIT, a, 2, NULL, 0, NULL, 0, NULL, 0, NULL); }
EXPORT CUresult cuCtxGetStreamPriorityRange(int *least, int *greatest) {
  uint64_t o[2];
  CUresult r = smol_need_ctx(); if (r) return r;
  r = smol_call(SMOL_OP_CTX_GET_STREAM_PRIORITY_RANGE, NULL, 0, NULL, 0, o, 2, NULL, 0, NULL);
  if (!r) { if (least) *least = (int)(int32_t)o[0]; if (greatest) *greatest = (int)(int32_t)o[1]; }
  return r;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(smol_ctx **out, CUdevice d) {
  CUresult r = need_dev(d); if (r) return r;
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  uint64_t a = (uint64_t)d;
  r = smol_call(SMOL_OP_PRIMARY_CTX_RETAIN, &a, 1, NULL, 0, NULL, 0, NULL, 0, NULL);
  if (r) return r;
  smol_ctx *c = smol_primary(d);
  __atomic_add_fetch(&c->refs, 1, __ATOMIC_SEQ_CST);
  *out = c; return CUDA_SUCCESS;
}
EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
  CUresult r = need_dev(d); if (r) return r;
  smol_ctx *c = smol_primary(d);
  if (__atomic_load_n(&c->refs, __ATOMIC_SEQ_CST) <= 0) return CUDA_ERROR_INVALID_CONTEXT;
  __atomic_sub_fetch(&c->refs, 1, __ATOMIC_SEQ_CST);
  uint64_t a = (uint64_t)d;
  return smol_fire(SMOL_OP_PRIMARY_CTX_RELEASE, &a, 1, NULL, 0);
}
EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice d) { return cuDevicePrimaryCtxRelease_v2(d); }
EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice d, unsigned *flags, int *active) {
  CUresult r = need_dev(d); if (r) return r;
  if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
  smol_ctx *c = smol_primary(d);
  *flags = c->flags; *active = c->refs > 0; return CUDA_SUCCESS;
}
EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice d, unsigned flags) {
  CUresult r = need_dev(d); if (r) return r;
  uint64_t a[2] = { (uint64_t)d, flags };
  smol_primary(d)->flags = flags;
  return smol_call(SMOL_OP_PRIMARY_CTX_SET_FLAGS, a, 2, NULL, 0, NULL, 0, NULL, 0, NULL);
}
EXPORT CUresult cuDevicePrimaryCtxSetFlags(CUdevice d, unsigned flags) { return cuDevicePrimaryCtxSetFlags_v2(d, flags); }
EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice d) { CUresult r = need_dev(d); return r; }
EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice d) { return cuDevicePrimaryCtxReset_v2(d); }

static const struct { int code; const char *name, *text; } ERRS[] = {
  { 0, "CUDA_SUCCESS", "no error" }, { 1, "CUDA_ERROR_INVALID_VALUE", "invalid argument" },
  { 2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" }, { 3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error" },
  { 4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down" }, { 34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library" },
  { 35, "CUDA_ERROR_INSUFFICIENT_DRIVER", "CUDA driver version is insufficient for CUDA runtime version" },
  { 46, "CUDA_ERROR_DEVICE_UNAVAILABLE", "CUDA-capable device(s) is/are busy or unavailable" },
  { 100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected" }, { 101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal" },
  { 200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid" }, { 201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context" },
  { 209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device" },
  { 218, "CUDA_ERROR_INVALID_PTX", "a PTX JIT compilation failed" }, { 400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle" },
  { 500, "CUDA_ERROR_NOT_FOUND", "named symbol not found" }, { 600, "CUDA_ERROR_NOT_READY", "device not ready" },
  { 700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered" },
  { 701, "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", "too many resources requested for launch" },
  { 719, "CUDA_ERROR_LAUNCH_FAILED", "unspecified launch failure" }, { 801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported" },
  { 999, "CUDA_ERROR_UNKNOWN", "unknown error" },
};
EXPORT CUresult cuGetErrorName(CUresult e, const char **s) {
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof ERRS / sizeof ERRS[0]; i++) if (ERRS[i].code == e) { *s = ERRS[i].name; return CUDA_SUCCESS; }
  *s = NULL; return CUDA_ERROR_INVALID_VALUE;
}
EXPORT CUresult cuGetErrorString(CUresult e, const char **s) {
  if (!s) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof ERRS / sizeof ERRS[0]; i++) if (ERRS[i].code == e) { *s = ERRS[i].text; return CUDA_SUCCESS; }
  *s = NULL; return CUDA_ERROR_INVALID_VALUE;
}
