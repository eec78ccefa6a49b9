/* Modules, libraries, kernels, launches, streams and events. Streams and events get guest-minted ids,
 * so creating one costs no round trip; kernel parameter layouts come from the host (its driver's param
 * info, or the module image when the driver has none). */
#include "shim.h"
#include "capture.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* NULL, CU_STREAM_LEGACY (1) and CU_STREAM_PER_THREAD (2) are always valid; any other stream must be
 * one this process created and has not destroyed. */
CUresult smol_stream_arg(void *s, uint64_t *id) {
  if ((uintptr_t)s <= 2) { *id = (uint64_t)(uintptr_t)s; return CUDA_SUCCESS; }
  if (!smol_handle_ok(s, SMOL_H_STREAM)) return CUDA_ERROR_INVALID_HANDLE;
  *id = ((smol_stream *)s)->id;
  return CUDA_SUCCESS;
}
static int mod_ok(smol_module *m) { return smol_handle_ok(m, SMOL_H_MODULE) || smol_handle_ok(m, SMOL_H_LIBRARY); }
static int fn_ok(smol_func *f) { return smol_handle_ok(f, SMOL_H_FUNC); }
static int ev_ok(smol_event *e) { return smol_handle_ok(e, SMOL_H_EVENT); }
static pthread_mutex_t g_fn_mu = PTHREAD_MUTEX_INITIALIZER; /* modules' function lists */
static void *obj_alloc(size_t n) { void *p = aligned_alloc(16, (n + 15) & ~(size_t)15); memset(p, 0, n); return p; }

/* Bytes of a fatbin, fatbin wrapper, cubin (ELF) or PTX image; the wrapper is unwrapped because its
 * pointer means nothing on the host. */
const unsigned char *smol_image_extent(const void *image, size_t *n) { /* also jit.c's */
  const unsigned char *p = image;
  uint32_t magic; memcpy(&magic, p, 4);
  if (magic == 0x466243b1u) { memcpy(&p, p + 8, sizeof p); memcpy(&magic, p, 4); }
  if (magic == 0xBA55ED50u) { uint16_t hs; uint64_t fs; memcpy(&hs, p + 6, 2); memcpy(&fs, p + 8, 8); *n = hs + fs; }
  else if (!memcmp(p, "\x7f" "ELF", 4)) {
    uint64_t shoff; uint16_t es, num; memcpy(&shoff, p + 0x28, 8); memcpy(&es, p + 0x3a, 2); memcpy(&num, p + 0x3c, 2);
    *n = shoff + (size_t)es * num;
  } else *n = strlen((const char *)p) + 1;
  return p;
}

