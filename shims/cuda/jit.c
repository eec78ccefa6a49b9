/* JIT options, cuModuleLoadDataEx and the cuLink* family. Options cross as (u64 option, u64 value)
 * pairs; those whose value points into this process (symbol tables, name lists) cannot, and fail at
 * once with CUDA_ERROR_NOT_SUPPORTED naming the option. The host compiles and links with its own log
 * buffers; every reply brings the option values as the driver left them and the log text, which land in
 * the caller's values and buffers (bounded by the sizes it gave). A link state lives on the host; the
 * linked image comes back here and stays valid until cuLinkDestroy, as the driver's does. */
#include "shim.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { JIT_THREADS = 1, JIT_WALL_TIME = 2, JIT_INFO = 3, JIT_INFO_SIZE = 4, JIT_ERR = 5, JIT_ERR_SIZE = 6,
       JIT_NUM_OPTIONS = 35, JIT_MAX_OPTS = 64, JIT_MAX_LOG = 64 * 1024, INPUT_TYPES = 6 };
enum { CUDA_ERROR_FILE_NOT_FOUND = 301 };
#define LINK_MAGIC 0x4c494e4bu

const unsigned char *smol_image_extent(const void *image, size_t *n); /* exec.c */

/* Options whose value is a scalar (or a log buffer, which the host replaces with its own). */
static int carried(int o) { return (o >= 0 && o <= 16 && o != 15) || (o >= 21 && o <= 24) || (o >= 29 && o < JIT_NUM_OPTIONS); }

static CUresult jit_encode(const char *fn, unsigned n, const int *opts, void *const *vals, int logs, unsigned char *out) {
  if (n && (!opts || !vals)) return CUDA_ERROR_INVALID_VALUE;
  if (n > JIT_MAX_OPTS) { smol_log("%s: %u JIT options; the remoting carries at most %d", fn, n, JIT_MAX_OPTS); return CUDA_ERROR_NOT_SUPPORTED; }
  for (unsigned i = 0; i < n; i++) {
    if (opts[i] < 0 || opts[i] >= JIT_NUM_OPTIONS) return CUDA_ERROR_INVALID_VALUE;
    if (!carried(opts[i]) || (!logs && opts[i] >= JIT_THREADS && opts[i] <= JIT_ERR_SIZE)) {
      smol_log("%s: JIT option %d is not supported by the remoting (its value points into this process)", fn, opts[i]);
      return CUDA_ERROR_NOT_SUPPORTED;
    }
    uint64_t o = (uint32_t)opts[i], v = (uint64_t)(uintptr_t)vals[i];
    memcpy(out + 16 * i, &o, 8); memcpy(out + 16 * i + 8, &v, 8);
  }
  return CUDA_SUCCESS;
}

/* Writes a reply's option values and logs into the caller's: outputs (threads, wall time, bytes of log
 * filled) take the driver's values, logs are cut to the buffer the caller sized and NUL-terminated. */
static void jit_apply(unsigned n, const int *opts, void **vals, const unsigned char *rep, size_t got, uint64_t il, uint64_t el) {
  if (got < (size_t)n * 8 + il + el) return;
  size_t info_cap = 0, err_cap = 0;
  for (unsigned i = 0; i < n; i++) {
    if (opts[i] == JIT_INFO_SIZE) info_cap = (unsigned)(uintptr_t)vals[i];
    if (opts[i] == JIT_ERR_SIZE) err_cap = (unsigned)(uintptr_t)vals[i];
  }
  const unsigned char *info = rep + (size_t)n * 8, *err = info + il;
  for (unsigned i = 0; i < n; i++) {
    uint64_t v; memcpy(&v, rep + 8 * i, 8);
    switch (opts[i]) {
      case JIT_THREADS: case JIT_WALL_TIME: case JIT_INFO_SIZE: case JIT_ERR_SIZE: vals[i] = (void *)(uintptr_t)v; break;
      case JIT_INFO: case JIT_ERR: {
        char *buf = vals[i]; size_t cap = opts[i] == JIT_INFO ? info_cap : err_cap, len = opts[i] == JIT_INFO ? il : el;
        if (!buf || !cap) break;
        if (len > cap - 1) len = cap - 1;
        memcpy(buf, opts[i] == JIT_INFO ? info : err, len); buf[len] = 0;
        break;
      }
      default: break;
    }
  }
}

/* Room for a reply's option values and two logs (the host cuts each log at JIT_MAX_LOG). */
#define JIT_REPLY_CAP (JIT_MAX_OPTS * 8 + 2 * JIT_MAX_LOG)

