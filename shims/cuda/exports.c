/* cuGetProcAddress (v1/v2 ABIs, versioned names) and the private export tables libcudart asks for
 * through cuGetExportTable (DESIGN.md §5b). */
#include "shim.h"
#include "integrity.h"
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { PROC_OK = 0, PROC_SYMBOL_NOT_FOUND = 1, PROC_VERSION_NOT_SUFFICIENT = 2 };

EXPORT CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int version, uint64_t flags, int *status) {
  (void)flags; /* per-thread-stream (_ptds/_ptsz) requests get the default-stream forms */
  if (!sym || !pfn) return CUDA_ERROR_INVALID_VALUE;
  *pfn = NULL;
  unsigned lo = 0, hi = smol_proc_count;
  while (lo < hi) { unsigned mid = (lo + hi) / 2; if (strcmp(smol_proc_table[mid].name, sym) < 0) lo = mid + 1; else hi = mid; }
  const smol_proc_entry *best = NULL;
  int any = 0;
  for (unsigned i = lo; i < smol_proc_count && !strcmp(smol_proc_table[i].name, sym); i++) {
    any = 1;
    if (smol_proc_table[i].version <= version) best = &smol_proc_table[i];
  }
  if (!best) {
    if (status) *status = any ? PROC_VERSION_NOT_SUFFICIENT : PROC_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
  }
  *pfn = best->fn;
  if (status) *status = PROC_OK;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuGetProcAddress(const char *sym, void **pfn, int version, uint64_t flags) { return cuGetProcAddress_v2(sym, pfn, version, flags, NULL); }

/* --- export tables --- */
static CUresult dark_unknown(void) { if (getenv("SMOL_CUDA_LOG")) smol_log("unknown export-table slot called"); return CUDA_ERROR_NOT_SUPPORTED; }
static void dark_noop(void) {}

static CUresult get_primary_context(smol_ctx **out, CUdevice dev) {
  CUresult r = smol_connect(); if (r) return r;
  if (dev < 0 || dev >= smol_device_count) return CUDA_ERROR_INVALID_DEVICE;
  *out = smol_primary(dev); return CUDA_SUCCESS;
}
static void *g_hooks2[1024];
static unsigned char g_hooks6[14];
static void hooks_fn2(void **buf, size_t *size) { *buf = g_hooks2; *size = 1024; }
static void hooks_fn6(void **buf, size_t *size) { *buf = g_hooks6; *size = sizeof g_hooks6; }
static void *tls_current(void) { return smol_current(); }

/* context-local storage: cudart keeps its per-context state here; it is local to the guest */
typedef struct { void *ctx, *key, *val; void (*dtor)(void *, void *, void *); } cls_entry;
static cls_entry g_cls[256]; static int g_ncls;
static pthread_mutex_t g_cls_mu = PTHREAD_MUTEX_INITIALIZER;
static CUresult cls_put(void *ctx, void *key, void *val, void (*dtor)(void *, void *, void *)) {
  if (!ctx) ctx = smol_current();
  if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  pthread_mutex_lock(&g_cls_mu);
  int i = 0;
  while (i < g_ncls && !(g_cls[i].ctx == ctx && g_cls[i].key == key)) i++;
  if (i == g_ncls) { if (g_ncls == 256) { pthread_mutex_unlock(&g_cls_mu); return CUDA_ERROR_OUT_OF_MEMORY; } g_ncls++; }
  g_cls[i] = (cls_entry){ ctx, key, val, dtor };
  pthread_mutex_unlock(&g_cls_mu);
  return CUDA_SUCCESS;
}
static CUresult cls_delete(void *ctx, void *key) {
  if (!ctx) ctx = smol_current();
  pthread_mutex_lock(&g_cls_mu);
  for (int i = 0; i < g_ncls; i++) if (g_cls[i].ctx == ctx && g_cls[i].key == key) { g_cls[i] = g_cls[--g_ncls]; break; }
  pthread_mutex_unlock(&g_cls_mu);
  return CUDA_SUCCESS;
}
static CUresult cls_get(void **out, void *ctx, void *key) {
  if (!ctx) ctx = smol_current();
  if (!ctx) return CUDA_ERROR_INVALID_CONTEXT;
  CUresult r = CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&g_cls_mu);
  for (int i = 0; i < g_ncls; i++) if (g_cls[i].ctx == ctx && g_cls[i].key == key) { *out = g_cls[i].val; r = CUDA_SUCCESS; break; }
  pthread_mutex_unlock(&g_cls_mu);
  return r;
}
static CUresult ctx_is_wrapped(void *ctx, unsigned *wrapped, void **unwrapped) { (void)ctx; (void)unwrapped; *wrapped = 0; return CUDA_SUCCESS; }
static CUresult ctx_check_zero(void) { return CUDA_SUCCESS; }

