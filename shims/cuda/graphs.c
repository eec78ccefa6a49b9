/* Stream capture and graphs. The host driver captures: work issued on a capturing stream reaches the
 * daemon in order (fire-and-forget, as always) and the driver records it. The shim sees every begin,
 * end, event record and wait, so it knows which streams capture and answers the hot queries
 * (cuStreamIsCapturing, cuStreamGetCaptureInfo) itself; it asks the host only when fire-and-forget work
 * went to a capturing stream since the host last answered (the driver may have refused it).
 *
 * All guest threads share one host thread, so the host capture is always begun relaxed and the guest's
 * capture modes (global, thread-local, relaxed; cuThreadExchangeStreamCaptureMode) are enforced here.
 * What a replay could not do faithfully is refused: copies to or from guest host memory (a replay would
 * touch the daemon's buffers; the driver refuses pageable memory in a capture with the same code) and
 * host functions (they run in the guest). A refused call invalidates the capture, as on the driver. */
#include "capture.h"
#include <stdlib.h>
#include <string.h>

enum { MODE_GLOBAL = 0, MODE_THREAD_LOCAL = 1, MODE_RELAXED = 2 };
enum { ST_NONE = 0, ST_ACTIVE = 1, ST_INVALIDATED = 2 };
enum { E_ILLEGAL_STATE = 401, E_UNSUPPORTED = 900, E_INVALIDATED = 901, E_MERGE = 902, E_UNMATCHED = 903,
       E_UNJOINED = 904, E_ISOLATION = 905, E_IMPLICIT = 906, E_WRONG_THREAD = 908 };

typedef struct smol_graph { uint32_t magic; uint64_t id; } smol_graph;
typedef struct smol_exec { uint32_t magic; uint64_t id; } smol_exec;
typedef struct capture {
  uint64_t id; int mode, status, dirty; pthread_t thread; smol_stream *origin; smol_graph *g;
} capture;

#define MAXS 256
static struct { smol_stream *s; capture *c; } g_in[MAXS];
static struct { void *e; capture *c; } g_ev[MAXS];
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_next_capture;
int smol_captures;
static __thread int t_mode;

static void *obj(size_t n) { void *p = aligned_alloc(16, (n + 15) & ~(size_t)15); memset(p, 0, n); return p; }
static int graph_ok(smol_graph *g) { return smol_handle_ok(g, SMOL_H_GRAPH); }
static int exec_ok(smol_exec *x) { return smol_handle_ok(x, SMOL_H_GRAPH_EXEC); }
static int is_legacy(void *s) { return (uintptr_t)s <= 1; }

static int slot_of(void *s) { for (int i = 0; i < MAXS; i++) if (s && g_in[i].s == s) return i; return -1; }
static capture *cap_of(void *s) { int i = slot_of(s); return i < 0 ? NULL : g_in[i].c; }
static void join(smol_stream *s, capture *c) {
  int i = 0;
  while (i < MAXS && g_in[i].s) i++;
  if (i == MAXS) return;
  g_in[i].s = s; g_in[i].c = c;
  __atomic_add_fetch(&smol_captures, 1, __ATOMIC_RELEASE);
}
static void tag(void *e, capture *c) {
  int i = 0, free_i = -1;
  for (; i < MAXS; i++) { if (g_ev[i].e == e) break; if (!g_ev[i].e && free_i < 0) free_i = i; }
  if (i == MAXS) { if (!c || free_i < 0) return; i = free_i; g_ev[i].e = e; }
  if (c) g_ev[i].c = c; else g_ev[i].e = NULL;
}
static capture *tag_of(void *e) { for (int i = 0; i < MAXS; i++) if (e && g_ev[i].e == e) return g_ev[i].c; return NULL; }
static void finish(capture *c) {
  for (int i = 0; i < MAXS; i++) if (g_in[i].s && g_in[i].c == c) { g_in[i].s = NULL; __atomic_sub_fetch(&smol_captures, 1, __ATOMIC_RELEASE); }
  for (int i = 0; i < MAXS; i++) if (g_ev[i].e && g_ev[i].c == c) g_ev[i].e = NULL;
}
static void invalidate(capture *c) { if (c) c->status = ST_INVALIDATED; }
/* The legacy stream waits for blocking streams: using it while one captures is refused (IMPLICIT) and
 * costs that capture. */