EXPORT CUresult cuModuleLoadDataEx(smol_module **out, const void *image, unsigned n, int *opts, void **vals) {
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!out || !image) return CUDA_ERROR_INVALID_VALUE;
  unsigned char enc[JIT_MAX_OPTS * 16];
  r = jit_encode("cuModuleLoadDataEx", n, opts, vals, 1, enc); if (r) return r;
  size_t len; const unsigned char *p = smol_image_extent(image, &len);
  if (len > SMOL_MAX_PAYLOAD - 64 - (size_t)n * 16) { smol_log("module image of %zu bytes exceeds the %u-byte frame limit", len, SMOL_MAX_PAYLOAD); return CUDA_ERROR_NOT_SUPPORTED; }
  unsigned char *blob = malloc((size_t)n * 16 + len);
  if (!blob) return CUDA_ERROR_OUT_OF_MEMORY;
  memcpy(blob, enc, (size_t)n * 16); memcpy(blob + (size_t)n * 16, p, len);
  smol_module *m = aligned_alloc(16, (sizeof *m + 15) & ~(size_t)15);
  unsigned char *rep = malloc(JIT_REPLY_CAP);
  memset(m, 0, sizeof *m);
  m->magic = SMOL_MAGIC_OBJ; m->id = smol_mint(SMOL_KIND_MODULE);
  uint64_t a[2] = { m->id, n }, o[2] = { 0, 0 }; size_t got = 0;
  r = smol_call(SMOL_OP_MODULE_LOAD_DATA_EX, a, 2, blob, (size_t)n * 16 + len, o, 2, rep, JIT_REPLY_CAP, &got);
  free(blob);
  if (r != CUDA_ERROR_UNKNOWN) jit_apply(n, opts, vals, rep, got, o[0], o[1]);
  free(rep);
  if (r) { free(m); return r; }
  smol_handle_add(m, SMOL_H_MODULE);
  *out = m; return CUDA_SUCCESS;
}

/* Link states this process holds: few and short-lived, so a list under a lock. */
typedef struct smol_link {
  uint32_t magic; uint64_t id; unsigned n; int opts[JIT_MAX_OPTS]; void **vals; /* the caller's, kept as the driver keeps them */
  unsigned char *cubin; struct smol_link *next;
} smol_link;
static smol_link *g_links;
static pthread_mutex_t g_link_mu = PTHREAD_MUTEX_INITIALIZER;
static int link_ok(smol_link *l) {
  int ok = 0;
  pthread_mutex_lock(&g_link_mu);
  for (smol_link *x = g_links; x; x = x->next) if (x == l) { ok = 1; break; }
  pthread_mutex_unlock(&g_link_mu);
  return ok;
}

static CUresult link_create(unsigned n, int *opts, void **vals, smol_link **out) {
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  unsigned char enc[JIT_MAX_OPTS * 16];
  r = jit_encode("cuLinkCreate", n, opts, vals, 1, enc); if (r) return r;
  smol_link *l = calloc(1, sizeof *l);
  unsigned char *rep = malloc(JIT_REPLY_CAP);
  l->magic = LINK_MAGIC; l->id = smol_mint(SMOL_KIND_MODULE); l->n = n; l->vals = vals;
  if (n) memcpy(l->opts, opts, n * sizeof *opts);
  uint64_t a[2] = { l->id, n }, o[2] = { 0, 0 }; size_t got = 0;
  r = smol_call(SMOL_OP_LINK_CREATE, a, 2, enc, (size_t)n * 16, o, 2, rep, JIT_REPLY_CAP, &got);
  if (r != CUDA_ERROR_UNKNOWN) jit_apply(n, opts, vals, rep, got, o[0], o[1]);
  free(rep);
  if (r) { free(l); return r; }
  pthread_mutex_lock(&g_link_mu); l->next = g_links; g_links = l; pthread_mutex_unlock(&g_link_mu);
  *out = l; return CUDA_SUCCESS;
}
EXPORT CUresult cuLinkCreate_v2(unsigned n, int *opts, void **vals, smol_link **out) { return link_create(n, opts, vals, out); }
EXPORT CUresult cuLinkCreate(unsigned n, int *opts, void **vals, smol_link **out) { return link_create(n, opts, vals, out); }