/* Modules belong to the current context; libraries (CUDA 12+) to none. */
static CUresult load(smol_module **out, const void *image, int lib) {
  CUresult r = lib ? smol_need_init() : smol_need_ctx(); if (r) return r;
  if (!out || !image) return CUDA_ERROR_INVALID_VALUE;
  size_t n; const unsigned char *p = smol_image_extent(image, &n);
  if (n > SMOL_MAX_PAYLOAD - 64) { smol_log("module image of %zu bytes exceeds the %u-byte frame limit", n, SMOL_MAX_PAYLOAD); return CUDA_ERROR_NOT_SUPPORTED; }
  smol_module *m = obj_alloc(sizeof *m);
  m->magic = SMOL_MAGIC_OBJ; m->lib = lib; m->id = smol_mint(lib ? SMOL_KIND_LIBRARY : SMOL_KIND_MODULE);
  r = smol_call(lib ? SMOL_OP_LIBRARY_LOAD_DATA : SMOL_OP_MODULE_LOAD_DATA, &m->id, 1, p, n, NULL, 0, NULL, 0, NULL);
  if (r) { free(m); return r; }
  smol_handle_add(m, lib ? SMOL_H_LIBRARY : SMOL_H_MODULE);
  *out = m; return CUDA_SUCCESS;
}
EXPORT CUresult cuModuleLoadData(smol_module **m, const void *image) { return load(m, image, 0); }
EXPORT CUresult cuModuleLoadFatBinary(smol_module **m, const void *image) { return load(m, image, 0); }
static CUresult load_file(smol_module **m, const char *path, int lib) {
  CUresult r0 = lib ? smol_need_init() : smol_need_ctx(); if (r0) return r0;
  if (!m || !path) return CUDA_ERROR_INVALID_VALUE;
  FILE *f = fopen(path, "rb");
  if (!f) return 301; /* CUDA_ERROR_FILE_NOT_FOUND, as cuModuleLoad documents */
  fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 0, SEEK_SET);
  char *buf = calloc(1, (size_t)n + 1);
  size_t got = fread(buf, 1, (size_t)n, f); fclose(f);
  CUresult r = got == (size_t)n ? load(m, buf, lib) : CUDA_ERROR_INVALID_IMAGE;
  free(buf); return r;
}
EXPORT CUresult cuModuleLoad(smol_module **m, const char *path) { return load_file(m, path, 0); }
EXPORT CUresult cuLibraryLoadData(smol_module **l, const void *code, void *jo, void **jv, unsigned nj, void *lo, void **lv, unsigned nl) {
  (void)jo; (void)jv; (void)nj; (void)lo; (void)lv; (void)nl;
  return load(l, code, 1);
}
EXPORT CUresult cuLibraryLoadFromFile(smol_module **l, const char *path, void *jo, void **jv, unsigned nj, void *lo, void **lv, unsigned nl) {
  (void)jo; (void)jv; (void)nj; (void)lo; (void)lv; (void)nl;
  return load_file(l, path, 1);
}
static CUresult unload(smol_module *m, int lib) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!smol_handle_take(m, lib ? SMOL_H_LIBRARY : SMOL_H_MODULE)) return CUDA_ERROR_INVALID_HANDLE;
  /* its functions and kernels go with it (their structs stay: a stale handle reads as invalid) */
  pthread_mutex_lock(&g_fn_mu);
  for (smol_func *f = m->funcs; f; f = f->next_in_mod) smol_handle_take(f, SMOL_H_FUNC);
  pthread_mutex_unlock(&g_fn_mu);
  uint64_t id = m->id; m->magic = 0; free(m);
  return smol_fire(lib ? SMOL_OP_LIBRARY_UNLOAD : SMOL_OP_MODULE_UNLOAD, &id, 1, NULL, 0);
}
EXPORT CUresult cuModuleUnload(smol_module *m) { return unload(m, 0); }
EXPORT CUresult cuLibraryUnload(smol_module *m) { return unload(m, 1); }
EXPORT CUresult cuModuleGetLoadingMode(int *mode) { if (!mode) return CUDA_ERROR_INVALID_VALUE; *mode = 1; /* eager */ return CUDA_SUCCESS; }

