/* Device memory: allocations, copies (split into protocol-sized chunks), memsets, host memory
 * (plain guest memory: there is no DMA across the channel), pointer attributes. */
#include "shim.h"
#include <stdlib.h>
#include <string.h>

typedef struct { CUdeviceptr base; size_t size; } range_t;
static range_t *g_r; static size_t g_n, g_cap;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

void smol_track_alloc(CUdeviceptr p, size_t n) {
  pthread_mutex_lock(&g_mu);
  if (g_n == g_cap) { g_cap = g_cap ? g_cap * 2 : 64; g_r = realloc(g_r, g_cap * sizeof *g_r); }
  g_r[g_n++] = (range_t){ p, n };
  pthread_mutex_unlock(&g_mu);
}
void smol_untrack_alloc(CUdeviceptr p) {
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < g_n; i++) if (g_r[i].base == p) { g_r[i] = g_r[--g_n]; break; }
  pthread_mutex_unlock(&g_mu);
}
int smol_is_device(CUdeviceptr p, CUdeviceptr *base, size_t *size) {
  int hit = 0;
  pthread_mutex_lock(&g_mu);
  for (size_t i = 0; i < g_n; i++) if (p >= g_r[i].base && p < g_r[i].base + g_r[i].size) {
    if (base) *base = g_r[i].base;
    if (size) *size = g_r[i].size;
    hit = 1; break;
  }
  pthread_mutex_unlock(&g_mu);
  return hit;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t n) {
  uint64_t a = n, o = 0;
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = smol_call(SMOL_OP_MEM_ALLOC, &a, 1, NULL, 0, &o, 1, NULL, 0, NULL);
  if (!r) { *p = o; smol_track_alloc(o, n); }
  return r;
}
EXPORT CUresult cuMemAllocAsync(CUdeviceptr *p, size_t n, void *s) {
  uint64_t a[2] = { n, smol_stream_id(s) }, o = 0;
  CUresult r = smol_call(SMOL_OP_MEM_ALLOC_ASYNC, a, 2, NULL, 0, &o, 1, NULL, 0, NULL);
  if (!r) { *p = o; smol_track_alloc(o, n); }
  return r;
}
EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t w, size_t h, unsigned elem) {
  (void)elem;
  size_t pt = (w + 511) & ~(size_t)511;
  CUresult r = cuMemAlloc_v2(p, pt * h);
  if (!r) *pitch = pt;
  return r;
}
EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
  if (!p) return CUDA_SUCCESS;
  smol_untrack_alloc(p);
  uint64_t a = p;
  return smol_fire(SMOL_OP_MEM_FREE, &a, 1, NULL, 0);
}
EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, void *s) {
  smol_untrack_alloc(p);
  uint64_t a[2] = { p, smol_stream_id(s) };
  return smol_fire(SMOL_OP_MEM_FREE_ASYNC, a, 2, NULL, 0);
}
EXPORT CUresult cuMemGetInfo_v2(size_t *fr, size_t *total) {
  uint64_t o[2];
  CUresult r = smol_call(SMOL_OP_MEM_GET_INFO, NULL, 0, NULL, 0, o, 2, NULL, 0, NULL);
  if (!r) { if (fr) *fr = o[0]; if (total) *total = o[1]; }
  return r;
}
EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *base, size_t *size, CUdeviceptr p) {
  uint64_t a = p, o[2];
  CUresult r = smol_call(SMOL_OP_MEM_GET_ADDRESS_RANGE, &a, 1, NULL, 0, o, 2, NULL, 0, NULL);
  if (!r) { if (base) *base = o[0]; if (size) *size = o[1]; }
  return r;
}

/* Host-to-device data travels in the frame, so the copy is captured when it is issued: fire-and-forget
 * is safe even for the synchronous form. */
