/* Virtual memory management (PyTorch's expandable segments): reservations, physical allocations,
 * mappings and access. Each call that changes the device's address space is one round trip (the driver's
 * answer matters); the shim keeps the reservations, mappings and handles it was given, so arguments that
 * name none of them fail here with the driver's code, and a mapping with access becomes device memory in
 * handles.c's map (copies may cross from one mapping into the next, as the VA is contiguous). A handle is
 * a pointer to a 16-byte-aligned record; its reference count (cuMemCreate, cuMemRetainAllocationHandle,
 * cuMemRelease) lives here, and the host releases the memory once no reference and no mapping is left.
 * Shareable handles (POSIX fd, fabric) cannot cross into a guest: export and import answer NOT_SUPPORTED. */
#include "shim.h"
#include <stdlib.h>
#include <string.h>

typedef struct { int type, id; } smol_loc;
typedef struct { smol_loc loc; unsigned flags; } smol_access;
typedef struct { int type, handleTypes; smol_loc loc; void *win32; unsigned char allocFlags[8]; } smol_alloc_prop;
typedef struct __attribute__((aligned(16))) smol_mh { uint32_t magic; int refs, maps; uint64_t id; size_t size; smol_alloc_prop prop; } smol_mh;
typedef struct { CUdeviceptr base; size_t size; } smol_resv;
typedef struct { CUdeviceptr base; size_t size; smol_mh *h; } smol_map;

enum { LOC_DEVICE = 1, LOC_HOST = 2, LOC_HOST_NUMA = 3, ALLOC_PINNED = 1, MAXN = 65536 };
static smol_resv *g_rv; static size_t g_nrv;
static smol_map *g_mp; static size_t g_nmp;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static int dev_ok(int dev) { return dev >= 0 && dev < smol_device_count; }
static long resv_of(CUdeviceptr p, size_t n) {
  for (size_t i = 0; i < g_nrv; i++) if (p >= g_rv[i].base && n <= g_rv[i].size && p - g_rv[i].base <= g_rv[i].size - n) return (long)i;
  return -1;
}
static long map_at(CUdeviceptr p) {
  for (size_t i = 0; i < g_nmp; i++) if (p >= g_mp[i].base && p - g_mp[i].base < g_mp[i].size) return (long)i;
  return -1;
}
/* [p, p+n) is exactly a run of whole mappings with no gap. */
static int whole_maps(CUdeviceptr p, size_t n) {
  if (!n || p + n < p) return 0;
  for (CUdeviceptr at = p; at < p + n;) {
    long i = map_at(at);
    if (i < 0 || g_mp[i].base != at || g_mp[i].size > p + n - at) return 0;
    at += g_mp[i].size;
  }
  return 1;
}
static int in_range(CUdeviceptr b, CUdeviceptr p, size_t n) { return b >= p && b - p < n; }
/* The host frees the memory once nothing refers to it (called with g_mu held). */
static void settle(smol_mh *h) {
  if (h->refs || h->maps) return;
  uint64_t id = h->id;
  smol_fire(SMOL_OP_MEM_RELEASE, &id, 1, NULL, 0);
  h->magic = 0; free(h);
}

static CUresult prop_check(const smol_alloc_prop *p) {
  if (p->type != ALLOC_PINNED) return CUDA_ERROR_INVALID_VALUE;
  if (p->loc.type == LOC_HOST || p->loc.type == LOC_HOST_NUMA) return smol_unsupported("host memory through cuMemCreate");
  if (p->loc.type != LOC_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  return dev_ok(p->loc.id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

EXPORT CUresult cuMemGetAllocationGranularity(size_t *g, const smol_alloc_prop *prop, int option) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!g || !prop || (option != 0 && option != 1)) return CUDA_ERROR_INVALID_VALUE;
  if ((r = prop_check(prop))) return r;
  uint64_t a[5] = { (uint64_t)prop->type, (uint64_t)(unsigned)prop->handleTypes, (uint64_t)prop->loc.type, (uint64_t)prop->loc.id, (uint64_t)option }, o = 0;
  r = smol_call(SMOL_OP_MEM_GET_ALLOCATION_GRANULARITY, a, 5, NULL, 0, &o, 1, NULL, 0, NULL);
  if (!r) *g = o;
  return r;
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr, unsigned long long flags) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!ptr || !size || flags || (align & (align - 1))) return CUDA_ERROR_INVALID_VALUE;
  uint64_t a[4] = { size, align, addr, flags }, o = 0;
  r = smol_call(SMOL_OP_MEM_ADDRESS_RESERVE, a, 4, NULL, 0, &o, 1, NULL, 0, NULL);
  if (r) return r;
  pthread_mutex_lock(&g_mu);
  if (!g_rv) g_rv = malloc(MAXN * sizeof *g_rv);
  if (g_nrv < MAXN) g_rv[g_nrv++] = (smol_resv){ o, size };
  pthread_mutex_unlock(&g_mu);
  *ptr = o; return CUDA_SUCCESS;
}
/* The whole reservation, and only once nothing is mapped in it. */
EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  CUresult r = smol_need_init(); if (r) return r;
  pthread_mutex_lock(&g_mu);
  long i = resv_of(ptr, size);
  int ok = i >= 0 && g_rv[i].base == ptr && g_rv[i].size == size;
  for (size_t k = 0; ok && k < g_nmp; k++) if (in_range(g_mp[k].base, ptr, size)) ok = 0;
  pthread_mutex_unlock(&g_mu);
  if (!ok) return CUDA_ERROR_INVALID_VALUE;
  uint64_t a[2] = { ptr, size };
  r = smol_call(SMOL_OP_MEM_ADDRESS_FREE, a, 2, NULL, 0, NULL, 0, NULL, 0, NULL);
  if (r) return r;
  pthread_mutex_lock(&g_mu);
  if ((i = resv_of(ptr, size)) >= 0) g_rv[i] = g_rv[--g_nrv];
  pthread_mutex_unlock(&g_mu);
  return CUDA_SUCCESS;
}

