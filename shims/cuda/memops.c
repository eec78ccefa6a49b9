/* Stream memory operations (write/wait on a value in device memory, in stream order), peer queries and
 * copies, and IPC. Memory operations are fire-and-forget: the host enqueues them on its stream, so a wait
 * blocks that stream on the GPU, never the guest or the daemon. Only device memory this process
 * allocated can be named: guest host memory is not reachable by the GPU. */
#include "shim.h"
#include "capture.h"
#include <string.h>

enum { MEMOP_WAIT32 = 1, MEMOP_WRITE32 = 2, MEMOP_FLUSH = 3, MEMOP_WAIT64 = 4, MEMOP_WRITE64 = 5, MEMOP_BARRIER = 6 };
enum { WAIT_FLUSH = 1 << 30, WRITE_NO_BARRIER = 1 };
enum { CUDA_ERROR_PEER_ACCESS_UNSUPPORTED = 217, CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
       CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705 };

/* The driver's checks of one operation, done here so a bad one fails its own call. */
static CUresult memop_ok(unsigned kind, CUdeviceptr addr, unsigned flags) {
  switch (kind) {
    case MEMOP_WAIT32: case MEMOP_WAIT64:
      if ((flags & ~(unsigned)WAIT_FLUSH) > 3) return CUDA_ERROR_INVALID_VALUE;
      break;
    case MEMOP_WRITE32: case MEMOP_WRITE64:
      if (flags & ~(unsigned)WRITE_NO_BARRIER) return CUDA_ERROR_INVALID_VALUE;
      break;
    case MEMOP_FLUSH: return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    case MEMOP_BARRIER: return flags > 1 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
  }
  size_t n = kind == MEMOP_WAIT64 || kind == MEMOP_WRITE64 ? 8 : 4;
  return addr % n || !smol_range_ok(addr, n) ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
static CUresult memop_send(uint64_t sid, unsigned kind, CUdeviceptr addr, uint64_t value, unsigned flags) {
  /* A 64-bit value travels as two words: the daemon reads words as numbers, exact only below 2^53. */
  uint64_t a[6] = { sid, kind, addr, value & 0xffffffffu, value >> 32, flags };
  return smol_fire(SMOL_OP_STREAM_MEM_OP, a, 6, NULL, 0);
}
static CUresult memop(void *s, unsigned kind, CUdeviceptr addr, uint64_t value, unsigned flags) {
  uint64_t sid;
  CUresult r = smol_need_ctx(); if (!r) r = smol_stream_arg(s, &sid); if (r) return r;
  if ((r = memop_ok(kind, addr, flags)) || (r = smol_capture(s, SMOL_CW_DEVICE, NULL))) return r;
  return memop_send(sid, kind, addr, kind == MEMOP_WAIT32 || kind == MEMOP_WRITE32 ? (uint32_t)value : value, flags);
}
#define MEMOP_FNS(sfx) \
  EXPORT CUresult cuStreamWaitValue32##sfx(void *s, CUdeviceptr a, uint32_t v, unsigned f) { return memop(s, MEMOP_WAIT32, a, v, f); } \
  EXPORT CUresult cuStreamWaitValue64##sfx(void *s, CUdeviceptr a, uint64_t v, unsigned f) { return memop(s, MEMOP_WAIT64, a, v, f); } \
  EXPORT CUresult cuStreamWriteValue32##sfx(void *s, CUdeviceptr a, uint32_t v, unsigned f) { return memop(s, MEMOP_WRITE32, a, v, f); } \
  EXPORT CUresult cuStreamWriteValue64##sfx(void *s, CUdeviceptr a, uint64_t v, unsigned f) { return memop(s, MEMOP_WRITE64, a, v, f); }
/* The first versions (CUDA 8/9) take the same arguments; they differ only in flags no code passes now. */
MEMOP_FNS()
MEMOP_FNS(_v2)

/* CUstreamBatchMemOpParams: a 48-byte union tagged by its first field. */
typedef union {
  unsigned operation;
  struct { unsigned operation; CUdeviceptr address; uint64_t value; unsigned flags; CUdeviceptr alias; } value;
  struct { unsigned operation; unsigned flags; } other;
  uint64_t pad[6];
} batch_op;
/* Every operation is checked before any is sent, so a bad one leaves the stream untouched; the batch
 * then travels as its operations in order, which the host stream keeps. */
static CUresult batch(void *s, unsigned count, const batch_op *ops, unsigned flags) {
  uint64_t sid;
  CUresult r = smol_need_ctx(); if (!r) r = smol_stream_arg(s, &sid); if (r) return r;
  if (flags || count > 256 || (count && !ops)) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < count; i++) {
    unsigned k = ops[i].operation;
    int val = k == MEMOP_WAIT32 || k == MEMOP_WAIT64 || k == MEMOP_WRITE32 || k == MEMOP_WRITE64;
    if ((r = memop_ok(k, val ? ops[i].value.address : 0, val ? ops[i].value.flags : ops[i].other.flags))) return r;
  }
  if (count && (r = smol_capture(s, SMOL_CW_DEVICE, NULL))) return r;
  for (unsigned i = 0; i < count && !r; i++) {
    unsigned k = ops[i].operation;
    int val = k == MEMOP_WAIT32 || k == MEMOP_WAIT64 || k == MEMOP_WRITE32 || k == MEMOP_WRITE64;
    uint64_t v = k == MEMOP_WAIT32 || k == MEMOP_WRITE32 ? (uint32_t)ops[i].value.value : ops[i].value.value;
    r = val ? memop_send(sid, k, ops[i].value.address, v, ops[i].value.flags) : memop_send(sid, k, 0, 0, ops[i].other.flags);
  }
  return r;
}
EXPORT CUresult cuStreamBatchMemOp(void *s, unsigned n, const batch_op *ops, unsigned f) { return batch(s, n, ops, f); }
EXPORT CUresult cuStreamBatchMemOp_v2(void *s, unsigned n, const batch_op *ops, unsigned f) { return batch(s, n, ops, f); }

