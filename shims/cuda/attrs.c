/* cuLaunchKernelEx with launch attributes, cluster occupancy, and the kernel queries the driver answers
 * from what the shim already holds. Attributes travel as the driver's own 72-byte records, with an event
 * replaced by its id; what the shim can judge (value ranges, cluster dimensions that do not divide the
 * grid, events it never made) fails here with the driver's code, the rest on the host. */
#include "shim.h"
#include "capture.h"
#include <string.h>

enum {
  LA_IGNORE = 0, LA_ACCESS_POLICY_WINDOW = 1, LA_COOPERATIVE = 2, LA_CLUSTER_DIMENSION = 4, LA_CLUSTER_SCHEDULING = 5,
  LA_PROGRAMMATIC_EVENT = 7, LA_MEM_SYNC_DOMAIN = 10, LA_COMPLETION_EVENT = 12, LA_CARVEOUT = 14, LA_NVLINK_CENTRIC = 16,
  CUDA_ERROR_INVALID_CLUSTER_SIZE = 912, MAX_ATTRS = 32, ATTR_BYTES = 72, PORTABLE_CLUSTER = 8,
  EV_DISABLE_TIMING = 2, EV_INTERPROCESS = 4
};

typedef struct { int cooperative; unsigned cx, cy, cz; } launch_plan;

static uint32_t u32_at(const unsigned char *v, int off) { uint32_t x; memcpy(&x, v + off, 4); return x; }

/* Events of completion and programmatic attributes must be this process's, non-interprocess, and
 * created with CU_EVENT_DISABLE_TIMING (cuda.h). */
static CUresult event_id(unsigned char *v) {
  smol_event *e; memcpy(&e, v, sizeof e);
  if (!smol_handle_ok(e, SMOL_H_EVENT)) return CUDA_ERROR_INVALID_HANDLE;
  if (!(e->flags & EV_DISABLE_TIMING) || (e->flags & EV_INTERPROCESS)) return CUDA_ERROR_INVALID_VALUE;
  memcpy(v, &e->id, 8);
  __atomic_store_n(&e->recorded, 1, __ATOMIC_RELAXED);
  return CUDA_SUCCESS;
}

/* Copies the attributes into out (events as ids) and checks what the shim can. */
static CUresult encode_attrs(const smol_launch_config *c, unsigned char *out, launch_plan *p) {
  memset(p, 0, sizeof *p);
  if (!c->attrs) return CUDA_ERROR_INVALID_VALUE;
  if (c->nattrs > MAX_ATTRS) { smol_log("cuLaunchKernelEx with %u attributes: at most %d are carried", c->nattrs, MAX_ATTRS); return CUDA_ERROR_NOT_SUPPORTED; }
  for (unsigned i = 0; i < c->nattrs; i++) {
    unsigned char *rec = out + (size_t)i * ATTR_BYTES, *v = rec + 8;
    memcpy(rec, &c->attrs[i], ATTR_BYTES);
    uint32_t id = c->attrs[i].id, x = u32_at(v, 0);
    CUresult r = CUDA_SUCCESS;
    switch (id) {
      case LA_IGNORE: case 6: case 8: case 9: case 11: break; /* serialization, priority, domain map, preferred cluster */
      case LA_ACCESS_POLICY_WINDOW: {
        float hit; memcpy(&hit, v + 16, 4);
        if (!(hit >= 0.0f && hit <= 1.0f) || u32_at(v, 20) > 2 || u32_at(v, 24) > 2) r = CUDA_ERROR_INVALID_VALUE;
        break;
      }
      case LA_COOPERATIVE: p->cooperative = x != 0; break;
      case LA_CLUSTER_DIMENSION:
        p->cx = x; p->cy = u32_at(v, 4); p->cz = u32_at(v, 8);
        if (!p->cx || !p->cy || !p->cz) r = CUDA_ERROR_INVALID_VALUE;
        break;
      case LA_CLUSTER_SCHEDULING: if (x > 2) r = CUDA_ERROR_INVALID_VALUE; break;
      case LA_PROGRAMMATIC_EVENT: case LA_COMPLETION_EVENT: r = event_id(v); break;
      case LA_MEM_SYNC_DOMAIN: case LA_NVLINK_CENTRIC: if (x > 1) r = CUDA_ERROR_INVALID_VALUE; break;
      case LA_CARVEOUT: if (x > 100 && x != 0xffffffffu) r = CUDA_ERROR_INVALID_VALUE; break;
      default: r = CUDA_ERROR_INVALID_VALUE; /* stream-only (3), graphs-only (13), unknown */
    }
    if (r) return r;
  }
  return CUDA_SUCCESS;
}