static CUresult legacy_use(void) {
  CUresult r = CUDA_SUCCESS;
  for (int i = 0; i < MAXS; i++)
    if (g_in[i].s && !(g_in[i].s->flags & 1)) { invalidate(g_in[i].c); r = E_IMPLICIT; }
  return r;
}

/* What the driver would say about `what` on stream s while some stream captures (shim.h). */
CUresult smol_capture_hook(void *s, int what, void *ev) {
  CUresult r = CUDA_SUCCESS;
  pthread_mutex_lock(&g_mu);
  capture *c = is_legacy(s) ? NULL : cap_of(s);
  if (is_legacy(s)) r = legacy_use();
  else if (!c) {
    capture *t = what == SMOL_CW_WAIT ? tag_of(ev) : NULL;
    if (t) join(s, t); /* a fork: s joins the capture the event was recorded in */
    else if (what == SMOL_CW_RECORD) tag(ev, NULL);
  } else if (what == SMOL_CW_SYNC) { invalidate(c); r = E_UNSUPPORTED; }
  else if (c->status == ST_INVALIDATED) r = E_INVALIDATED;
  else switch (what) {
    case SMOL_CW_HOST: invalidate(c); r = E_UNSUPPORTED; break;
    case SMOL_CW_HOSTFN:
      smol_log("cuLaunchHostFunc in a stream capture is not supported by the remoting shim (CUDA_ERROR_NOT_SUPPORTED): host functions run in the guest");
      invalidate(c); r = CUDA_ERROR_NOT_SUPPORTED; break;
    case SMOL_CW_RECORD: tag(ev, c); break;
    case SMOL_CW_WAIT: {
      capture *t = tag_of(ev);
      if (!t) { invalidate(c); r = E_ISOLATION; }
      else if (t != c) { invalidate(c); invalidate(t); r = E_MERGE; }
      break;
    }
    default: c->dirty = 1; /* the host may still refuse it */
  }
  pthread_mutex_unlock(&g_mu);
  return r;
}

/* A destroyed stream leaves its capture (its address may come back as a new stream); a destroyed
 * origin ends the capture, whose graph is then discarded. */
void smol_capture_forget(void *s) {
  if (!__atomic_load_n(&smol_captures, __ATOMIC_ACQUIRE)) return;
  pthread_mutex_lock(&g_mu);
  int i = slot_of(s);
  capture *c = i < 0 ? NULL : g_in[i].c;
  if (c && c->origin == s) {
    finish(c);
    smol_handle_take(c->g, SMOL_H_GRAPH); c->g->magic = 0; free(c->g); free(c);
  } else if (c) { g_in[i].s = NULL; __atomic_sub_fetch(&smol_captures, 1, __ATOMIC_RELEASE); }
  pthread_mutex_unlock(&g_mu);
}

/* Potentially unsafe calls (cuMemAlloc): refused while this thread captures in a mode other than
 * relaxed, or another thread captures in global mode, unless this thread's mode is relaxed. */
CUresult smol_capture_unsafe(void) {
  CUresult r = CUDA_SUCCESS;
  if (!__atomic_load_n(&smol_captures, __ATOMIC_ACQUIRE) || t_mode == MODE_RELAXED) return r;
  pthread_mutex_lock(&g_mu);
  pthread_t me = pthread_self();
  for (int i = 0; i < MAXS; i++) {
    capture *c = g_in[i].c;
    if (!g_in[i].s || c->origin != g_in[i].s || c->mode == MODE_RELAXED) continue;
    if (pthread_equal(c->thread, me) || (c->mode == MODE_GLOBAL && t_mode == MODE_GLOBAL)) { invalidate(c); r = E_UNSUPPORTED; }
  }
  pthread_mutex_unlock(&g_mu);
  return r;
}

EXPORT CUresult cuThreadExchangeStreamCaptureMode(int *mode) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!mode || *mode < MODE_GLOBAL || *mode > MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
  int old = t_mode; t_mode = *mode; *mode = old;
  return CUDA_SUCCESS;
}

static CUresult stream_id(void *s, uint64_t *id) {
  CUresult r = (uintptr_t)s <= 2 ? smol_need_ctx() : smol_need_init();
  return r ? r : smol_stream_arg(s, id);
}

