/* Memory pools and stream-ordered allocation from them. Pools get guest-minted ids (creating one is one
 * round trip, for the driver's answer); each device's default pool is a fixed object whose id the host
 * resolves on first use. The device's current pool is remembered here, so cuDeviceGetMemPool needs no
 * round trip. Pool allocations are ordinary allocations in the shim's map (freed by cuMemFree or
 * cuMemFreeAsync). Exporting or importing pools and pool pointers (IPC) cannot cross into a guest: those
 * stay the NOT_SUPPORTED stubs. */
#include "shim.h"
#include <stdlib.h>
#include <string.h>

typedef struct { int type, id; } smol_loc;                                  /* CUmemLocation */
typedef struct { smol_loc loc; unsigned flags; } smol_access;               /* CUmemAccessDesc */
typedef struct { int allocType, handleTypes; smol_loc loc; void *win32; size_t maxSize; unsigned short usage; unsigned char reserved[54]; } smol_pool_props;
typedef struct __attribute__((aligned(16))) smol_pool { uint32_t magic; int dev; int is_default; uint64_t id; } smol_pool;

enum { LOC_DEVICE = 1, LOC_HOST = 2, LOC_HOST_NUMA = 3, ALLOC_PINNED = 1, PROT_RW = 3 };

static smol_pool g_default[SMOL_MAX_DEVICES];
static smol_pool *g_current[SMOL_MAX_DEVICES];
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static int dev_ok(int dev) { return dev >= 0 && dev < smol_device_count && dev < SMOL_MAX_DEVICES; }
static smol_pool *default_pool(int dev) {
  pthread_mutex_lock(&g_mu);
  smol_pool *p = &g_default[dev];
  if (!p->magic) {
    p->magic = SMOL_MAGIC_OBJ; p->dev = dev; p->is_default = 1;
    p->id = SMOL_KIND_POOL << 48 | (uint64_t)(SMOL_PRIMARY_BASE + dev);
    smol_handle_add(p, SMOL_H_POOL);
  }
  pthread_mutex_unlock(&g_mu);
  return p;
}
static int pool_ok(smol_pool *p) { return smol_handle_ok(p, SMOL_H_POOL); }

EXPORT CUresult cuDeviceGetDefaultMemPool(smol_pool **out, CUdevice dev) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (!dev_ok(dev)) return CUDA_ERROR_INVALID_DEVICE;
  *out = default_pool(dev); return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceGetMemPool(smol_pool **out, CUdevice dev) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  if (!dev_ok(dev)) return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&g_mu); smol_pool *p = g_current[dev]; pthread_mutex_unlock(&g_mu);
  *out = p ? p : default_pool(dev); return CUDA_SUCCESS;
}
EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, smol_pool *p) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!dev_ok(dev)) return CUDA_ERROR_INVALID_DEVICE;
  if (!pool_ok(p) || p->dev != dev) return CUDA_ERROR_INVALID_VALUE;
  uint64_t a[2] = { (uint64_t)dev, p->id };
  r = smol_call(SMOL_OP_DEVICE_SET_MEM_POOL, a, 2, NULL, 0, NULL, 0, NULL, 0, NULL);
  if (!r) { pthread_mutex_lock(&g_mu); g_current[dev] = p->is_default ? NULL : p; pthread_mutex_unlock(&g_mu); }
  return r;
}

/* Device pools only: a host (or host NUMA) pool's memory would live in the host's RAM, out of the
 * guest's reach, so it is refused as NOT_SUPPORTED rather than handed out unusable. */
EXPORT CUresult cuMemPoolCreate(smol_pool **out, const smol_pool_props *pp) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!out || !pp || pp->allocType != ALLOC_PINNED) return CUDA_ERROR_INVALID_VALUE;
  if (pp->loc.type == LOC_HOST || pp->loc.type == LOC_HOST_NUMA) return smol_unsupported("cuMemPoolCreate (host memory pool)");
  if (pp->loc.type != LOC_DEVICE || !dev_ok(pp->loc.id)) return CUDA_ERROR_INVALID_VALUE;
  smol_pool *p = aligned_alloc(16, sizeof *p);
  *p = (smol_pool){ SMOL_MAGIC_OBJ, pp->loc.id, 0, smol_mint(SMOL_KIND_POOL) };
  uint64_t a[6] = { p->id, (uint64_t)pp->allocType, (uint64_t)(unsigned)pp->handleTypes, (uint64_t)pp->loc.type, (uint64_t)pp->loc.id, pp->maxSize };
  r = smol_call(SMOL_OP_MEM_POOL_CREATE, a, 6, NULL, 0, NULL, 0, NULL, 0, NULL);
  if (r) { free(p); return r; }
  smol_handle_add(p, SMOL_H_POOL);
  *out = p; return CUDA_SUCCESS;
}
/* A device's default pool cannot be destroyed; destroying the current pool makes the default current. */
EXPORT CUresult cuMemPoolDestroy(smol_pool *p) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!pool_ok(p) || p->is_default || !smol_handle_take(p, SMOL_H_POOL)) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&g_mu); if (g_current[p->dev] == p) g_current[p->dev] = NULL; pthread_mutex_unlock(&g_mu);
  uint64_t id = p->id; free(p);
  return smol_fire(SMOL_OP_MEM_POOL_DESTROY, &id, 1, NULL, 0);
}

