/* The shim's own record of what it handed out: the set of live handles (contexts, modules, libraries,
 * functions, streams, events) and the interval map of device allocations. Every argument the shim can
 * judge locally is judged here, so a bad one fails the call that passed it, with the real driver's
 * code, instead of a later synchronous call (fire-and-forget frames carry no answer).
 *
 * Handles: an open-addressing set of (pointer | kind). Lookups take no lock (launches check a function
 * and a stream each); inserts and removals take one. A grown table replaces the old one, which is kept
 * (never freed) so a lookup racing with growth reads valid memory. */
#include "shim.h"
#include <stdlib.h>
#include <string.h>

#define EMPTY 0u
#define TOMB 1u
typedef smol_handle_table table_t;
smol_handle_table *smol_handles;
#define g_tab smol_handles
static size_t g_used; /* live + tombstones */
static pthread_mutex_t g_hmu = PTHREAD_MUTEX_INITIALIZER;

#define hash smol_handle_hash

static table_t *new_table(size_t cap) { table_t *t = calloc(1, sizeof *t + cap * sizeof(uintptr_t)); t->cap = cap; return t; }

static void insert_into(table_t *t, uintptr_t key) {
  for (size_t i = hash(key) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
    uintptr_t v = __atomic_load_n(&t->slot[i], __ATOMIC_RELAXED);
    if (v == EMPTY || v == TOMB) { __atomic_store_n(&t->slot[i], key, __ATOMIC_RELEASE); return; }
  }
}

void smol_handle_add(const void *p, unsigned kind) {
  uintptr_t key = (uintptr_t)p | kind;
  pthread_mutex_lock(&g_hmu);
  table_t *t = g_tab;
  if (!t || (g_used + 1) * 2 > t->cap) {
    size_t live = 0;
    if (t) for (size_t i = 0; i < t->cap; i++) live += t->slot[i] > TOMB;
    size_t cap = 256;
    while ((live + 1) * 4 > cap) cap *= 2;
    table_t *n = new_table(cap);
    if (t) for (size_t i = 0; i < t->cap; i++) if (t->slot[i] > TOMB) insert_into(n, t->slot[i]);
    __atomic_store_n(&g_tab, n, __ATOMIC_RELEASE);
    g_used = live; t = n;
  }
  insert_into(t, key);
  g_used++;
  pthread_mutex_unlock(&g_hmu);
}

static size_t find(table_t *t, uintptr_t key) {
  for (size_t i = hash(key) & (t->cap - 1), n = 0; n < t->cap; i = (i + 1) & (t->cap - 1), n++) {
    uintptr_t v = __atomic_load_n(&t->slot[i], __ATOMIC_ACQUIRE);
    if (v == key) return i;
    if (v == EMPTY) break;
  }
  return (size_t)-1;
}

/* Removes the handle if it is live; 0 if it was not (already destroyed, never ours, another kind). */
int smol_handle_take(const void *p, unsigned kind) {
  if (!p || ((uintptr_t)p & 15)) return 0;
  pthread_mutex_lock(&g_hmu);
  table_t *t = g_tab;
  size_t i = t ? find(t, (uintptr_t)p | kind) : (size_t)-1;
  if (i != (size_t)-1) __atomic_store_n(&t->slot[i], TOMB, __ATOMIC_RELEASE);
  pthread_mutex_unlock(&g_hmu);
  return i != (size_t)-1;
}

/* --- device allocations: sorted by base, binary search (O(log n)) --- */
typedef struct { CUdeviceptr base; size_t size; int owned; } range_t;
static range_t *g_r; static size_t g_n, g_cap;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

/* index of the last range whose base <= p, or -1 */
static long floor_idx(CUdeviceptr p) {
  long lo = 0, hi = (long)g_n - 1, idx = -1;
  while (lo <= hi) { long mid = (lo + hi) / 2; if (g_r[mid].base <= p) { idx = mid; lo = mid + 1; } else hi = mid - 1; }
  return idx;
}

void smol_track_alloc(CUdeviceptr p, size_t n, int owned) {
  pthread_mutex_lock(&g_mu);
  long i = floor_idx(p);
  if (i >= 0 && g_r[i].base == p) { g_r[i].size = n; g_r[i].owned = owned; pthread_mutex_unlock(&g_mu); return; }
  if (g_n == g_cap) { g_cap = g_cap ? g_cap * 2 : 64; g_r = realloc(g_r, g_cap * sizeof *g_r); }
  memmove(&g_r[i + 2], &g_r[i + 1], (g_n - (size_t)(i + 1)) * sizeof *g_r);
  g_r[i + 1] = (range_t){ p, n, owned };
  g_n++;
  pthread_mutex_unlock(&g_mu);
}

static int untrack(CUdeviceptr p, int any) {
  int hit = 0;
  pthread_mutex_lock(&g_mu);
  long i = floor_idx(p);
  if (i >= 0 && g_r[i].base == p && (any || g_r[i].owned == SMOL_ALLOC_OWNED)) {
    memmove(&g_r[i], &g_r[i + 1], (g_n - (size_t)i - 1) * sizeof *g_r);
    g_n--; hit = 1;
  }
  pthread_mutex_unlock(&g_mu);
  return hit;
}
/* Removes the allocation that starts exactly at p (only what cuMemAlloc* returned can be freed). */
int smol_untrack_alloc(CUdeviceptr p) { return untrack(p, 0); }
/* Removes whatever range starts exactly at p (a VMM mapping losing its access or its memory). */
int smol_untrack_range(CUdeviceptr p) { return untrack(p, 1); }

int smol_is_device(CUdeviceptr p, CUdeviceptr *base, size_t *size) {
  int hit = 0;
  pthread_mutex_lock(&g_mu);
  long i = floor_idx(p);
  if (i >= 0 && p - g_r[i].base < g_r[i].size) {
    if (base) *base = g_r[i].base;
    if (size) *size = g_r[i].size;
    hit = 1;
  }
  pthread_mutex_unlock(&g_mu);
  return hit;
}

/* [p, p+n) lies inside one allocation (n may be 0: then p must still be inside one), or inside VMM
 * mappings that follow each other without a gap: their virtual addresses are contiguous on the device. */
int smol_range_ok(CUdeviceptr p, size_t n) {
  int ok = 0;
  pthread_mutex_lock(&g_mu);
  long i = floor_idx(p);
  if (i >= 0 && p - g_r[i].base < g_r[i].size) {
    size_t left = g_r[i].size - (p - g_r[i].base);
    while (n > left && g_r[i].owned == SMOL_ALLOC_MAPPED && (size_t)i + 1 < g_n && g_r[i + 1].owned == SMOL_ALLOC_MAPPED &&
           g_r[i + 1].base == g_r[i].base + g_r[i].size) {
      i++; n -= left; left = g_r[i].size;
    }
    ok = n <= left;
  }
  pthread_mutex_unlock(&g_mu);
  return ok;
}