EXPORT CUresult cuStreamBeginCapture_v2(smol_stream *s, int mode) {
  uint64_t sid;
  CUresult r = stream_id(s, &sid); if (r) return r;
  if (mode < MODE_GLOBAL || mode > MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
  if (is_legacy(s)) return E_UNSUPPORTED;
  if ((uintptr_t)s == 2) return smol_unsupported("cuStreamBeginCapture on CU_STREAM_PER_THREAD");
  pthread_mutex_lock(&g_mu);
  int busy = slot_of(s) >= 0;
  pthread_mutex_unlock(&g_mu);
  if (busy) return E_ILLEGAL_STATE;
  smol_graph *g = obj(sizeof *g);
  g->magic = SMOL_MAGIC_OBJ; g->id = smol_mint(SMOL_KIND_GRAPH);
  uint64_t a[3] = { sid, (uint64_t)mode, g->id };
  r = smol_call(SMOL_OP_STREAM_BEGIN_CAPTURE, a, 3, NULL, 0, NULL, 0, NULL, 0, NULL);
  if (r) { free(g); return r; }
  capture *c = calloc(1, sizeof *c);
  c->id = __atomic_add_fetch(&g_next_capture, 1, __ATOMIC_RELAXED);
  c->mode = mode; c->status = ST_ACTIVE; c->thread = pthread_self(); c->origin = s; c->g = g;
  smol_handle_add(g, SMOL_H_GRAPH);
  pthread_mutex_lock(&g_mu);
  join(s, c);
  pthread_mutex_unlock(&g_mu);
  return CUDA_SUCCESS;
}
/* CUDA 10.0's form had no mode; the default mode is global. */
EXPORT CUresult cuStreamBeginCapture(smol_stream *s) { return cuStreamBeginCapture_v2(s, MODE_GLOBAL); }

EXPORT CUresult cuStreamEndCapture(smol_stream *s, smol_graph **out) {
  uint64_t a[2];
  CUresult r = stream_id(s, &a[0]); if (r) return r;
  if (!out) return CUDA_ERROR_INVALID_VALUE;
  pthread_mutex_lock(&g_mu);
  capture *c = is_legacy(s) ? NULL : cap_of(s);
  if (!c) r = E_ILLEGAL_STATE;
  else if (c->origin != s) r = E_UNMATCHED;
  else if (c->mode != MODE_RELAXED && !pthread_equal(c->thread, pthread_self())) r = E_WRONG_THREAD;
  a[1] = c && c->status == ST_INVALIDATED;
  pthread_mutex_unlock(&g_mu);
  if (r) return r;
  r = smol_call(SMOL_OP_STREAM_END_CAPTURE, a, 2, NULL, 0, NULL, 0, NULL, 0, NULL);
  if (r && r != E_INVALIDATED && r != E_UNJOINED) return r; /* the sequence goes on (a deferred error) */
  pthread_mutex_lock(&g_mu);
  finish(c);
  pthread_mutex_unlock(&g_mu);
  if (r) { smol_handle_take(c->g, SMOL_H_GRAPH); c->g->magic = 0; free(c->g); *out = NULL; }
  else *out = c->g;
  free(c);
  return r;
}

/* Local unless fire-and-forget work went to this capture since the host last answered. */
static CUresult status_of(void *s, int *status, uint64_t *id, smol_graph **g) {
  uint64_t sid;
  CUresult r = stream_id(s, &sid); if (r) return r;
  if (!status) return CUDA_ERROR_INVALID_VALUE;
  if (!__atomic_load_n(&smol_captures, __ATOMIC_ACQUIRE)) { *status = ST_NONE; if (g) *g = NULL; return CUDA_SUCCESS; }
  pthread_mutex_lock(&g_mu);
  capture *c = NULL;
  if (is_legacy(s)) { for (int i = 0; i < MAXS; i++) if (g_in[i].s && !(g_in[i].s->flags & 1)) r = E_IMPLICIT; }
  else c = cap_of(s);
  int ask = c && c->status == ST_ACTIVE && c->dirty;
  pthread_mutex_unlock(&g_mu);
  if (r) return r;
  if (ask) {
    uint64_t o[2];
    r = smol_call(SMOL_OP_STREAM_CAPTURE_STATUS, &sid, 1, NULL, 0, o, 2, NULL, 0, NULL);
    if (r) return r;
    pthread_mutex_lock(&g_mu);
    c->dirty = 0;
    if (o[0] == ST_INVALIDATED) c->status = ST_INVALIDATED;
    pthread_mutex_unlock(&g_mu);
  }
  *status = c ? c->status : ST_NONE;
  if (id && c) *id = c->id;
  if (g) *g = c ? c->g : NULL;
  return CUDA_SUCCESS;
}
EXPORT CUresult cuStreamIsCapturing(void *s, int *status) { return status_of(s, status, NULL, NULL); }
EXPORT CUresult cuStreamGetCaptureInfo(void *s, int *status, uint64_t *id) { return status_of(s, status, id, NULL); }
/* The dependency set is reported empty: the shim names no graph nodes (see docs/cuda.md). */
EXPORT CUresult cuStreamGetCaptureInfo_v2(void *s, int *status, uint64_t *id, smol_graph **g, const void **deps, size_t *n) {
  CUresult r = status_of(s, status, id, g);
  if (!r && deps) *deps = NULL;
  if (!r && n) *n = 0;
  return r;
}
EXPORT CUresult cuStreamGetCaptureInfo_v3(void *s, int *status, uint64_t *id, smol_graph **g, const void **deps, const void **edges, size_t *n) {
  if (edges && !deps) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = cuStreamGetCaptureInfo_v2(s, status, id, g, deps, n);
  if (!r && edges) *edges = NULL;
  return r;
}

EXPORT CUresult cuGraphCreate(smol_graph **out, unsigned flags) {
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!out || flags) return CUDA_ERROR_INVALID_VALUE;
  smol_graph *g = obj(sizeof *g);
  g->magic = SMOL_MAGIC_OBJ; g->id = smol_mint(SMOL_KIND_GRAPH);
  uint64_t a[2] = { g->id, flags };
  r = smol_fire(SMOL_OP_GRAPH_CREATE, a, 2, NULL, 0);
  if (r) { free(g); return r; }
  smol_handle_add(g, SMOL_H_GRAPH);
  *out = g; return CUDA_SUCCESS;
}
EXPORT CUresult cuGraphDestroy(smol_graph *g) {
  CUresult r = smol_need_init(); if (r) return r;
  pthread_mutex_lock(&g_mu);
  for (int i = 0; i < MAXS; i++) if (g && g_in[i].s && g_in[i].c->g == g) r = CUDA_ERROR_INVALID_VALUE; /* still being captured into */
  pthread_mutex_unlock(&g_mu);
  if (r || !smol_handle_take(g, SMOL_H_GRAPH)) return CUDA_ERROR_INVALID_VALUE;
  uint64_t id = g->id; g->magic = 0; free(g);
  return smol_fire(SMOL_OP_GRAPH_DESTROY, &id, 1, NULL, 0);
}

