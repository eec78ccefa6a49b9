/* Device memory: allocations, copies (split into protocol-sized chunks), memsets, host memory
 * (plain guest memory: there is no DMA across the channel), pointer attributes. */
#include "shim.h"
#include "capture.h"
#include <stdlib.h>
#include <string.h>

/* Allocation and stream arguments are checked here against what this process was handed (handles.c),
 * so a bad one fails this call with the driver's code; the daemon checks ownership again. */
static CUresult alloc_args(CUdeviceptr *p, size_t n) {
  CUresult r = smol_need_ctx(); if (r) return r;
  return !p || !n ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
  uint64_t a = n, o = 0;
  CUresult r = alloc_args(p, n); if (!r) r = smol_capture_unsafe(); if (r) return r;
  r = smol_call(SMOL_OP_MEM_ALLOC, &a, 1, NULL, 0, &o, 1, NULL, 0, NULL);
  if (!r) { *p = o; smol_track_alloc(o, n, 1); }
  return r;
}
EXPORT CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, void *s) {
  uint64_t a[2] = { n, 0 }, o = 0;
  CUresult r = alloc_args(p, n); if (!r) r = smol_stream_arg(s, &a[1]); if (r) return r;
  r = smol_call(SMOL_OP_MEM_ALLOC_ASYNC, a, 2, NULL, 0, &o, 1, NULL, 0, NULL);
  if (!r) { *p = o; smol_track_alloc(o, n, 1); }
  return r;
}
EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned elem) {
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!p || !pitch || !w || !h || (elem != 4 && elem != 8 && elem != 16)) return CUDA_ERROR_INVALID_VALUE;
  size_t pt = (w + 511) & ~(size_t)511;
  r = cuMemAlloc_v2(p, pt * h);
  if (!r) *pitch = pt;
  return r;
}
/* Only a pointer cuMemAlloc* returned, not yet freed, can be freed: anything else (a foreign or interior
 * pointer, a second free) is CUDA_ERROR_INVALID_VALUE from this call, as from the real driver. */
EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!p) return CUDA_SUCCESS;
  if (!smol_untrack_alloc(p)) return CUDA_ERROR_INVALID_VALUE;
  uint64_t a = p;
  return smol_fire(SMOL_OP_MEM_FREE, &a, 1, NULL, 0);
}
EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, void *s) {
  uint64_t a[2] = { p, 0 };
  CUresult r = smol_need_ctx(); if (!r) r = smol_stream_arg(s, &a[1]); if (r) return r;
  if (!smol_untrack_alloc(p)) return CUDA_ERROR_INVALID_VALUE;
  return smol_fire(SMOL_OP_MEM_FREE_ASYNC, a, 2, NULL, 0);
}
EXPORT CUresult cuMemGetInfo_v2(size_t *fr, size_t *total) {
  uint64_t o[2];
  CUresult r = smol_need_ctx(); if (r) return r;
  r = smol_call(SMOL_OP_MEM_GET_INFO, NULL, 0, NULL, 0, o, 2, NULL, 0, NULL);
  if (!r) { if (fr) *fr = o[0]; if (total) *total = o[1]; }
  return r;
}
/* Answered from the guest's own map: it holds every allocation (and module global) the host handed out. */
EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
  CUresult r = smol_need_ctx(); if (r) return r;
  CUdeviceptr b; size_t n;
  if (!smol_is_device(p, &b, &n)) return CUDA_ERROR_NOT_FOUND;
  if (base) *base = b;
  if (size) *size = n;
  return CUDA_SUCCESS;
}

/* Host-to-device data travels in the frame, so the copy is captured when it is issued: fire-and-forget
 * is safe even for the synchronous form. */
/* A copy of 0 bytes does nothing; otherwise the host pointer must not be NULL and every device byte
 * must lie inside one allocation. */