static CUresult link_add(smol_link *l, int type, const void *data, size_t size, const char *name, unsigned n, int *opts, void **vals) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!link_ok(l)) return CUDA_ERROR_INVALID_HANDLE;
  if (!data || !size || type < 0 || type >= INPUT_TYPES) return CUDA_ERROR_INVALID_VALUE;
  unsigned char enc[JIT_MAX_OPTS * 16];
  r = jit_encode("cuLinkAddData", n, opts, vals, 0, enc); if (r) return r;
  size_t nl = name ? strlen(name) : 0;
  if (size + nl > SMOL_MAX_PAYLOAD - 64 - (size_t)n * 16) { smol_log("cuLinkAddData: an input of %zu bytes exceeds the %u-byte frame limit", size, SMOL_MAX_PAYLOAD); return CUDA_ERROR_NOT_SUPPORTED; }
  unsigned char *blob = malloc((size_t)n * 16 + nl + size);
  if (!blob) return CUDA_ERROR_OUT_OF_MEMORY;
  memcpy(blob, enc, (size_t)n * 16);
  memcpy(blob + (size_t)n * 16, name ? name : "", nl);
  memcpy(blob + (size_t)n * 16 + nl, data, size);
  unsigned char *rep = malloc(JIT_REPLY_CAP);
  uint64_t a[4] = { l->id, (uint64_t)type, n, nl }, o[2] = { 0, 0 }; size_t got = 0;
  r = smol_call(SMOL_OP_LINK_ADD_DATA, a, 4, blob, (size_t)n * 16 + nl + size, o, 2, rep, JIT_REPLY_CAP, &got);
  if (r != CUDA_ERROR_UNKNOWN) jit_apply(l->n, l->opts, l->vals, rep, got, o[0], o[1]);
  free(rep); free(blob);
  return r;
}
EXPORT CUresult cuLinkAddData_v2(smol_link *l, int type, void *data, size_t size, const char *name, unsigned n, int *opts, void **vals) { return link_add(l, type, data, size, name, n, opts, vals); }
EXPORT CUresult cuLinkAddData(smol_link *l, int type, void *data, size_t size, const char *name, unsigned n, int *opts, void **vals) { return link_add(l, type, data, size, name, n, opts, vals); }
/* The path names a file in this machine: its bytes go to the host under that name. */
static CUresult link_file(smol_link *l, int type, const char *path, unsigned n, int *opts, void **vals) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!link_ok(l)) return CUDA_ERROR_INVALID_HANDLE;
  if (!path) return CUDA_ERROR_INVALID_VALUE;
  FILE *f = fopen(path, "rb");
  if (!f) return CUDA_ERROR_FILE_NOT_FOUND;
  fseek(f, 0, SEEK_END); long sz = ftell(f); fseek(f, 0, SEEK_SET);
  if (sz < 0 || (unsigned long)sz > SMOL_MAX_PAYLOAD) { fclose(f); smol_log("cuLinkAddFile: %s exceeds the %u-byte frame limit", path, SMOL_MAX_PAYLOAD); return CUDA_ERROR_NOT_SUPPORTED; }
  char *buf = calloc(1, (size_t)sz + 1);
  size_t got = fread(buf, 1, (size_t)sz, f); fclose(f);
  r = got == (size_t)sz ? link_add(l, type, buf, got, path, n, opts, vals) : CUDA_ERROR_FILE_NOT_FOUND;
  free(buf); return r;
}
EXPORT CUresult cuLinkAddFile_v2(smol_link *l, int type, const char *path, unsigned n, int *opts, void **vals) { return link_file(l, type, path, n, opts, vals); }
EXPORT CUresult cuLinkAddFile(smol_link *l, int type, const char *path, unsigned n, int *opts, void **vals) { return link_file(l, type, path, n, opts, vals); }

EXPORT CUresult cuLinkComplete(smol_link *l, void **cubin, size_t *size) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!link_ok(l)) return CUDA_ERROR_INVALID_HANDLE;
  if (!cubin || !size) return CUDA_ERROR_INVALID_VALUE;
  unsigned char *rep = malloc(SMOL_MAX_PAYLOAD);
  if (!rep) return CUDA_ERROR_OUT_OF_MEMORY;
  uint64_t o[3] = { 0, 0, 0 }; size_t got = 0;
  r = smol_call(SMOL_OP_LINK_COMPLETE, &l->id, 1, NULL, 0, o, 3, rep, SMOL_MAX_PAYLOAD, &got);
  if (r != CUDA_ERROR_UNKNOWN) jit_apply(l->n, l->opts, l->vals, rep, got, o[0], o[1]);
  size_t at = (size_t)l->n * 8 + o[0] + o[1];
  if (!r && (at > got || o[2] != got - at)) r = CUDA_ERROR_UNKNOWN; /* a reply that is not what the host said */
  if (r) { free(rep); return r; }
  memmove(rep, rep + at, o[2]);
  free(l->cubin);
  l->cubin = realloc(rep, o[2] ? o[2] : 1);
  *cubin = l->cubin; *size = o[2];
  return CUDA_SUCCESS;
}
EXPORT CUresult cuLinkDestroy(smol_link *l) {
  CUresult r = smol_need_init(); if (r) return r;
  int found = 0;
  pthread_mutex_lock(&g_link_mu);
  for (smol_link **p = &g_links; *p; p = &(*p)->next) if (*p == l) { *p = l->next; found = 1; break; }
  pthread_mutex_unlock(&g_link_mu);
  if (!found) return CUDA_ERROR_INVALID_HANDLE;
  uint64_t id = l->id;
  free(l->cubin); l->magic = 0; free(l);
  return smol_fire(SMOL_OP_LINK_DESTROY, &id, 1, NULL, 0);
}
