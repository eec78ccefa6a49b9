/* 2D/3D copies and 2D memsets. Every copy is reduced to one shape: rows of `width` bytes, `rows` per
 * slice, `depth` slices, each side with its own pitch and slice pitch. Guest host memory cannot be read
 * by the GPU, so host-to-device rows travel packed (no pitch gaps) in the frame and device-to-host rows
 * come back packed and are scattered here; a device-to-device copy is one fire-and-forget op. Arrays do
 * not exist in smol (cuArrayCreate is unsupported), so a copy naming one is refused. */
#include "shim.h"
#include "capture.h"
#include <stdlib.h>
#include <string.h>

enum { MT_HOST = 1, MT_DEVICE = 2, MT_ARRAY = 3, MT_UNIFIED = 4 };

/* CUDA_MEMCPY2D and CUDA_MEMCPY3D (cuda.h, the size_t "_v2" layouts every current name takes). */
typedef struct {
  size_t srcXInBytes, srcY; int srcMemoryType; const void *srcHost; CUdeviceptr srcDevice; void *srcArray; size_t srcPitch;
  size_t dstXInBytes, dstY; int dstMemoryType; void *dstHost; CUdeviceptr dstDevice; void *dstArray; size_t dstPitch;
  size_t WidthInBytes, Height;
} memcpy2d_t;
typedef struct {
  size_t srcXInBytes, srcY, srcZ, srcLOD; int srcMemoryType; const void *srcHost; CUdeviceptr srcDevice; void *srcArray;
  void *reserved0; size_t srcPitch, srcHeight;
  size_t dstXInBytes, dstY, dstZ, dstLOD; int dstMemoryType; void *dstHost; CUdeviceptr dstDevice; void *dstArray;
  void *reserved1; size_t dstPitch, dstHeight;
  size_t WidthInBytes, Height, Depth;
} memcpy3d_t;

typedef struct { int dev; uint64_t addr; size_t pitch, height; } side_t;
typedef struct { side_t src, dst; size_t width, rows, depth; } shape_t;

static int mul_ok(size_t a, size_t b, size_t *out) { return !__builtin_mul_overflow(a, b, out); }