static CUresult get_fn(smol_func **out, smol_module *m, const char *name, int kernel) {
  CUresult r0 = smol_need_init(); if (r0) return r0;
  if (!mod_ok(m)) return CUDA_ERROR_INVALID_HANDLE;
  if (!out || !name) return CUDA_ERROR_INVALID_VALUE;
  static uint32_t layout[SMOL_MAX_PARAMS * 2];
  static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  smol_func *f = obj_alloc(sizeof *f);
  f->magic = SMOL_MAGIC_OBJ; f->kernel = kernel; f->mod = m; f->id = smol_mint(kernel ? SMOL_KIND_KERNEL : SMOL_KIND_FUNC);
  uint64_t a[2] = { m->id, f->id }, count = 0; size_t got = 0;
  pthread_mutex_lock(&mu);
  CUresult r = smol_call(kernel ? SMOL_OP_LIBRARY_GET_KERNEL : SMOL_OP_MODULE_GET_FUNCTION, a, 2, name, strlen(name), &count, 1, layout, sizeof layout, &got);
  if (!r) {
    f->nparams = count == 0xffffffffu ? count : (unsigned)(got / 8);
    if (f->nparams == 0xffffffffu && got) f->why = strndup((const char *)layout, got);
    if (f->nparams != 0xffffffffu) {
      f->layout = malloc(got + 8);
      memcpy(f->layout, layout, got);
      /* 64-bit sums: a daemon's offset near 4 GiB must not wrap to a small size that cuLaunchKernel trusts. */
      for (unsigned i = 0; i < f->nparams; i++) {
        uint64_t end = (uint64_t)layout[2 * i] + layout[2 * i + 1];
        if (end > f->argbytes) f->argbytes = end > UINT32_MAX ? UINT32_MAX : (unsigned)end;
      }
    }
  }
  pthread_mutex_unlock(&mu);
  if (r) { free(f); return r; }
  f->name = strdup(name);
  pthread_mutex_lock(&g_fn_mu);
  f->next_in_mod = m->funcs; m->funcs = f;
  smol_handle_add(f, SMOL_H_FUNC);
  pthread_mutex_unlock(&g_fn_mu);
  *out = f; return CUDA_SUCCESS;
}
EXPORT CUresult cuModuleGetFunction(smol_func **f, smol_module *m, const char *name) { return get_fn(f, m, name, 0); }
EXPORT CUresult cuLibraryGetKernel(smol_func **k, smol_module *l, const char *name) { return get_fn(k, l, name, 1); }
/* A CUkernel is usable wherever a CUfunction is (cudart launches kernels directly). */
EXPORT CUresult cuKernelGetFunction(smol_func **f, smol_func *k) { if (!fn_ok(k)) return CUDA_ERROR_INVALID_HANDLE; if (!f) return CUDA_ERROR_INVALID_VALUE; *f = k; return CUDA_SUCCESS; }
EXPORT CUresult cuFuncGetModule(smol_module **m, smol_func *f) { if (!fn_ok(f)) return CUDA_ERROR_INVALID_HANDLE; if (!m) return CUDA_ERROR_INVALID_VALUE; *m = f->mod; return CUDA_SUCCESS; }
EXPORT CUresult cuFuncGetName(const char **name, smol_func *f) { if (!fn_ok(f)) return CUDA_ERROR_INVALID_HANDLE; if (!name) return CUDA_ERROR_INVALID_VALUE; *name = f->name; return CUDA_SUCCESS; }
EXPORT CUresult cuKernelGetName(const char **name, smol_func *f) { return cuFuncGetName(name, f); }
EXPORT CUresult cuFuncIsLoaded(int *state, smol_func *f) { if (!fn_ok(f)) return CUDA_ERROR_INVALID_HANDLE; if (!state) return CUDA_ERROR_INVALID_VALUE; *state = 1; return CUDA_SUCCESS; }
EXPORT CUresult cuFuncLoad(smol_func *f) { if (!fn_ok(f)) return CUDA_ERROR_INVALID_HANDLE; return CUDA_SUCCESS; }
EXPORT CUresult cuFuncGetParamInfo(smol_func *f, size_t i, size_t *off, size_t *size) {
  if (!fn_ok(f)) return CUDA_ERROR_INVALID_HANDLE;
  if (f->nparams == 0xffffffffu) return CUDA_ERROR_NOT_SUPPORTED;
  if (i >= f->nparams) return CUDA_ERROR_INVALID_VALUE;
  if (off) *off = f->layout[2 * i];
  if (size) *size = f->layout[2 * i + 1];
  return CUDA_SUCCESS;
}
EXPORT CUresult cuKernelGetParamInfo(smol_func *k, size_t i, size_t *off, size_t *size) { return cuFuncGetParamInfo(k, i, off, size); }
EXPORT CUresult cuModuleGetGlobal_v2(CUdeviceptr *d, size_t *n, smol_module *m, const char *name) {
  CUresult r0 = smol_need_init(); if (r0) return r0;
  if (!mod_ok(m)) return CUDA_ERROR_INVALID_HANDLE;
  if (!name) return CUDA_ERROR_INVALID_VALUE;
  uint64_t o[2];
  CUresult r = smol_call(m->lib ? SMOL_OP_LIBRARY_GET_GLOBAL : SMOL_OP_MODULE_GET_GLOBAL, &m->id, 1, name, strlen(name), o, 2, NULL, 0, NULL);
  if (!r) { if (d) *d = o[0]; if (n) *n = o[1]; smol_track_alloc(o[0], o[1], 0); }
  return r;
}
EXPORT CUresult cuLibraryGetGlobal(CUdeviceptr *d, size_t *n, smol_module *l, const char *name) { return cuModuleGetGlobal_v2(d, n, l, name); }