enum { INST_AUTO_FREE = 1, INST_UPLOAD = 2, INST_DEVICE_LAUNCH = 4, INST_NODE_PRIORITY = 8 };
EXPORT CUresult cuGraphInstantiateWithFlags(smol_exec **out, smol_graph *g, unsigned long long flags) {
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!out || !graph_ok(g) || (flags & ~(unsigned long long)(INST_AUTO_FREE | INST_UPLOAD | INST_DEVICE_LAUNCH | INST_NODE_PRIORITY)))
    return CUDA_ERROR_INVALID_VALUE;
  smol_exec *x = obj(sizeof *x);
  x->magic = SMOL_MAGIC_OBJ; x->id = smol_mint(SMOL_KIND_GRAPH_EXEC);
  uint64_t a[3] = { x->id, g->id, flags };
  r = smol_call(SMOL_OP_GRAPH_INSTANTIATE, a, 3, NULL, 0, NULL, 0, NULL, 0, NULL);
  if (r) { free(x); return r; }
  smol_handle_add(x, SMOL_H_GRAPH_EXEC);
  *out = x; return CUDA_SUCCESS;
}
/* The pre-11.4 forms report an error node and log; there is never one to report here. */
EXPORT CUresult cuGraphInstantiate_v2(smol_exec **out, smol_graph *g, void **err_node, char *log, size_t logsz) {
  CUresult r = cuGraphInstantiateWithFlags(out, g, 0);
  if (err_node) *err_node = NULL;
  if (log && logsz) log[0] = 0;
  return r;
}
EXPORT CUresult cuGraphInstantiate(smol_exec **out, smol_graph *g, void **err_node, char *log, size_t logsz) { return cuGraphInstantiate_v2(out, g, err_node, log, logsz); }
typedef struct { unsigned long long flags; void *upload_stream; void *err_node; int result; } inst_params;
EXPORT CUresult cuGraphUpload(smol_exec *x, void *s);
EXPORT CUresult cuGraphInstantiateWithParams(smol_exec **out, smol_graph *g, inst_params *p) {
  if (!p) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = cuGraphInstantiateWithFlags(out, g, p->flags);
  if (!r && (p->flags & INST_UPLOAD)) r = cuGraphUpload(*out, p->upload_stream);
  p->err_node = NULL; p->result = r ? 1 : 0; /* CUDA_GRAPH_INSTANTIATE_SUCCESS / _ERROR */
  return r;
}
EXPORT CUresult cuGraphExecDestroy(smol_exec *x) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!smol_handle_take(x, SMOL_H_GRAPH_EXEC)) return CUDA_ERROR_INVALID_VALUE;
  uint64_t id = x->id; x->magic = 0; free(x);
  return smol_fire(SMOL_OP_GRAPH_EXEC_DESTROY, &id, 1, NULL, 0);
}
static CUresult on_stream(uint16_t op, smol_exec *x, void *s) {
  uint64_t a[2];
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!exec_ok(x)) return CUDA_ERROR_INVALID_VALUE;
  if ((r = smol_stream_arg(s, &a[1]))) return r;
  if ((r = smol_capture(s, SMOL_CW_DEVICE, NULL))) return r;
  a[0] = x->id;
  return smol_fire(op, a, 2, NULL, 0);
}
EXPORT CUresult cuGraphLaunch(smol_exec *x, void *s) { return on_stream(SMOL_OP_GRAPH_LAUNCH, x, s); }
EXPORT CUresult cuGraphUpload(smol_exec *x, void *s) { return on_stream(SMOL_OP_GRAPH_UPLOAD, x, s); }