CUresult smol_launch_ex(const smol_launch_config *c, smol_func *f, void **params, void **extra) {
  if (!smol_handle_ok(f, SMOL_H_FUNC)) return CUDA_ERROR_INVALID_HANDLE;
  smol_ctx *ctx; uint64_t sid;
  CUresult r = smol_ctx_arg(&ctx); if (r) return r;
  r = smol_stream_arg(c->stream, &sid); if (r) return r;
  unsigned char buf[MAX_ATTRS * ATTR_BYTES + SMOL_MAX_ARGBYTES];
  launch_plan p;
  r = encode_attrs(c, buf, &p); if (r) return r;
  if (p.cx && (c->gx % p.cx || c->gy % p.cy || c->gz % p.cz)) return CUDA_ERROR_INVALID_CLUSTER_SIZE;
  r = smol_launch_dims(ctx->dev, c->gx, c->gy, c->gz, c->bx, c->by, c->bz, c->smem); if (r) return r;
  /* A capturing stream records the launch, and its events as records in the capture (graphs.c). */
  if ((r = smol_capture(c->stream, SMOL_CW_DEVICE, NULL))) return r;
  for (unsigned i = 0; i < c->nattrs; i++) {
    if (c->attrs[i].id != LA_PROGRAMMATIC_EVENT && c->attrs[i].id != LA_COMPLETION_EVENT) continue;
    void *ev; memcpy(&ev, c->attrs[i].value, sizeof ev);
    if ((r = smol_capture(c->stream, SMOL_CW_RECORD, ev))) return r;
  }
  size_t abytes = (size_t)c->nattrs * ATTR_BYTES;
  r = smol_pack_args(f, params, extra, buf + abytes); if (r) return r;
  uint64_t a[10] = { f->id, c->gx, c->gy, c->gz, c->bx, c->by, c->bz, c->smem, sid, c->nattrs };
  /* Whether a cooperative grid fits at once, or a cluster beyond the portable 8 blocks is allowed, only
   * the host knows, and the driver answers at the launch: those few wait for the answer. */
  if (p.cooperative || (uint64_t)p.cx * p.cy * p.cz > PORTABLE_CLUSTER)
    return smol_call(SMOL_OP_LAUNCH_KERNEL_EX, a, 10, buf, abytes + f->argbytes, NULL, 0, NULL, 0, NULL);
  return smol_fire_ctx(ctx->id, SMOL_OP_LAUNCH_KERNEL_EX, a, 10, buf, abytes + f->argbytes);
}

static CUresult occupancy_cluster(int which, int *out, smol_func *f, const smol_launch_config *c) {
  if (!smol_handle_ok(f, SMOL_H_FUNC)) return CUDA_ERROR_INVALID_HANDLE;
  smol_ctx *ctx; uint64_t sid, v = 0;
  CUresult r = smol_ctx_arg(&ctx); if (r) return r;
  if (!out || !c) return CUDA_ERROR_INVALID_VALUE;
  r = smol_stream_arg(c->stream, &sid); if (r) return r;
  unsigned char buf[MAX_ATTRS * ATTR_BYTES];
  launch_plan p;
  if (c->nattrs && (r = encode_attrs(c, buf, &p))) return r;
  uint64_t a[11] = { (uint64_t)which, f->id, c->gx, c->gy, c->gz, c->bx, c->by, c->bz, c->smem, sid, c->nattrs };
  r = smol_call(SMOL_OP_OCCUPANCY_CLUSTER, a, 11, buf, (size_t)c->nattrs * ATTR_BYTES, &v, 1, NULL, 0, NULL);
  if (!r) *out = (int)v;
  return r;
}
EXPORT CUresult cuOccupancyMaxPotentialClusterSize(int *size, smol_func *f, const smol_launch_config *c) { return occupancy_cluster(0, size, f, c); }
EXPORT CUresult cuOccupancyMaxActiveClusters(int *n, smol_func *f, const smol_launch_config *c) { return occupancy_cluster(1, n, f, c); }

EXPORT CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *bytes, smol_func *f, int blocks, int block_size) {
  if (!smol_handle_ok(f, SMOL_H_FUNC)) return CUDA_ERROR_INVALID_HANDLE;
  smol_ctx *ctx; uint64_t v = 0;
  CUresult r = smol_ctx_arg(&ctx); if (r) return r;
  if (!bytes) return CUDA_ERROR_INVALID_VALUE;
  uint64_t a[3] = { f->id, (uint32_t)blocks, (uint32_t)block_size };
  r = smol_call(SMOL_OP_OCCUPANCY_AVAILABLE_DYNAMIC_SMEM, a, 3, NULL, 0, &v, 1, NULL, 0, NULL);
  if (!r) *bytes = (size_t)v;
  return r;
}

/* A kernel's library is the one it was taken from (a CUfunction's module serves for one from cuModuleGetFunction). */
EXPORT CUresult cuKernelGetLibrary(smol_module **lib, smol_func *k) {
  if (!smol_handle_ok(k, SMOL_H_FUNC)) return CUDA_ERROR_INVALID_HANDLE;
  if (!lib) return CUDA_ERROR_INVALID_VALUE;
  *lib = k->mod; return CUDA_SUCCESS;
}