/* The side's address of (x, y, z), or INVALID_VALUE for an impossible one; an array is NOT_SUPPORTED. */
static CUresult side(int type, const void *host, CUdeviceptr dptr, void *array, size_t x, size_t y, size_t z,
                     size_t pitch, size_t height, side_t *out, const char *fn) {
  switch (type) {
    case MT_HOST: out->dev = 0; out->addr = (uintptr_t)host; break;
    case MT_DEVICE: out->dev = 1; out->addr = dptr; break;
    case MT_UNIFIED: out->dev = smol_is_device(dptr, NULL, NULL); out->addr = dptr; break;
    case MT_ARRAY:
      if (!array) return CUDA_ERROR_INVALID_VALUE;
      smol_log("%s from or to a CUDA array: arrays are not supported by the remoting (CUDA_ERROR_NOT_SUPPORTED)", fn);
      return CUDA_ERROR_NOT_SUPPORTED;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  if (!out->addr) return CUDA_ERROR_INVALID_VALUE;
  size_t off, t;
  if (!mul_ok(z, height, &t) || __builtin_add_overflow(t, y, &t) || !mul_ok(t, pitch, &off) ||
      __builtin_add_overflow(off, x, &off) || __builtin_add_overflow(out->addr, off, &out->addr)) return CUDA_ERROR_INVALID_VALUE;
  out->pitch = pitch; out->height = height;
  return CUDA_SUCCESS;
}

/* Bytes from a side's first to one past its last byte; 0 when that overflows. */
static size_t extent(const side_t *s, size_t width, size_t rows, size_t depth) {
  size_t a, b, n;
  if (!mul_ok(depth - 1, s->height, &a) || __builtin_add_overflow(a, rows - 1, &a) || !mul_ok(a, s->pitch, &b) ||
      __builtin_add_overflow(b, width, &n) || n > (size_t)1 << 52) return 0;
  return n;
}
static CUresult side_ok(const side_t *s, const shape_t *c) {
  if ((c->rows > 1 || c->depth > 1) && s->pitch < c->width) return CUDA_ERROR_INVALID_VALUE;
  if (c->depth > 1 && s->height < c->rows) return CUDA_ERROR_INVALID_VALUE;
  size_t n = extent(s, c->width, c->rows, c->depth);
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  if (s->dev) return smol_range_ok(s->addr, n) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  return s->addr + n < s->addr ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
static inline uint64_t row_at(const side_t *s, size_t y, size_t z) { return s->addr + (z * s->height + y) * s->pitch; }

/* Host rows [y0, y0+n) of slice z packed into buf, or buf scattered back into them. */
static void pack(char *buf, const side_t *h, size_t width, size_t y0, size_t n, size_t z, int to_host) {
  for (size_t i = 0; i < n; i++) {
    char *row = (char *)(uintptr_t)row_at(h, y0 + i, z);
    if (to_host) memcpy(row, buf + i * width, width); else memcpy(buf + i * width, row, width);
  }
}

/* A row wider than a frame goes as 1D copies, one row at a time (they chunk themselves). */
static CUresult wide_rows(const shape_t *c, void *stream, int is_async) {
  extern CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr, const void *, size_t, void *);
  extern CUresult cuMemcpyHtoD_v2(CUdeviceptr, const void *, size_t);
  extern CUresult cuMemcpyDtoHAsync_v2(void *, CUdeviceptr, size_t, void *);
  for (size_t z = 0; z < c->depth; z++)
    for (size_t y = 0; y < c->rows; y++) {
      uint64_t d = row_at(&c->dst, y, z), s = row_at(&c->src, y, z);
      CUresult r = c->dst.dev ? (is_async ? cuMemcpyHtoDAsync_v2(d, (void *)(uintptr_t)s, c->width, stream) : cuMemcpyHtoD_v2(d, (void *)(uintptr_t)s, c->width))
                              : cuMemcpyDtoHAsync_v2((void *)(uintptr_t)d, s, c->width, stream);
      if (r) return r;
    }
  return CUDA_SUCCESS;
}

/* Host <-> device, slice by slice, as many whole rows per frame as fit. */
static CUresult host_device(const shape_t *c, uint64_t sid, void *stream, int is_async) {
  if (c->width > SMOL_CHUNK_SIZE) return wide_rows(c, stream, is_async);
  int up = c->dst.dev;
  const side_t *h = up ? &c->src : &c->dst, *d = up ? &c->dst : &c->src;
  size_t per = SMOL_CHUNK_SIZE / c->width, cap = (per < c->rows ? per : c->rows) * c->width;
  char *buf = malloc(cap);
  if (!buf) return CUDA_ERROR_OUT_OF_MEMORY;
  CUresult r = CUDA_SUCCESS;
  for (size_t z = 0; z < c->depth && !r; z++)
    for (size_t y = 0; y < c->rows && !r; y += per) {
      size_t n = c->rows - y < per ? c->rows - y : per, len = n * c->width, got = 0;
      if (up) {
        pack(buf, h, c->width, y, n, z, 0);
        uint64_t a[6] = { row_at(d, y, z), d->pitch, c->width, n, sid, (uint64_t)is_async };
        r = smol_fire(SMOL_OP_MEMCPY2D_HTO_D, a, 6, buf, len);
      } else {
        uint64_t a[5] = { row_at(d, y, z), d->pitch, c->width, n, sid };
        r = smol_call(SMOL_OP_MEMCPY2D_DTO_H, a, 5, NULL, 0, NULL, 0, buf, len, &got);
        if (!r && got != len) r = CUDA_ERROR_UNKNOWN;
        if (!r) pack(buf, h, c->width, y, n, z, 1);
      }
    }
  free(buf);
  return r;
}

static CUresult run(shape_t *c, void *stream, int is_async) {
  uint64_t sid;
  CUresult r = smol_stream_arg(stream, &sid); if (r) return r;
  if (!c->width || !c->rows || !c->depth) return CUDA_SUCCESS;
  if ((r = side_ok(&c->src, c)) || (r = side_ok(&c->dst, c))) return r;
  /* A pitch or slice height the copy does not use may be anything; the host gets ones that mean nothing. */
  if (c->depth == 1) c->src.height = c->dst.height = c->rows;
  if (c->depth == 1 && c->rows == 1) c->src.pitch = c->dst.pitch = c->width;
  /* in a capture, guest host memory cannot be replayed: refused as the driver refuses pageable memory */
  if ((r = smol_capture(stream, c->src.dev && c->dst.dev ? SMOL_CW_DEVICE : SMOL_CW_HOST, NULL))) return r;
  if (c->src.dev && c->dst.dev) {
    uint64_t a[11] = { c->dst.addr, c->dst.pitch, c->dst.height, c->src.addr, c->src.pitch, c->src.height,
                       c->width, c->rows, c->depth, sid, (uint64_t)is_async };
    return smol_fire(SMOL_OP_MEMCPY3D_DTO_D, a, 11, NULL, 0);
  }
  if (c->src.dev || c->dst.dev) return host_device(c, sid, stream, is_async);
  /* host to host: the legacy stream's order is the caller's own */
  for (size_t z = 0; z < c->depth; z++)
    for (size_t y = 0; y < c->rows; y++)
      memmove((void *)(uintptr_t)row_at(&c->dst, y, z), (const void *)(uintptr_t)row_at(&c->src, y, z), c->width);
  return CUDA_SUCCESS;
}

static CUresult copy2d(const memcpy2d_t *p, void *stream, int is_async, const char *fn) {
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  shape_t c = { .width = p->WidthInBytes, .rows = p->Height, .depth = 1 };
  if ((r = side(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, p->srcXInBytes, p->srcY, 0, p->srcPitch, 0, &c.src, fn)) ||
      (r = side(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray, p->dstXInBytes, p->dstY, 0, p->dstPitch, 0, &c.dst, fn))) return r;
  return run(&c, stream, is_async);
}
static CUresult copy3d(const memcpy3d_t *p, void *stream, int is_async, const char *fn) {
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!p || p->reserved0 || p->reserved1) return CUDA_ERROR_INVALID_VALUE;
  shape_t c = { .width = p->WidthInBytes, .rows = p->Height, .depth = p->Depth };
  if ((r = side(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcArray, p->srcXInBytes, p->srcY, p->srcZ, p->srcPitch, p->srcHeight, &c.src, fn)) ||
      (r = side(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstArray, p->dstXInBytes, p->dstY, p->dstZ, p->dstPitch, p->dstHeight, &c.dst, fn))) return r;
  return run(&c, stream, is_async);
}
EXPORT CUresult cuMemcpy2D_v2(const memcpy2d_t *p) { return copy2d(p, NULL, 0, "cuMemcpy2D"); }
EXPORT CUresult cuMemcpy2DUnaligned_v2(const memcpy2d_t *p) { return copy2d(p, NULL, 0, "cuMemcpy2DUnaligned"); }
EXPORT CUresult cuMemcpy2DAsync_v2(const memcpy2d_t *p, void *s) { return copy2d(p, s, 1, "cuMemcpy2DAsync"); }
EXPORT CUresult cuMemcpy3D_v2(const memcpy3d_t *p) { return copy3d(p, NULL, 0, "cuMemcpy3D"); }
EXPORT CUresult cuMemcpy3DAsync_v2(const memcpy3d_t *p, void *s) { return copy3d(p, s, 1, "cuMemcpy3DAsync"); }