/* Attributes 1-3 are ints, 4-8 u64 (sent as 8 exact bytes); 5 and 7 are read-only, 6 and 8 may only be
 * reset (set to 0). */
EXPORT CUresult cuMemPoolSetAttribute(smol_pool *p, int attr, void *value) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!pool_ok(p) || !value || attr < 1 || attr > 8 || attr == 5 || attr == 7) return CUDA_ERROR_INVALID_VALUE;
  uint64_t v = 0;
  if (attr <= 3) v = *(int *)value != 0; else memcpy(&v, value, 8);
  if ((attr == 6 || attr == 8) && v) return CUDA_ERROR_INVALID_VALUE;
  uint64_t a[3] = { p->id, (uint64_t)attr, attr <= 3 ? v : 0 };
  return smol_call(SMOL_OP_MEM_POOL_SET_ATTRIBUTE, a, 3, attr <= 3 ? NULL : &v, attr <= 3 ? 0 : 8, NULL, 0, NULL, 0, NULL);
}
EXPORT CUresult cuMemPoolGetAttribute(smol_pool *p, int attr, void *value) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!pool_ok(p) || !value || attr < 1 || attr > 8) return CUDA_ERROR_INVALID_VALUE;
  uint64_t a[2] = { p->id, (uint64_t)attr }, iv = 0, v = 0;
  size_t got = 0;
  r = smol_call(SMOL_OP_MEM_POOL_GET_ATTRIBUTE, a, 2, NULL, 0, &iv, 1, &v, 8, &got);
  if (r) return r;
  if (got != 8) return CUDA_ERROR_UNKNOWN;
  if (attr <= 3) *(int *)value = (int)iv; else memcpy(value, &v, 8);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemPoolTrimTo(smol_pool *p, size_t keep) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!pool_ok(p)) return CUDA_ERROR_INVALID_VALUE;
  uint64_t a[2] = { p->id, keep };
  return smol_fire(SMOL_OP_MEM_POOL_TRIM_TO, a, 2, NULL, 0);
}

EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t n, smol_pool *p, void *s) {
  uint64_t a[3] = { n, 0, 0 }, o = 0;
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!dptr || !n || !pool_ok(p)) return CUDA_ERROR_INVALID_VALUE;
  if ((r = smol_stream_arg(s, &a[2]))) return r;
  a[1] = p->id;
  r = smol_call(SMOL_OP_MEM_ALLOC_FROM_POOL_ASYNC, a, 3, NULL, 0, &o, 1, NULL, 0, NULL);
  if (!r) { *dptr = o; smol_track_alloc(o, n, SMOL_ALLOC_OWNED); }
  return r;
}

static CUresult loc_check(const smol_loc *l) {
  if (l->type != LOC_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  return dev_ok(l->id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}
EXPORT CUresult cuMemPoolSetAccess(smol_pool *p, const smol_access *map, size_t count) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!pool_ok(p) || (count && !map)) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; i++) {
    if ((r = loc_check(&map[i].loc))) return r;
    if (map[i].flags != 0 && map[i].flags != 1 && map[i].flags != PROT_RW) return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t i = 0; i < count && !r; i++) {
    uint64_t a[4] = { p->id, (uint64_t)map[i].loc.type, (uint64_t)map[i].loc.id, map[i].flags };
    r = smol_call(SMOL_OP_MEM_POOL_SET_ACCESS, a, 4, NULL, 0, NULL, 0, NULL, 0, NULL);
  }
  return r;
}
EXPORT CUresult cuMemPoolGetAccess(unsigned *flags, smol_pool *p, const smol_loc *loc) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!flags || !pool_ok(p) || !loc) return CUDA_ERROR_INVALID_VALUE;
  if ((r = loc_check(loc))) return r;
  uint64_t a[3] = { p->id, (uint64_t)loc->type, (uint64_t)loc->id }, v = 0;
  r = smol_call(SMOL_OP_MEM_POOL_GET_ACCESS, a, 3, NULL, 0, &v, 1, NULL, 0, NULL);
  if (!r) *flags = (unsigned)v;
  return r;
}

/* CUDA 13's location-based forms: a device location with pinned memory is the device's pool. */
static CUresult loc_dev(const smol_loc *l, int type, int *dev) {
  if (!l || type != ALLOC_PINNED) return CUDA_ERROR_INVALID_VALUE;
  if (l->type == LOC_HOST || l->type == LOC_HOST_NUMA) return smol_unsupported("host memory pools");
  if (l->type != LOC_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  *dev = l->id; return CUDA_SUCCESS;
}
EXPORT CUresult cuMemGetDefaultMemPool(smol_pool **out, const smol_loc *l, int type) {
  int dev = 0; CUresult r = smol_need_init(); if (!r) r = loc_dev(l, type, &dev);
  return r ? r : cuDeviceGetDefaultMemPool(out, dev);
}
EXPORT CUresult cuMemGetMemPool(smol_pool **out, const smol_loc *l, int type) {
  int dev = 0; CUresult r = smol_need_init(); if (!r) r = loc_dev(l, type, &dev);
  return r ? r : cuDeviceGetMemPool(out, dev);
}
EXPORT CUresult cuMemSetMemPool(const smol_loc *l, int type, smol_pool *p) {
  int dev = 0; CUresult r = smol_need_init(); if (!r) r = loc_dev(l, type, &dev);
  return r ? r : cuDeviceSetMemPool(dev, p);
}