static CUresult copy_args(void *s, uint64_t *sid, size_t n, int null_host) {
  CUresult r = smol_need_ctx(); if (!r) r = smol_stream_arg(s, sid); if (r) return r;
  return n && null_host ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
static CUresult htod(CUdeviceptr d, const void *h, size_t n, void *s, int is_async) {
  const char *c = h;
  uint64_t sid;
  CUresult r = copy_args(s, &sid, n, !h); if (r || !n) return r;
  if (!smol_range_ok(d, n)) return CUDA_ERROR_INVALID_VALUE;
  if ((r = smol_capture(s, SMOL_CW_HOST, NULL))) return r;
  for (size_t off = 0; off < n; off += SMOL_CHUNK_SIZE) {
    size_t len = n - off < SMOL_CHUNK_SIZE ? n - off : SMOL_CHUNK_SIZE;
    uint64_t a[3] = { d + off, sid, (uint64_t)is_async };
    r = smol_fire(SMOL_OP_MEMCPY_HTO_D, a, 3, c + off, len);
    if (r) return r;
  }
  return CUDA_SUCCESS;
}
static CUresult dtoh(void *h, CUdeviceptr d, size_t n, void *s) {
  char *c = h;
  uint64_t sid;
  CUresult r0 = copy_args(s, &sid, n, !h); if (r0 || !n) return r0;
  if (!smol_range_ok(d, n)) return CUDA_ERROR_INVALID_VALUE;
  if ((r0 = smol_capture(s, SMOL_CW_HOST, NULL))) return r0;
  for (size_t off = 0; off < n; off += SMOL_CHUNK_SIZE) {
    size_t len = n - off < SMOL_CHUNK_SIZE ? n - off : SMOL_CHUNK_SIZE, got = 0;
    uint64_t a[3] = { d + off, len, sid };
    CUresult r = smol_call(SMOL_OP_MEMCPY_DTO_H, a, 3, NULL, 0, NULL, 0, c + off, len, &got);
    if (r) return r;
    if (got != len) return CUDA_ERROR_UNKNOWN;
  }
  return CUDA_SUCCESS;
}
static CUresult dtod(CUdeviceptr d, CUdeviceptr src, size_t n, void *s, int is_async) {
  uint64_t a[5] = { d, src, n, 0, (uint64_t)is_async };
  CUresult r = copy_args(s, &a[3], n, 0); if (r || !n) return r;
  if (!smol_range_ok(d, n) || !smol_range_ok(src, n)) return CUDA_ERROR_INVALID_VALUE;
  if ((r = smol_capture(s, SMOL_CW_DEVICE, NULL))) return r;
  return smol_fire(SMOL_OP_MEMCPY_DTO_D, a, 5, NULL, 0);
}
EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *h, size_t n) { return htod(d, h, n, NULL, 0); }
EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *h, size_t n, void *s) { return htod(d, h, n, s, 1); }
EXPORT CUresult cuMemcpyDtoH_v2(void *h, CUdeviceptr d, size_t n) { return dtoh(h, d, n, NULL); }
/* Device-to-host data must land in guest memory: the call waits for it (and for the stream). */
EXPORT CUresult cuMemcpyDtoHAsync_v2(void *h, CUdeviceptr d, size_t n, void *s) { return dtoh(h, d, n, s); }
EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { return dtod(d, s, n, NULL, 0); }
EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, void *st) { return dtod(d, s, n, st, 1); }
/* Unified addressing: a pointer inside an allocation is device memory, anything else host memory. */
static CUresult copy_any(CUdeviceptr dst, CUdeviceptr src, size_t n, void *s, int is_async) {
  uint64_t sid;
  CUresult r = copy_args(s, &sid, n, 0); if (r || !n) return r;
  int dd = smol_is_device(dst, NULL, NULL), sd = smol_is_device(src, NULL, NULL);
  if (dd && sd) return dtod(dst, src, n, s, is_async);
  if (dd) return htod(dst, (const void *)(uintptr_t)src, n, s, is_async);
  if (sd) return dtoh((void *)(uintptr_t)dst, src, n, s);
  memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n) { return copy_any(d, s, n, NULL, 0); }
EXPORT CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, void *st) { return copy_any(d, s, n, st, 1); }

/* The range must lie inside one allocation and start aligned to the element size. */
static CUresult set(CUdeviceptr d, unsigned v, unsigned elem, size_t n, void *s, int is_async) {
  uint64_t a[6] = { d, v, elem, n, 0, (uint64_t)is_async };
  CUresult r = smol_need_ctx(); if (!r) r = smol_stream_arg(s, &a[4]); if (r) return r;
  if (d % elem || n > SIZE_MAX / elem || !smol_range_ok(d, n * elem)) return CUDA_ERROR_INVALID_VALUE;
  if (!n) return CUDA_SUCCESS;
  if ((r = smol_capture(s, SMOL_CW_DEVICE, NULL))) return r;
  return smol_fire(SMOL_OP_MEMSET, a, 6, NULL, 0);
}
EXPORT CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { return set(d, v, 1, n, NULL, 0); }
EXPORT CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n) { return set(d, v, 2, n, NULL, 0); }
EXPORT CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned v, size_t n) { return set(d, v, 4, n, NULL, 0); }
EXPORT CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, void *s) { return set(d, v, 1, n, s, 1); }
EXPORT CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, void *s) { return set(d, v, 2, n, s, 1); }
EXPORT CUresult cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, void *s) { return set(d, v, 4, n, s, 1); }