/* 2D memsets: the rows' footprint must lie inside one allocation, the start aligned to the element. */
static CUresult set2d(CUdeviceptr d, size_t pitch, unsigned v, unsigned elem, size_t w, size_t h, void *s, int is_async) {
  uint64_t a[8] = { d, pitch, v, elem, w, h, 0, (uint64_t)is_async };
  CUresult r = smol_need_ctx(); if (!r) r = smol_stream_arg(s, &a[6]); if (!r) r = smol_capture(s, SMOL_CW_DEVICE, NULL); if (r) return r;
  if (d % elem) return CUDA_ERROR_INVALID_VALUE;
  if (!w || !h) return CUDA_SUCCESS;
  side_t t = { 1, d, pitch, 0 };
  size_t bytes, n;
  if (!mul_ok(w, elem, &bytes) || (h > 1 && pitch < bytes) || !(n = extent(&t, bytes, h, 1)) || !smol_range_ok(d, n))
    return CUDA_ERROR_INVALID_VALUE;
  if (h == 1) a[1] = bytes; /* the pitch of one row is unused */
  return smol_fire(SMOL_OP_MEMSET2D, a, 8, NULL, 0);
}
EXPORT CUresult cuMemsetD2D8_v2(CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h) { return set2d(d, p, v, 1, w, h, NULL, 0); }
EXPORT CUresult cuMemsetD2D16_v2(CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h) { return set2d(d, p, v, 2, w, h, NULL, 0); }
EXPORT CUresult cuMemsetD2D32_v2(CUdeviceptr d, size_t p, unsigned v, size_t w, size_t h) { return set2d(d, p, v, 4, w, h, NULL, 0); }
EXPORT CUresult cuMemsetD2D8Async(CUdeviceptr d, size_t p, unsigned char v, size_t w, size_t h, void *s) { return set2d(d, p, v, 1, w, h, s, 1); }
EXPORT CUresult cuMemsetD2D16Async(CUdeviceptr d, size_t p, unsigned short v, size_t w, size_t h, void *s) { return set2d(d, p, v, 2, w, h, s, 1); }
EXPORT CUresult cuMemsetD2D32Async(CUdeviceptr d, size_t p, unsigned v, size_t w, size_t h, void *s) { return set2d(d, p, v, 4, w, h, s, 1); }