static CUresult fn_id(smol_func *f, uint64_t *id) { if (!fn_ok(f)) return CUDA_ERROR_INVALID_HANDLE; *id = f->id; return CUDA_SUCCESS; }
/* CUfunction_attribute: 0..15 exist; only these can be set (the others are properties of the code). */
enum { FA_MAX_DYNAMIC_SHARED = 8, FA_CARVEOUT = 9, FA_CLUSTER_WIDTH = 11, FUNC_ATTRIBUTE_MAX = 16 };
static CUresult settable(int attr, int v) {
  if (attr == FA_MAX_DYNAMIC_SHARED) {
    smol_ctx *c = smol_current();
    int optin = c ? smol_devices[c->dev].attrs[97 - 1] : 0; /* CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
    return v < 0 || (optin > 0 && v > optin) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
  }
  if (attr == FA_CARVEOUT) return v < -1 || v > 100 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
  return attr >= FA_CLUSTER_WIDTH && attr < FUNC_ATTRIBUTE_MAX ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
EXPORT CUresult cuFuncGetAttribute(int *v, int attr, smol_func *f) {
  uint64_t a[2] = { 0, (uint64_t)attr }, o = 0;
  CUresult r = fn_id(f, &a[0]); if (r) return r;
  if (!v || attr < 0 || attr >= FUNC_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
  r = smol_call(SMOL_OP_FUNC_GET_ATTRIBUTE, a, 2, NULL, 0, &o, 1, NULL, 0, NULL);
  if (!r) *v = (int)(int32_t)o;
  return r;
}
/* A CUkernel's attributes are per device: one this process cannot see is INVALID_DEVICE. */
static CUresult kernel_dev(smol_func *k, CUdevice d) {
  if (!fn_ok(k)) return CUDA_ERROR_INVALID_HANDLE;
  return d < 0 || d >= smol_device_count ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS;
}
EXPORT CUresult cuKernelGetAttribute(int *v, int attr, smol_func *k, CUdevice d) { CUresult r = kernel_dev(k, d); return r ? r : cuFuncGetAttribute(v, attr, k); }
EXPORT CUresult cuFuncSetAttribute(smol_func *f, int attr, int v) {
  uint64_t a[3] = { 0, (uint64_t)attr, (uint32_t)v };
  CUresult r = fn_id(f, &a[0]); if (!r) r = settable(attr, v); if (r) return r;
  return smol_fire(SMOL_OP_FUNC_SET_ATTRIBUTE, a, 3, NULL, 0);
}
EXPORT CUresult cuKernelSetAttribute(int attr, int v, smol_func *k, CUdevice d) { CUresult r = kernel_dev(k, d); return r ? r : cuFuncSetAttribute(k, attr, v); }
EXPORT CUresult cuFuncSetCacheConfig(smol_func *f, int c) {
  uint64_t a[2] = { 0, (uint64_t)c };
  CUresult r = fn_id(f, &a[0]); if (r) return r;
  if (c < 0 || c > 3) return CUDA_ERROR_INVALID_VALUE; /* CUfunc_cache: PREFER_NONE .. PREFER_EQUAL */
  return smol_fire(SMOL_OP_FUNC_SET_CACHE_CONFIG, a, 2, NULL, 0);
}
EXPORT CUresult cuKernelSetCacheConfig(smol_func *k, int c, CUdevice d) { CUresult r = kernel_dev(k, d); return r ? r : cuFuncSetCacheConfig(k, c); }
EXPORT CUresult cuFuncSetSharedMemConfig(smol_func *f, int c) { (void)f; (void)c; return CUDA_SUCCESS; }
EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, smol_func *f, int bs, size_t smem, unsigned fl) {
  uint64_t a[4] = { 0, (uint64_t)bs, smem, fl }, o = 0;
  CUresult r = fn_id(f, &a[0]); if (r) return r;
  if (!n) return CUDA_ERROR_INVALID_VALUE;
  r = smol_call(SMOL_OP_OCCUPANCY_MAX_ACTIVE_BLOCKS, a, 4, NULL, 0, &o, 1, NULL, 0, NULL);
  if (!r) *n = (int)o;
  return r;
}
EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *n, smol_func *f, int bs, size_t smem) { return cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(n, f, bs, smem, 0); }
/* The block-size-to-shared-memory callback cannot run on the host; dynSmem is used for every size. */
EXPORT CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int *grid, int *block, smol_func *f, void *cb, size_t smem, int limit, unsigned fl) {
  (void)cb;
  uint64_t a[4] = { 0, smem, (uint32_t)limit, fl }, o[2];
  CUresult r = fn_id(f, &a[0]); if (r) return r;
  if (!grid || !block) return CUDA_ERROR_INVALID_VALUE;
  r = smol_call(SMOL_OP_OCCUPANCY_MAX_POTENTIAL_BLOCK_SIZE, a, 4, NULL, 0, o, 2, NULL, 0, NULL);
  if (!r) { *grid = (int)o[0]; *block = (int)o[1]; }
  return r;
}
EXPORT CUresult cuOccupancyMaxPotentialBlockSize(int *g, int *b, smol_func *f, void *cb, size_t smem, int limit) { return cuOccupancyMaxPotentialBlockSizeWithFlags(g, b, f, cb, smem, limit, 0); }