/* Peers. A device is never its own peer: the answers for the same device are the driver's documented
 * ones and need no round trip; two devices are asked of the host. */
static CUresult dev_ok(CUdevice d) { return d < 0 || d >= smol_device_count ? CUDA_ERROR_INVALID_DEVICE : CUDA_SUCCESS; }
EXPORT CUresult cuDeviceCanAccessPeer(int *can, CUdevice dev, CUdevice peer) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!can) return CUDA_ERROR_INVALID_VALUE;
  if ((r = dev_ok(dev)) || (r = dev_ok(peer))) return r;
  if (dev == peer) { *can = 0; return CUDA_SUCCESS; }
  uint64_t a[3] = { 0, (uint64_t)dev, (uint64_t)peer }, o = 0;
  r = smol_call(SMOL_OP_DEVICE_PEER_QUERY, a, 3, NULL, 0, &o, 1, NULL, 0, NULL);
  if (!r) *can = (int)o;
  return r;
}
EXPORT CUresult cuDeviceGetP2PAttribute(int *v, int attr, CUdevice src, CUdevice dst) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!v || attr < 1 || attr > 5) return CUDA_ERROR_INVALID_VALUE;
  if ((r = dev_ok(src)) || (r = dev_ok(dst))) return r;
  if (src == dst) return CUDA_ERROR_INVALID_DEVICE;
  uint64_t a[3] = { (uint64_t)attr, (uint64_t)src, (uint64_t)dst }, o = 0;
  r = smol_call(SMOL_OP_DEVICE_PEER_QUERY, a, 3, NULL, 0, &o, 1, NULL, 0, NULL);
  if (!r) *v = (int)o;
  return r;
}
static CUresult peer_access(smol_ctx *peer, unsigned flags, int enable) {
  smol_ctx *cur;
  CUresult r = smol_ctx_arg(&cur); if (r) return r;
  if (!smol_handle_ok(peer, SMOL_H_CTX) || (enable && peer == cur)) return CUDA_ERROR_INVALID_CONTEXT;
  if (enable && flags) return CUDA_ERROR_INVALID_VALUE;
  if (peer->dev == cur->dev) return enable ? CUDA_ERROR_PEER_ACCESS_UNSUPPORTED : CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
  uint64_t a[3] = { peer->id, flags, (uint64_t)enable };
  return smol_call(SMOL_OP_CTX_PEER_ACCESS, a, 3, NULL, 0, NULL, 0, NULL, 0, NULL);
}
EXPORT CUresult cuCtxEnablePeerAccess(smol_ctx *peer, unsigned flags) { return peer_access(peer, flags, 1); }
EXPORT CUresult cuCtxDisablePeerAccess(smol_ctx *peer) { return peer_access(peer, 0, 0); }