/* Pinned device memory; the requested shareable handle types travel (the host's driver judges them), but
 * no handle can be exported into the guest. */
EXPORT CUresult cuMemCreate(uint64_t *handle, size_t size, const smol_alloc_prop *prop, unsigned long long flags) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!handle || !prop || flags || !size) return CUDA_ERROR_INVALID_VALUE;
  if ((r = prop_check(prop))) return r;
  smol_mh *h = aligned_alloc(16, sizeof *h);
  memset(h, 0, sizeof *h);
  h->magic = SMOL_MAGIC_OBJ; h->refs = 1; h->id = smol_mint(SMOL_KIND_MEM_HANDLE); h->size = size;
  h->prop = *prop; h->prop.win32 = NULL;
  uint64_t fl; memcpy(&fl, prop->allocFlags, 8);
  uint64_t a[8] = { h->id, size, (uint64_t)prop->type, (uint64_t)(unsigned)prop->handleTypes, (uint64_t)prop->loc.type, (uint64_t)prop->loc.id, fl, flags };
  r = smol_call(SMOL_OP_MEM_CREATE, a, 8, NULL, 0, NULL, 0, NULL, 0, NULL);
  if (r) { free(h); return r; }
  smol_handle_add(h, SMOL_H_MEM_HANDLE);
  *handle = (uint64_t)(uintptr_t)h; return CUDA_SUCCESS;
}
/* Legal while mapped: the memory stays until its last mapping goes. */
EXPORT CUresult cuMemRelease(uint64_t handle) {
  CUresult r = smol_need_init(); if (r) return r;
  smol_mh *h = (smol_mh *)(uintptr_t)handle;
  pthread_mutex_lock(&g_mu);
  if (!smol_handle_ok(h, SMOL_H_MEM_HANDLE)) { pthread_mutex_unlock(&g_mu); return CUDA_ERROR_INVALID_VALUE; }
  if (--h->refs == 0) { smol_handle_take(h, SMOL_H_MEM_HANDLE); settle(h); }
  pthread_mutex_unlock(&g_mu);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, uint64_t handle, unsigned long long flags) {
  CUresult r = smol_need_init(); if (r) return r;
  smol_mh *h = (smol_mh *)(uintptr_t)handle;
  pthread_mutex_lock(&g_mu);
  int ok = !flags && size && smol_handle_ok(h, SMOL_H_MEM_HANDLE) && offset <= h->size && size <= h->size - offset && resv_of(ptr, size) >= 0;
  for (size_t k = 0; ok && k < g_nmp; k++) if (g_mp[k].base < ptr + size && ptr < g_mp[k].base + g_mp[k].size) ok = 0;
  pthread_mutex_unlock(&g_mu);
  if (!ok) return CUDA_ERROR_INVALID_VALUE;
  uint64_t a[5] = { ptr, size, offset, h->id, flags };
  r = smol_call(SMOL_OP_MEM_MAP, a, 5, NULL, 0, NULL, 0, NULL, 0, NULL);
  if (r) return r;
  pthread_mutex_lock(&g_mu);
  if (!g_mp) g_mp = malloc(MAXN * sizeof *g_mp);
  if (g_nmp < MAXN) { g_mp[g_nmp++] = (smol_map){ ptr, size, h }; h->maps++; }
  pthread_mutex_unlock(&g_mu);
  return CUDA_SUCCESS;
}