/* The configuration limits the device reports (cached at connect): a launch outside them fails here,
 * as the driver's does, instead of at the next synchronising call. */
CUresult smol_launch_dims(int dev, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem) {
  const int32_t *a = smol_devices[dev].attrs; /* 1 threads/block, 2-4 block dims, 5-7 grid dims, 97 smem optin */
  if (!gx || !gy || !gz || !bx || !by || !bz) return CUDA_ERROR_INVALID_VALUE;
  if ((uint64_t)bx * by * bz > (uint32_t)a[0] || bx > (uint32_t)a[1] || by > (uint32_t)a[2] || bz > (uint32_t)a[3]) return CUDA_ERROR_INVALID_VALUE;
  if (gx > (uint32_t)a[4] || gy > (uint32_t)a[5] || gz > (uint32_t)a[6]) return CUDA_ERROR_INVALID_VALUE;
  if (a[96] > 0 && smem > (uint32_t)a[96]) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}
/* Packs a launch's arguments into buf (f->argbytes bytes, at most 4096) by the function's layout. */
CUresult smol_pack_args(smol_func *f, void **params, void **extra, unsigned char *buf) {
  if (f->nparams == 0xffffffffu) {
    if (!__atomic_exchange_n(&f->warned, 1, __ATOMIC_RELAXED))
      smol_log("cuLaunchKernel of %s failed: CUDA_ERROR_NOT_SUPPORTED: %s", f->name, f->why ? f->why : "the host gives no parameter layout");
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  if (f->argbytes > SMOL_MAX_ARGBYTES) return CUDA_ERROR_NOT_SUPPORTED;
  memset(buf, 0, f->argbytes);
  if (params) {
    for (unsigned i = 0; i < f->nparams; i++) memcpy(buf + f->layout[2 * i], params[i], f->layout[2 * i + 1]);
  } else if (extra) {
    const void *pb = NULL; size_t psz = f->argbytes;
    for (int i = 0; extra[i]; i += 2) {
      if ((uintptr_t)extra[i] == 1) pb = extra[i + 1];
      else if ((uintptr_t)extra[i] == 2) psz = *(size_t *)extra[i + 1];
    }
    if (!pb && f->nparams) return CUDA_ERROR_INVALID_VALUE;
    if (pb) memcpy(buf, pb, psz < f->argbytes ? psz : f->argbytes);
  } else if (f->nparams) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuLaunchKernel(smol_func *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                               unsigned smem, void *s, void **params, void **extra) {
  if (!fn_ok(f)) return CUDA_ERROR_INVALID_HANDLE;
  smol_ctx *c; uint64_t sid;
  CUresult r = smol_ctx_arg(&c); if (r) return r;
  r = smol_launch_dims(c->dev, gx, gy, gz, bx, by, bz, smem); if (!r) r = smol_stream_arg(s, &sid); if (!r) r = smol_capture(s, SMOL_CW_DEVICE, NULL); if (r) return r;
  unsigned char buf[SMOL_MAX_ARGBYTES];
  r = smol_pack_args(f, params, extra, buf); if (r) return r;
  uint64_t a[9] = { f->id, gx, gy, gz, bx, by, bz, smem, sid };
  return smol_fire_ctx(c->id, SMOL_OP_LAUNCH_KERNEL, a, 9, buf, f->argbytes);
}
/* With attributes it is attrs.c's (smol_launch_ex); without, the plain launch. */
EXPORT CUresult cuLaunchKernelEx(const smol_launch_config *c, smol_func *f, void **params, void **extra) {
  if (!c) return CUDA_ERROR_INVALID_VALUE;
  if (c->nattrs) return smol_launch_ex(c, f, params, extra);
  return cuLaunchKernel(f, c->gx, c->gy, c->gz, c->bx, c->by, c->bz, c->smem, c->stream, params, extra);
}
EXPORT CUresult cuLaunchCooperativeKernel(smol_func *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem, void *s, void **params) {
  return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, smem, s, params, NULL);
}

/* streams */
enum { STREAM_FLAGS = 1 /* CU_STREAM_NON_BLOCKING */, EVENT_BLOCKING = 1, EVENT_DISABLE_TIMING = 2, EVENT_INTERPROCESS = 4 };
EXPORT CUresult cuStreamCreateWithPriority(smol_stream **out, unsigned flags, int prio) {
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!out || (flags & ~STREAM_FLAGS)) return CUDA_ERROR_INVALID_VALUE;
  smol_stream *s = obj_alloc(sizeof *s);
  s->magic = SMOL_MAGIC_OBJ; s->id = smol_mint(SMOL_KIND_STREAM); s->flags = flags; s->priority = prio; s->ctx = smol_current();
  uint64_t a[3] = { s->id, flags, (uint32_t)prio };
  r = smol_fire(SMOL_OP_STREAM_CREATE, a, 3, NULL, 0);
  if (r) { free(s); return r; }
  smol_handle_add(s, SMOL_H_STREAM);
  *out = s; return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamCreate(smol_stream **out, unsigned flags) { return cuStreamCreateWithPriority(out, flags, 0); }
/* The NULL and special streams cannot be destroyed; a destroyed stream is no longer a handle. */
EXPORT CUresult cuStreamDestroy_v2(smol_stream *s) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!smol_handle_take(s, SMOL_H_STREAM)) return CUDA_ERROR_INVALID_HANDLE;
  smol_capture_forget(s);
  uint64_t id = s->id; s->magic = 0; free(s);
  return smol_fire(SMOL_OP_STREAM_DESTROY, &id, 1, NULL, 0);
}
/* The legacy streams belong to the current context; a created stream carries its own. */
static CUresult stream_arg(void *s, uint64_t *id) {
  CUresult r = (uintptr_t)s <= 2 ? smol_need_ctx() : smol_need_init();
  return r ? r : smol_stream_arg(s, id);
}
EXPORT CUresult cuStreamSynchronize(void *s) { uint64_t id; CUresult r = stream_arg(s, &id); if (!r) r = smol_capture(s, SMOL_CW_SYNC, NULL); if (r) return r; return smol_call(SMOL_OP_STREAM_SYNCHRONIZE, &id, 1, NULL, 0, NULL, 0, NULL, 0, NULL); }
EXPORT CUresult cuStreamQuery(void *s) { uint64_t id; CUresult r = stream_arg(s, &id); if (!r) r = smol_capture(s, SMOL_CW_SYNC, NULL); if (r) return r; return smol_call(SMOL_OP_STREAM_QUERY, &id, 1, NULL, 0, NULL, 0, NULL, 0, NULL); }
EXPORT CUresult cuStreamGetPriority(smol_stream *s, int *p) { uint64_t id; CUresult r = stream_arg(s, &id); if (r) return r; if (!p) return CUDA_ERROR_INVALID_VALUE; *p = (uintptr_t)s <= 2 ? 0 : s->priority; return CUDA_SUCCESS; }
EXPORT CUresult cuStreamGetFlags(smol_stream *s, unsigned *f) { uint64_t id; CUresult r = stream_arg(s, &id); if (r) return r; if (!f) return CUDA_ERROR_INVALID_VALUE; *f = (uintptr_t)s <= 2 ? 0 : s->flags; return CUDA_SUCCESS; }
EXPORT CUresult cuStreamGetId(void *s, unsigned long long *id) { uint64_t i; CUresult r = stream_arg(s, &i); if (r) return r; if (!id) return CUDA_ERROR_INVALID_VALUE; *id = i; return CUDA_SUCCESS; }
/* A created stream belongs to the context it was created in, whichever is current now. */
static smol_ctx *stream_ctx(void *s) { return (uintptr_t)s <= 2 ? smol_current() : ((smol_stream *)s)->ctx; }
EXPORT CUresult cuStreamGetCtx(void *s, smol_ctx **c) { uint64_t i; CUresult r = stream_arg(s, &i); if (r) return r; if (!c) return CUDA_ERROR_INVALID_VALUE; *c = stream_ctx(s); return CUDA_SUCCESS; }
EXPORT CUresult cuStreamGetCtx_v2(void *s, smol_ctx **c, void **gc) { CUresult r = cuStreamGetCtx(s, c); if (!r && gc) *gc = NULL; return r; }
EXPORT CUresult cuStreamGetDevice(void *s, CUdevice *d) { uint64_t i; CUresult r = stream_arg(s, &i); if (r) return r; if (!d) return CUDA_ERROR_INVALID_VALUE; *d = stream_ctx(s) ? stream_ctx(s)->dev : 0; return CUDA_SUCCESS; }
EXPORT CUresult cuStreamWaitEvent(void *s, smol_event *e, unsigned flags) {
  uint64_t a[3] = { 0, 0, flags };
  CUresult r = stream_arg(s, &a[0]); if (r) return r;
  if (!ev_ok(e)) return CUDA_ERROR_INVALID_HANDLE;
  if (flags > 1) return CUDA_ERROR_INVALID_VALUE; /* CU_EVENT_WAIT_DEFAULT, CU_EVENT_WAIT_EXTERNAL */
  if ((r = smol_capture(s, SMOL_CW_WAIT, e))) return r;
  a[1] = e->id;
  return smol_fire(SMOL_OP_STREAM_WAIT_EVENT, a, 3, NULL, 0);
}
/* Host functions run in the guest: wait for the stream, then call it here. */
EXPORT CUresult cuLaunchHostFunc(void *s, void (*fn)(void *), void *data) {
  uint64_t id; CUresult r = stream_arg(s, &id); if (r) return r;
  if (!fn) return CUDA_ERROR_INVALID_VALUE;
  if ((r = smol_capture(s, SMOL_CW_HOSTFN, NULL))) return r;
  r = cuStreamSynchronize(s);
  if (!r) fn(data);
  return r;
}