/* Unified addressing makes a peer copy an ordinary device-to-device copy of this process's memory. */
static CUresult copy_peer(CUdeviceptr d, smol_ctx *dc, CUdeviceptr s, smol_ctx *sc, size_t n, void *st, int is_async) {
  extern CUresult cuMemcpyDtoD_v2(CUdeviceptr, CUdeviceptr, size_t);
  extern CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr, CUdeviceptr, size_t, void *);
  CUresult r = smol_need_init(); if (r) return r;
  if (!smol_handle_ok(dc, SMOL_H_CTX) || !smol_handle_ok(sc, SMOL_H_CTX)) return CUDA_ERROR_INVALID_CONTEXT;
  return is_async ? cuMemcpyDtoDAsync_v2(d, s, n, st) : cuMemcpyDtoD_v2(d, s, n);
}
EXPORT CUresult cuMemcpyPeer(CUdeviceptr d, smol_ctx *dc, CUdeviceptr s, smol_ctx *sc, size_t n) { return copy_peer(d, dc, s, sc, n, NULL, 0); }
EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr d, smol_ctx *dc, CUdeviceptr s, smol_ctx *sc, size_t n, void *st) { return copy_peer(d, dc, s, sc, n, st, 1); }

/* IPC would hand one guest process's memory or events to another, which is another session on the
 * host: sessions are isolated, so every well-formed request is refused (logged once per entry point).
 * Malformed ones still get the driver's own code first. */
static CUresult ipc_refused(const char *fn, int *logged) {
  if (!__atomic_exchange_n(logged, 1, __ATOMIC_RELAXED))
    smol_log("%s: IPC would share this process's GPU memory or events with another guest process, another "
             "isolated session on the host; refused with CUDA_ERROR_NOT_SUPPORTED %d", fn, CUDA_ERROR_NOT_SUPPORTED);
  return CUDA_ERROR_NOT_SUPPORTED;
}
static int g_logged_get_mem, g_logged_open_mem, g_logged_get_event, g_logged_open_event;
enum { EVENT_INTERPROCESS = 4 };
EXPORT CUresult cuIpcGetMemHandle(void *handle, CUdeviceptr p) {
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!handle || !smol_is_device(p, NULL, NULL)) return CUDA_ERROR_INVALID_VALUE;
  return ipc_refused("cuIpcGetMemHandle", &g_logged_get_mem);
}
static CUresult ipc_open(CUdeviceptr *p, unsigned flags) {
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!p || flags > 1) return CUDA_ERROR_INVALID_VALUE;
  return ipc_refused("cuIpcOpenMemHandle", &g_logged_open_mem);
}
/* CUipcMemHandle is 64 bytes passed by value. */
typedef struct { unsigned char data[64]; } ipc_handle;
EXPORT CUresult cuIpcOpenMemHandle(CUdeviceptr *p, ipc_handle h, unsigned flags) { (void)h; return ipc_open(p, flags); }
EXPORT CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *p, ipc_handle h, unsigned flags) { (void)h; return ipc_open(p, flags); }
/* Nothing is ever opened, so no pointer can be closed. */
EXPORT CUresult cuIpcCloseMemHandle(CUdeviceptr p) {
  (void)p;
  CUresult r = smol_need_ctx(); if (r) return r;
  return CUDA_ERROR_INVALID_VALUE;
}
EXPORT CUresult cuIpcGetEventHandle(void *handle, smol_event *e) {
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!handle) return CUDA_ERROR_INVALID_VALUE;
  if (!smol_handle_ok(e, SMOL_H_EVENT)) return CUDA_ERROR_INVALID_HANDLE;
  if (!(e->flags & EVENT_INTERPROCESS)) return CUDA_ERROR_INVALID_VALUE;
  return ipc_refused("cuIpcGetEventHandle", &g_logged_get_event);
}
EXPORT CUresult cuIpcOpenEventHandle(void **e, ipc_handle h) {
  (void)h;
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!e) return CUDA_ERROR_INVALID_VALUE;
  return ipc_refused("cuIpcOpenEventHandle", &g_logged_open_event);
}