/* Whole mappings only; what they held stops being device memory here at once. */
EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  CUresult r = smol_need_init(); if (r) return r;
  pthread_mutex_lock(&g_mu); int ok = whole_maps(ptr, size); pthread_mutex_unlock(&g_mu);
  if (!ok) return CUDA_ERROR_INVALID_VALUE;
  uint64_t a[2] = { ptr, size };
  r = smol_call(SMOL_OP_MEM_UNMAP, a, 2, NULL, 0, NULL, 0, NULL, 0, NULL);
  if (r) return r;
  pthread_mutex_lock(&g_mu);
  for (size_t k = 0; k < g_nmp;) {
    if (!in_range(g_mp[k].base, ptr, size)) { k++; continue; }
    smol_mh *h = g_mp[k].h;
    smol_untrack_range(g_mp[k].base);
    g_mp[k] = g_mp[--g_nmp];
    h->maps--; settle(h);
  }
  pthread_mutex_unlock(&g_mu);
  return CUDA_SUCCESS;
}

EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const smol_access *desc, size_t count) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!desc || !count) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; i++) {
    if (desc[i].loc.type != LOC_DEVICE) return CUDA_ERROR_INVALID_VALUE;
    if (!dev_ok(desc[i].loc.id)) return CUDA_ERROR_INVALID_DEVICE;
    if (desc[i].flags != 0 && desc[i].flags != 1 && desc[i].flags != 3) return CUDA_ERROR_INVALID_VALUE;
  }
  pthread_mutex_lock(&g_mu); int ok = whole_maps(ptr, size); pthread_mutex_unlock(&g_mu);
  if (!ok) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count && !r; i++) {
    uint64_t a[5] = { ptr, size, (uint64_t)desc[i].loc.type, (uint64_t)desc[i].loc.id, desc[i].flags };
    r = smol_call(SMOL_OP_MEM_SET_ACCESS, a, 5, NULL, 0, NULL, 0, NULL, 0, NULL);
  }
  if (r) return r;
  unsigned prot = desc[count - 1].flags;
  pthread_mutex_lock(&g_mu);
  for (size_t k = 0; k < g_nmp; k++) {
    if (!in_range(g_mp[k].base, ptr, size)) continue;
    if (prot) smol_track_alloc(g_mp[k].base, g_mp[k].size, SMOL_ALLOC_MAPPED); else smol_untrack_range(g_mp[k].base);
  }
  pthread_mutex_unlock(&g_mu);
  return CUDA_SUCCESS;
}
EXPORT CUresult cuMemGetAccess(unsigned long long *flags, const smol_loc *loc, CUdeviceptr ptr) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!flags || !loc || loc->type != LOC_DEVICE) return CUDA_ERROR_INVALID_VALUE;
  if (!dev_ok(loc->id)) return CUDA_ERROR_INVALID_DEVICE;
  pthread_mutex_lock(&g_mu); long i = map_at(ptr); pthread_mutex_unlock(&g_mu);
  if (i < 0) return CUDA_ERROR_INVALID_VALUE;
  uint64_t a[3] = { (uint64_t)loc->type, (uint64_t)loc->id, ptr }, o = 0;
  r = smol_call(SMOL_OP_MEM_GET_ACCESS, a, 3, NULL, 0, &o, 1, NULL, 0, NULL);
  if (!r) *flags = o;
  return r;
}

/* Answered here: the shim made every mapping. The same handle value comes back, one more reference. */
EXPORT CUresult cuMemRetainAllocationHandle(uint64_t *handle, void *addr) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&g_mu);
  long i = map_at((CUdeviceptr)(uintptr_t)addr);
  if (i >= 0) {
    smol_mh *h = g_mp[i].h;
    if (h->refs++ == 0) smol_handle_add(h, SMOL_H_MEM_HANDLE);
    *handle = (uint64_t)(uintptr_t)h;
  }
  pthread_mutex_unlock(&g_mu);
  return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
EXPORT CUresult cuMemGetAllocationPropertiesFromHandle(smol_alloc_prop *prop, uint64_t handle) {
  CUresult r = smol_need_init(); if (r) return r;
  smol_mh *h = (smol_mh *)(uintptr_t)handle;
  if (!prop || !smol_handle_ok(h, SMOL_H_MEM_HANDLE)) return CUDA_ERROR_INVALID_VALUE;
  *prop = h->prop; return CUDA_SUCCESS;
}

EXPORT CUresult cuMemExportToShareableHandle(void *out, uint64_t handle, int type, unsigned long long flags) {
  CUresult r = smol_need_init(); if (r) return r;
  (void)type; (void)flags;
  if (!out || !smol_handle_ok((void *)(uintptr_t)handle, SMOL_H_MEM_HANDLE)) return CUDA_ERROR_INVALID_VALUE;
  return smol_unsupported("cuMemExportToShareableHandle (a host handle cannot cross into a guest)");
}
EXPORT CUresult cuMemImportFromShareableHandle(uint64_t *handle, void *os, int type) {
  CUresult r = smol_need_init(); if (r) return r;
  (void)os; (void)type;
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  return smol_unsupported("cuMemImportFromShareableHandle (a host handle cannot cross into a guest)");
}