/* events */
EXPORT CUresult cuEventCreate(smol_event **out, unsigned flags) {
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!out || (flags & ~(unsigned)(EVENT_BLOCKING | EVENT_DISABLE_TIMING | EVENT_INTERPROCESS))) return CUDA_ERROR_INVALID_VALUE;
  if ((flags & EVENT_INTERPROCESS) && !(flags & EVENT_DISABLE_TIMING)) return CUDA_ERROR_INVALID_VALUE;
  smol_event *e = obj_alloc(sizeof *e);
  e->magic = SMOL_MAGIC_OBJ; e->id = smol_mint(SMOL_KIND_EVENT); e->flags = flags;
  uint64_t a[2] = { e->id, flags };
  r = smol_fire(SMOL_OP_EVENT_CREATE, a, 2, NULL, 0);
  if (r) { free(e); return r; }
  smol_handle_add(e, SMOL_H_EVENT);
  *out = e; return CUDA_SUCCESS;
}
static CUresult ev_id(smol_event *e, uint64_t *id) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!ev_ok(e)) return CUDA_ERROR_INVALID_HANDLE;
  *id = e->id; return CUDA_SUCCESS;
}
EXPORT CUresult cuEventRecordWithFlags(smol_event *e, void *s, unsigned f) {
  uint64_t a[2];
  CUresult r = ev_id(e, &a[0]); if (!r) r = stream_arg(s, &a[1]); if (r) return r;
  if (f > 1) return CUDA_ERROR_INVALID_VALUE; /* CU_EVENT_RECORD_DEFAULT, CU_EVENT_RECORD_EXTERNAL */
  if ((r = smol_capture(s, SMOL_CW_RECORD, e))) return r;
  r = smol_fire(SMOL_OP_EVENT_RECORD, a, 2, NULL, 0);
  if (!r) __atomic_store_n(&e->recorded, 1, __ATOMIC_RELAXED);
  return r;
}
EXPORT CUresult cuEventRecord(smol_event *e, void *s) { return cuEventRecordWithFlags(e, s, 0); }
EXPORT CUresult cuEventSynchronize(smol_event *e) { uint64_t id; CUresult r = ev_id(e, &id); if (r) return r; return smol_call(SMOL_OP_EVENT_SYNCHRONIZE, &id, 1, NULL, 0, NULL, 0, NULL, 0, NULL); }
EXPORT CUresult cuEventQuery(smol_event *e) { uint64_t id; CUresult r = ev_id(e, &id); if (r) return r; return smol_call(SMOL_OP_EVENT_QUERY, &id, 1, NULL, 0, NULL, 0, NULL, 0, NULL); }
/* Documented: an event never recorded, or one created with CU_EVENT_DISABLE_TIMING, is INVALID_HANDLE. */
EXPORT CUresult cuEventElapsedTime_v2(float *ms, smol_event *a, smol_event *b) {
  uint64_t args[2], o = 0;
  CUresult r = ev_id(a, &args[0]); if (!r) r = ev_id(b, &args[1]); if (r) return r;
  /* a NULL out pointer is INVALID_HANDLE, not INVALID_VALUE, on the real driver (H200, 580.159) */
  if (!ms) return CUDA_ERROR_INVALID_HANDLE;
  if (!a->recorded || !b->recorded || ((a->flags | b->flags) & EVENT_DISABLE_TIMING)) return CUDA_ERROR_INVALID_HANDLE;
  r = smol_call(SMOL_OP_EVENT_ELAPSED_TIME, args, 2, NULL, 0, &o, 1, NULL, 0, NULL);
  if (!r) { uint32_t bits = (uint32_t)o; memcpy(ms, &bits, 4); }
  return r;
}
EXPORT CUresult cuEventElapsedTime(float *ms, smol_event *a, smol_event *b) { return cuEventElapsedTime_v2(ms, a, b); }
EXPORT CUresult cuEventDestroy_v2(smol_event *e) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!smol_handle_take(e, SMOL_H_EVENT)) return CUDA_ERROR_INVALID_HANDLE;
  uint64_t id = e->id;
  e->magic = 0; free(e);
  return smol_fire(SMOL_OP_EVENT_DESTROY, &id, 1, NULL, 0);
}
