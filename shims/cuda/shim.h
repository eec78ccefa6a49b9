/* smol guest shim for libcuda.so.1: forwards the CUDA driver API to the host daemon (smol gpu serve).
 * No CUDA headers are needed to build it: the few types it uses are declared here. */
#ifndef SMOL_SHIM_H
#define SMOL_SHIM_H
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include "smol_protocol.h"

typedef int CUresult;
typedef int CUdevice;
typedef uint64_t CUdeviceptr;
#define EXPORT __attribute__((visibility("default")))

enum {
  CUDA_SUCCESS = 0, CUDA_ERROR_INVALID_VALUE = 1, CUDA_ERROR_OUT_OF_MEMORY = 2, CUDA_ERROR_NOT_INITIALIZED = 3,
  CUDA_ERROR_NO_DEVICE = 100, CUDA_ERROR_INVALID_DEVICE = 101, CUDA_ERROR_INVALID_IMAGE = 200,
  CUDA_ERROR_INVALID_CONTEXT = 201, CUDA_ERROR_INVALID_HANDLE = 400, CUDA_ERROR_NOT_FOUND = 500,
  CUDA_ERROR_NOT_READY = 600, CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
  CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713, CUDA_ERROR_NOT_SUPPORTED = 801, CUDA_ERROR_UNKNOWN = 999
};

#define SMOL_MAGIC_CTX 0x534d4354u
#define SMOL_MAGIC_OBJ 0x534d4f42u
#define SMOL_MAX_DEVICES 16
#define SMOL_MAX_PARAMS 256

/* Handles are 16-byte aligned: the handle set keeps a kind in the low bits. */
typedef struct __attribute__((aligned(16))) smol_ctx { uint32_t magic; int dev; int primary; int refs; unsigned flags; uint64_t id; } smol_ctx;
typedef struct smol_func smol_func;
typedef struct smol_module { uint32_t magic; int lib; uint64_t id; smol_func *funcs; /* looked up in it */ } smol_module;
struct smol_func {
  uint32_t magic; int kernel; uint64_t id; smol_module *mod; smol_func *next_in_mod;
  unsigned nparams; unsigned argbytes; uint32_t *layout; /* offset,size pairs */
  char *name;
  char *why; int warned; /* nparams == ~0u: why the host cannot tell the layout; logged at the first launch */
};
typedef struct smol_stream { uint32_t magic; uint64_t id; unsigned flags; int priority; smol_ctx *ctx; /* created in */ } smol_stream;
typedef struct smol_event { uint32_t magic; uint64_t id; unsigned flags; int recorded; } smol_event;

typedef struct smol_device {
  char name[256]; unsigned char uuid[16]; uint64_t total_mem; int32_t attrs[SMOL_ATTR_COUNT];
} smol_device;

typedef struct smol_proc_entry { const char *name; int version; void *fn; } smol_proc_entry;
extern const smol_proc_entry smol_proc_table[];
extern const unsigned smol_proc_count;

/* handles.c: what the shim handed out, so bad arguments fail locally with the driver's own code */
enum { SMOL_H_CTX = 1, SMOL_H_MODULE = 2, SMOL_H_LIBRARY = 3, SMOL_H_FUNC = 4, SMOL_H_STREAM = 5, SMOL_H_EVENT = 6,
       SMOL_H_GRAPH = 7, SMOL_H_GRAPH_EXEC = 8, SMOL_H_GRAPH_NODE = 9, SMOL_H_POOL = 10, SMOL_H_MEM_HANDLE = 11 };