/* Counts only (frameworks ask how many nodes a capture made): the shim names no nodes, so a caller that
 * wants the nodes themselves gets NOT_SUPPORTED, logged. */
static CUresult node_count(smol_graph *g, void **nodes, size_t *n, int root, const char *name) {
  CUresult r = smol_need_init(); if (r) return r;
  if (!graph_ok(g) || !n) return CUDA_ERROR_INVALID_VALUE;
  if (nodes && *n) return smol_unsupported(name);
  uint64_t a[2] = { g->id, (uint64_t)root }, o = 0;
  r = smol_call(SMOL_OP_GRAPH_NODE_COUNT, a, 2, NULL, 0, &o, 1, NULL, 0, NULL);
  if (!r) *n = nodes ? 0 : o;
  return r;
}
EXPORT CUresult cuGraphGetNodes(smol_graph *g, void **nodes, size_t *n) { return node_count(g, nodes, n, 0, "cuGraphGetNodes with a node array"); }
EXPORT CUresult cuGraphGetRootNodes(smol_graph *g, void **nodes, size_t *n) { return node_count(g, nodes, n, 1, "cuGraphGetRootNodes with a node array"); }

typedef struct { int result; void *err_node, *err_from; } update_info;
EXPORT CUresult cuGraphExecUpdate_v2(smol_exec *x, smol_graph *g, update_info *info) {
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!exec_ok(x) || !graph_ok(g) || !info) return CUDA_ERROR_INVALID_VALUE;
  uint64_t a[2] = { x->id, g->id }, o = 0;
  r = smol_call(SMOL_OP_GRAPH_EXEC_UPDATE, a, 2, NULL, 0, &o, 1, NULL, 0, NULL);
  info->result = (int)(int32_t)o; info->err_node = info->err_from = NULL;
  return r;
}
EXPORT CUresult cuGraphExecUpdate(smol_exec *x, smol_graph *g, void **err_node, int *result) {
  update_info i = { 0, NULL, NULL };
  if (!result) return CUDA_ERROR_INVALID_VALUE;
  CUresult r = cuGraphExecUpdate_v2(x, g, &i);
  *result = i.result; if (err_node) *err_node = NULL;
  return r;
}