/* host memory is ordinary guest memory; "pinned" has no meaning across the channel, but registrations
 * are remembered so unregistering answers as the driver does */
EXPORT CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags) {
  (void)flags;
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  if (posix_memalign(p, 4096, n ? n : 1)) return CUDA_ERROR_OUT_OF_MEMORY;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemAllocHost_v2(void **p, size_t n) { return cuMemHostAlloc(p, n, 0); }
EXPORT CUresult cuMemFreeHost(void *p) { free(p); return CUDA_SUCCESS; }
static struct { void *p; size_t n; } g_reg[256];
static int g_nreg;
static pthread_mutex_t g_reg_mu = PTHREAD_MUTEX_INITIALIZER;
EXPORT CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags) {
  (void)flags;
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!p || !n) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&g_reg_mu);
  for (int i = 0; i < g_nreg && !r; i++)
    if ((char *)p < (char *)g_reg[i].p + g_reg[i].n && (char *)g_reg[i].p < (char *)p + n) r = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  if (!r && g_nreg < 256) { g_reg[g_nreg].p = p; g_reg[g_nreg++].n = n; }
  pthread_mutex_unlock(&g_reg_mu);
  return r;
}
EXPORT CUresult cuMemHostUnregister(void *p) {
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  r = CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  pthread_mutex_lock(&g_reg_mu);
  for (int i = 0; i < g_nreg; i++) if (g_reg[i].p == p) { g_reg[i] = g_reg[--g_nreg]; r = CUDA_SUCCESS; break; }
  pthread_mutex_unlock(&g_reg_mu);
  return r;
}
EXPORT CUresult cuMemHostGetFlags(unsigned *f, void *p) { (void)p; if (!f) return CUDA_ERROR_INVALID_VALUE; *f = 0; return CUDA_SUCCESS; }

enum { PA_CONTEXT = 1, PA_MEMORY_TYPE = 2, PA_DEVICE_POINTER = 3, PA_HOST_POINTER = 4, PA_IS_MANAGED = 8,
       PA_DEVICE_ORDINAL = 9, PA_RANGE_START = 11, PA_RANGE_SIZE = 12, PA_MAPPED = 13 };
EXPORT CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p) {
  CUdeviceptr base = 0; size_t size = 0;
  CUresult r = smol_need_init(); if (r) return r;
  if (!data) return CUDA_ERROR_INVALID_VALUE;
  int dev = smol_is_device(p, &base, &size);
  switch (attr) {
    case PA_CONTEXT: if (!dev) return CUDA_ERROR_INVALID_VALUE; *(void **)data = smol_current(); return CUDA_SUCCESS;
    case PA_MEMORY_TYPE: if (!dev) return CUDA_ERROR_INVALID_VALUE; *(unsigned *)data = 2; return CUDA_SUCCESS;
    case PA_DEVICE_POINTER: if (!dev) return CUDA_ERROR_INVALID_VALUE; *(CUdeviceptr *)data = p; return CUDA_SUCCESS;
    case PA_HOST_POINTER: return CUDA_ERROR_INVALID_VALUE;
    case PA_IS_MANAGED: *(unsigned *)data = 0; return dev ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case PA_DEVICE_ORDINAL: if (!dev) return CUDA_ERROR_INVALID_VALUE; *(int *)data = smol_current() ? smol_current()->dev : 0; return CUDA_SUCCESS;
    case PA_RANGE_START: if (!dev) return CUDA_ERROR_INVALID_VALUE; *(CUdeviceptr *)data = base; return CUDA_SUCCESS;
    case PA_RANGE_SIZE: if (!dev) return CUDA_ERROR_INVALID_VALUE; *(size_t *)data = size; return CUDA_SUCCESS;
    case PA_MAPPED: *(unsigned *)data = dev; return dev ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
}
/* The plural form reports unknown pointers as unregistered host memory (type 0) instead of failing. */
EXPORT CUresult cuPointerGetAttributes(unsigned n, int *attrs, void **data, CUdeviceptr p) {
  int dev = smol_is_device(p, NULL, NULL);
  for (unsigned i = 0; i < n; i++) {
    if (cuPointerGetAttribute(data[i], attrs[i], p) == CUDA_SUCCESS) continue;
    if (attrs[i] == PA_MEMORY_TYPE || attrs[i] == PA_IS_MANAGED || attrs[i] == PA_MAPPED) *(unsigned *)data[i] = 0;
    else if (attrs[i] == PA_DEVICE_ORDINAL) *(int *)data[i] = dev ? 0 : -2;
    else if (attrs[i] == PA_HOST_POINTER && !dev) *(void **)data[i] = (void *)(uintptr_t)p;
    else *(void **)data[i] = NULL;
  }
  return CUDA_SUCCESS;
}