void smol_handle_add(const void *p, unsigned kind);
typedef struct { size_t cap; uintptr_t slot[]; } smol_handle_table;
extern smol_handle_table *smol_handles;
static inline size_t smol_handle_hash(uintptr_t k) { return (size_t)((k >> 4) * 0x9E3779B97F4A7C15ull >> 20); }
/* Lock-free lookup (inline: a launch checks its function on every call). */
static inline int smol_handle_ok(const void *p, unsigned kind) {
  uintptr_t key = (uintptr_t)p | kind;
  smol_handle_table *t = __atomic_load_n(&smol_handles, __ATOMIC_ACQUIRE);
  if (!p || ((uintptr_t)p & 15) || !t) return 0;
  for (size_t i = smol_handle_hash(key) & (t->cap - 1), n = 0; n < t->cap; i = (i + 1) & (t->cap - 1), n++) {
    uintptr_t v = __atomic_load_n(&t->slot[i], __ATOMIC_ACQUIRE);
    if (v == key) return 1;
    if (!v) return 0;
  }
  return 0;
}
int smol_handle_take(const void *p, unsigned kind);
/* owned: what a range is, so cuMemFree takes only allocations and a copy may cross only between mappings */
enum { SMOL_ALLOC_GLOBAL = 0, SMOL_ALLOC_OWNED = 1, SMOL_ALLOC_MAPPED = 2 };
void smol_track_alloc(CUdeviceptr p, size_t n, int owned);
int smol_untrack_alloc(CUdeviceptr p);
int smol_untrack_range(CUdeviceptr p);
int smol_is_device(CUdeviceptr p, CUdeviceptr *base, size_t *size);
int smol_range_ok(CUdeviceptr p, size_t n);

/* transport.c */
CUresult smol_connect(void);
CUresult smol_call(uint16_t op, const uint64_t *args, int nargs, const void *blob, size_t bloblen,
                   uint64_t *outs, int nouts, void *out, size_t outcap, size_t *outlen);
CUresult smol_fire(uint16_t op, const uint64_t *args, int nargs, const void *blob, size_t bloblen);
CUresult smol_fire_ctx(uint64_t ctx, uint16_t op, const uint64_t *args, int nargs, const void *blob, size_t bloblen);
uint64_t smol_mint(uint64_t kind);
void smol_log(const char *fmt, ...);
CUresult smol_unsupported(const char *name);
extern int smol_driver_version, smol_device_count;
extern smol_device smol_devices[SMOL_MAX_DEVICES];

/* context.c */
extern int smol_inited;
CUresult smol_need_init(void);  /* NOT_INITIALIZED before a successful cuInit */
CUresult smol_need_ctx(void);   /* ... and INVALID_CONTEXT without a current context */
smol_ctx *smol_current(void);
/* The current context, or the error a call needing one returns (one TLS read on the hot path: a
 * context can only be current after cuInit). */
static inline CUresult smol_ctx_arg(smol_ctx **out) {
  if ((*out = smol_current())) return CUDA_SUCCESS;
  CUresult r = smol_need_ctx();
  return r ? r : CUDA_ERROR_INVALID_CONTEXT;
}
uint64_t smol_current_id(void);
smol_ctx *smol_primary(int dev);

/* exec.c: a stream argument's wire id; INVALID_HANDLE for one this process does not hold */
CUresult smol_stream_arg(void *s, uint64_t *id);

/* exec.c / attrs.c: launches. CUlaunchConfig and CUlaunchAttribute as cuda.h lays them out. */
#define SMOL_MAX_ARGBYTES 4096
typedef struct { uint32_t id; uint32_t pad; unsigned char value[64]; } smol_launch_attr;
typedef struct { unsigned gx, gy, gz, bx, by, bz, smem; void *stream; const smol_launch_attr *attrs; unsigned nattrs; } smol_launch_config;
CUresult smol_launch_dims(int dev, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned smem);
CUresult smol_pack_args(smol_func *f, void **params, void **extra, unsigned char *buf);
CUresult smol_launch_ex(const smol_launch_config *c, smol_func *f, void **params, void **extra);

/* exports.c */
CUresult smol_integrity_check(unsigned version, uint64_t seconds, uint64_t out[2]);
#endif