static CUresult integrity_check(unsigned version, uint64_t seconds, uint64_t out[2]);

#define SZ(n) ((void *)(uintptr_t)((n) * sizeof(void *)))
#define U (void *)dark_unknown
static void *const CUDART_INTERFACE[10] = { SZ(10), U, (void *)get_primary_context, U, U, U, U, (void *)dark_noop, U, U };
static void *const TOOLS_HOOKS[7] = { SZ(7), U, (void *)hooks_fn2, U, U, U, (void *)hooks_fn6 };
static void *const TOOLS_TLS[3] = { SZ(3), U, (void *)tls_current };
static void *const CONTEXT_STORAGE[4] = { (void *)cls_put, (void *)cls_delete, (void *)cls_get, NULL };
static void *const CONTEXT_CHECKS[4] = { SZ(4), U, (void *)ctx_is_wrapped, (void *)ctx_check_zero };
static void *const INTEGRITY[3] = { SZ(3), (void *)integrity_check, NULL };

static const struct { unsigned char id[16]; const void *table; } TABLES[] = {
  { { 0x6b, 0xd5, 0xfb, 0x6c, 0x5b, 0xf4, 0xe7, 0x4a, 0x89, 0x87, 0xd9, 0x39, 0x12, 0xfd, 0x9d, 0xf9 }, CUDART_INTERFACE },
  { { 0xa0, 0x94, 0x79, 0x8c, 0x2e, 0x74, 0x2e, 0x74, 0x93, 0xf2, 0x08, 0x00, 0x20, 0x0c, 0x0a, 0x66 }, TOOLS_HOOKS },
  { { 0x42, 0xd8, 0x5a, 0x81, 0x23, 0xf6, 0xcb, 0x47, 0x82, 0x98, 0xf6, 0xe7, 0x8a, 0x3a, 0xec, 0xdc }, TOOLS_TLS },
  { { 0xc6, 0x93, 0x33, 0x6e, 0x11, 0x21, 0xdf, 0x11, 0xa8, 0xc3, 0x68, 0xf3, 0x55, 0xd8, 0x95, 0x93 }, CONTEXT_STORAGE },
  { { 0x26, 0x3e, 0x88, 0x60, 0x7c, 0xd2, 0x61, 0x43, 0x92, 0xf6, 0xbb, 0xd5, 0x00, 0x6d, 0xfa, 0x7e }, CONTEXT_CHECKS },
  { { 0xd4, 0x08, 0x20, 0x55, 0xbd, 0xe6, 0x70, 0x4b, 0x8d, 0x34, 0xba, 0x12, 0x3c, 0x66, 0xe1, 0xf2 }, INTEGRITY },
};

EXPORT CUresult cuGetExportTable(const void **out, const unsigned char *id) {
  if (!out || !id) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof TABLES / sizeof TABLES[0]; i++)
    if (!memcmp(TABLES[i].id, id, 16)) { *out = TABLES[i].table; return CUDA_SUCCESS; }
  if (getenv("SMOL_CUDA_LOG")) {
    char hex[33]; for (int i = 0; i < 16; i++) { static const char *h = "0123456789abcdef"; hex[2 * i] = h[id[i] >> 4]; hex[2 * i + 1] = h[id[i] & 15]; }
    hex[32] = 0; smol_log("export table %s not provided", hex);
  }
  *out = NULL;
  return CUDA_ERROR_NOT_FOUND;
}

static CUresult integrity_check(unsigned version, uint64_t seconds, uint64_t out[2]) {
  CUresult r = smol_connect(); if (r) return r;
  smol_integrity_device devs[SMOL_MAX_DEVICES];
  for (int d = 0; d < smol_device_count; d++) {
    memcpy(devs[d].uuid, smol_devices[d].uuid, 16);
    devs[d].pci_domain = (uint32_t)smol_devices[d].attrs[50 - 1];
    devs[d].pci_bus = (uint32_t)smol_devices[d].attrs[33 - 1];
    devs[d].pci_device = (uint32_t)smol_devices[d].attrs[34 - 1];
  }
  smol_integrity_input in = {
    (uint32_t)smol_driver_version, version, (uint32_t)getpid(), (uint32_t)(uintptr_t)pthread_self(),
    (uint64_t)(uintptr_t)CUDART_INTERFACE, (uint64_t)(uintptr_t)INTEGRITY, (uint64_t)(uintptr_t)integrity_check, seconds,
    (unsigned)smol_device_count, devs,
  };
  smol_integrity_hash(&in, (uint8_t *)out);
  return CUDA_SUCCESS;
}