static CUresult htod(CUdeviceptr d, const void *h, size_t n, void *s, int is_async) {
  const char *c = h;
  for (size_t off = 0; off < n || (n == 0 && off == 0); off += SMOL_CHUNK_SIZE) {
    size_t len = n - off < SMOL_CHUNK_SIZE ? n - off : SMOL_CHUNK_SIZE;
    uint64_t a[3] = { d + off, smol_stream_id(s), (uint64_t)is_async };
    CUresult r = smol_fire(SMOL_OP_MEMCPY_HTO_D, a, 3, c + off, len);
    if (r || n == 0) return r;
  }
  return CUDA_SUCCESS;
}
static CUresult dtoh(void *h, CUdeviceptr d, size_t n, void *s) {
  char *c = h;
  for (size_t off = 0; off < n; off += SMOL_CHUNK_SIZE) {
    size_t len = n - off < SMOL_CHUNK_SIZE ? n - off : SMOL_CHUNK_SIZE, got = 0;
    uint64_t a[3] = { d + off, len, smol_stream_id(s) };
    CUresult r = smol_call(SMOL_OP_MEMCPY_DTO_H, a, 3, NULL, 0, NULL, 0, c + off, len, &got);
    if (r) return r;
    if (got != len) return CUDA_ERROR_UNKNOWN;
  }
  return CUDA_SUCCESS;
}
static CUresult dtod(CUdeviceptr d, CUdeviceptr src, size_t n, void *s, int is_async) {
  uint64_t a[5] = { d, src, n, smol_stream_id(s), (uint64_t)is_async };
  return smol_fire(SMOL_OP_MEMCPY_DTO_D, a, 5, NULL, 0);
}
EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr d, const void *h, size_t n) { return htod(d, h, n, NULL, 0); }
EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr d, const void *h, size_t n, void *s) { return htod(d, h, n, s, 1); }
EXPORT CUresult cuMemcpyDtoH_v2(void *h, CUdeviceptr d, size_t n) { return dtoh(h, d, n, NULL); }
/* Device-to-host data must land in guest memory: the call waits for it (and for the stream). */
EXPORT CUresult cuMemcpyDtoHAsync_v2(void *h, CUdeviceptr d, size_t n, void *s) { return dtoh(h, d, n, s); }
EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr d, CUdeviceptr s, size_t n) { return dtod(d, s, n, NULL, 0); }
EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr d, CUdeviceptr s, size_t n, void *st) { return dtod(d, s, n, st, 1); }
static CUresult copy_any(CUdeviceptr dst, CUdeviceptr src, size_t n, void *s, int is_async) {
  int dd = smol_is_device(dst, NULL, NULL), sd = smol_is_device(src, NULL, NULL);
  if (dd && sd) return dtod(dst, src, n, s, is_async);
  if (dd) return htod(dst, (const void *)(uintptr_t)src, n, s, is_async);
  if (sd) return dtoh((void *)(uintptr_t)dst, src, n, s);
  memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemcpy(CUdeviceptr d, CUdeviceptr s, size_t n) { return copy_any(d, s, n, NULL, 0); }
EXPORT CUresult cuMemcpyAsync(CUdeviceptr d, CUdeviceptr s, size_t n, void *st) { return copy_any(d, s, n, st, 1); }

static CUresult set(CUdeviceptr d, unsigned v, unsigned elem, size_t n, void *s, int is_async) {
  uint64_t a[6] = { d, v, elem, n, smol_stream_id(s), (uint64_t)is_async };
  return smol_fire(SMOL_OP_MEMSET, a, 6, NULL, 0);
}
EXPORT CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { return set(d, v, 1, n, NULL, 0); }
EXPORT CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n) { return set(d, v, 2, n, NULL, 0); }
EXPORT CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned v, size_t n) { return set(d, v, 4, n, NULL, 0); }
EXPORT CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, void *s) { return set(d, v, 1, n, s, 1); }
EXPORT CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, void *s) { return set(d, v, 2, n, s, 1); }
EXPORT CUresult cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, void *s) { return set(d, v, 4, n, s, 1); }

/* host memory is ordinary guest memory; "pinned" has no meaning across the channel */
EXPORT CUresult cuMemHostAlloc(void **p, size_t n, unsigned flags) {
  (void)flags;
  if (posix_memalign(p, 4096, n ? n : 1)) return CUDA_ERROR_OUT_OF_MEMORY;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemAllocHost_v2(void **p, size_t n) { return cuMemHostAlloc(p, n, 0); }
EXPORT CUresult cuMemFreeHost(void *p) { free(p); return CUDA_SUCCESS; }
EXPORT CUresult cuMemHostRegister_v2(void *p, size_t n, unsigned flags) { (void)p; (void)n; (void)flags; return CUDA_SUCCESS; }
EXPORT CUresult cuMemHostUnregister(void *p) { (void)p; return CUDA_SUCCESS; }
EXPORT CUresult cuMemHostGetFlags(unsigned *f, void *p) { (void)p; *f = 0; return CUDA_SUCCESS; }

enum { PA_CONTEXT = 1, PA_MEMORY_TYPE = 2, PA_DEVICE_POINTER = 3, PA_HOST_POINTER = 4, PA_IS_MANAGED = 8,
       PA_DEVICE_ORDINAL = 9, PA_RANGE_START = 11, PA_RANGE_SIZE = 12, PA_MAPPED = 13 };
EXPORT CUresult cuPointerGetAttribute(void *data, int attr, CUdeviceptr p) {
  CUdeviceptr base = 0; size_t size = 0;
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
