/* Tensor maps (TMA descriptors): the host's driver writes the 128 opaque bytes, which the guest then
 * passes to kernels by value inside the parameter blob. Every requirement cuda.h documents for the
 * arguments is checked here first, with the driver's CUDA_ERROR_INVALID_VALUE; the host then checks that
 * the memory the map describes is this session's own. */
#include "shim.h"
#include <string.h>

enum { TILED, IM2COL, WIDE };
enum { DT_16U4_ALIGN8B = 13, DT_16U4_ALIGN16B = 14, DT_16U6_ALIGN16B = 15, INTERLEAVE_32B = 2, SWIZZLE_32B = 1, MAP_BYTES = 128 };

typedef struct {
  int kind; unsigned dtype, rank; uint64_t addr;
  const uint64_t *dims, *strides; const uint32_t *box, *estr;
  int lower[3], upper[3]; unsigned cpp, ppc, mode;
  unsigned interleave, swizzle, l2, oob;
  int bad; /* an argument already known to be invalid (a NULL corner array, a swizzle wide mode lacks) */
} tmap_args;

static uint64_t row_bytes(unsigned dtype, uint64_t n) {
  static const unsigned char size[] = { 1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4 };
  if (dtype < DT_16U4_ALIGN8B) return n * size[dtype];
  return dtype == DT_16U4_ALIGN8B ? (n + 1) / 2 : n; /* 16 values in 8 bytes, or in 16 with gaps */
}
static unsigned align_of(unsigned dtype, unsigned interleave) {
  return interleave == INTERLEAVE_32B || dtype == DT_16U4_ALIGN16B || dtype == DT_16U6_ALIGN16B ? 32 : 16;
}

static CUresult check(const tmap_args *a, const void *map) {
  if (!map || (uintptr_t)map % 64 || a->bad) return CUDA_ERROR_INVALID_VALUE;
  if (a->dtype > DT_16U6_ALIGN16B || a->interleave > 2 || a->swizzle > 6 || a->l2 > 3 || a->oob > 1) return CUDA_ERROR_INVALID_VALUE;
  unsigned min_rank = a->kind != TILED || a->interleave ? 3 : 1, al = align_of(a->dtype, a->interleave);
  if (a->rank < min_rank || a->rank > 5) return CUDA_ERROR_INVALID_VALUE;
  if (!a->addr || a->addr % al) return CUDA_ERROR_INVALID_VALUE;
  if (!a->dims || !a->estr || (a->rank > 1 && !a->strides) || (a->kind == TILED && !a->box)) return CUDA_ERROR_INVALID_VALUE;
  int packed16 = a->dtype == DT_16U4_ALIGN16B || a->dtype == DT_16U6_ALIGN16B;
  for (unsigned i = 0; i < a->rank; i++) {
    if (!a->dims[i] || a->dims[i] > (1ull << 32) || !a->estr[i] || a->estr[i] > 8) return CUDA_ERROR_INVALID_VALUE;
    if (a->kind == TILED && (!a->box[i] || a->box[i] > 256)) return CUDA_ERROR_INVALID_VALUE;
  }
  if ((packed16 && a->dims[0] % 128) || (a->dtype == DT_16U4_ALIGN8B && a->dims[0] % 2)) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i + 1 < a->rank; i++)
    if (a->strides[i] % al || a->strides[i] >= (1ull << 40)) return CUDA_ERROR_INVALID_VALUE;
  if (a->interleave == INTERLEAVE_32B && a->swizzle != SWIZZLE_32B) return CUDA_ERROR_INVALID_VALUE;
  if (a->dtype == DT_16U6_ALIGN16B && a->interleave) return CUDA_ERROR_INVALID_VALUE;
  if (a->oob && !(a->dtype >= 6 && a->dtype <= 12)) return CUDA_ERROR_INVALID_VALUE; /* NaN fill: float types only */
  uint64_t inner = row_bytes(a->dtype, a->kind == TILED ? a->box[0] : a->cpp);
  if (a->kind == TILED && !a->interleave && inner % 16) return CUDA_ERROR_INVALID_VALUE;
  if (a->kind == TILED && packed16 && a->box[0] != 128) return CUDA_ERROR_INVALID_VALUE;
  if (!a->interleave && a->swizzle && inner > (a->swizzle == 1 ? 32u : a->swizzle == 2 ? 64u : 128u)) return CUDA_ERROR_INVALID_VALUE;
  if (a->kind != TILED) {
    if (!a->cpp || a->cpp > 256 || (packed16 && a->cpp != 128)) return CUDA_ERROR_INVALID_VALUE;
    if (a->kind == IM2COL && (!a->ppc || a->ppc > 1024)) return CUDA_ERROR_INVALID_VALUE;
    if (a->kind == WIDE && (a->mode > 1 || (a->mode == 0 && (!a->ppc || a->ppc > 1024)))) return CUDA_ERROR_INVALID_VALUE;
  }
  if (a->kind == IM2COL) {
    /* rank 3: one offset in [-32768, 32767]; rank 4: two in [-128, 127]; rank 5: three in [-16, 15] */
    int n = (int)a->rank - 2, lim = n == 1 ? 32768 : n == 2 ? 128 : 16;
    for (int i = 0; i < n; i++)
      if (a->lower[i] < -lim || a->lower[i] >= lim || a->upper[i] < -lim || a->upper[i] >= lim) return CUDA_ERROR_INVALID_VALUE;
  }
  if (a->kind == WIDE && (a->lower[0] < -32768 || a->lower[0] > 32767 || a->upper[0] < -32768 || a->upper[0] > 32767)) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

/* One synchronous call: the arguments in a fixed 148-byte blob (see spec-areas/launch.ts), the
 * descriptor back. */
static CUresult encode(void *map, const tmap_args *a) {
  CUresult r = smol_need_ctx(); if (r) return r;
  r = check(a, map); if (r) return r;
  unsigned char blob[148] = { 0 };
  uint32_t tail[3] = { a->cpp, a->ppc, a->mode };
  for (unsigned i = 0; i < a->rank; i++) {
    memcpy(blob + 8 * i, &a->dims[i], 8);
    if (i + 1 < a->rank) memcpy(blob + 40 + 8 * i, &a->strides[i], 8);
    if (a->kind == TILED) memcpy(blob + 72 + 4 * i, &a->box[i], 4);
    memcpy(blob + 92 + 4 * i, &a->estr[i], 4);
  }
  memcpy(blob + 112, a->lower, 12); memcpy(blob + 124, a->upper, 12); memcpy(blob + 136, tail, 12);
  uint64_t args[8] = { (uint64_t)a->kind, a->dtype, a->rank, a->addr, a->interleave, a->swizzle, a->l2, a->oob };
  unsigned char out[MAP_BYTES]; size_t got = 0;
  r = smol_call(SMOL_OP_TENSOR_MAP_ENCODE, args, 8, blob, sizeof blob, NULL, 0, out, sizeof out, &got);
  if (!r && got != MAP_BYTES) r = CUDA_ERROR_UNKNOWN;
  if (!r) memcpy(map, out, MAP_BYTES);
  return r;
}

EXPORT CUresult cuTensorMapEncodeTiled(void *map, unsigned dtype, unsigned rank, void *addr, const uint64_t *dims, const uint64_t *strides,
                                       const uint32_t *box, const uint32_t *estr, unsigned interleave, unsigned swizzle, unsigned l2, unsigned oob) {
  tmap_args a = { .kind = TILED, .dtype = dtype, .rank = rank, .addr = (uintptr_t)addr, .dims = dims, .strides = strides, .box = box,
                  .estr = estr, .interleave = interleave, .swizzle = swizzle, .l2 = l2, .oob = oob };
  return encode(map, &a);
}
EXPORT CUresult cuTensorMapEncodeIm2col(void *map, unsigned dtype, unsigned rank, void *addr, const uint64_t *dims, const uint64_t *strides,
                                        const int *lower, const int *upper, unsigned cpp, unsigned ppc, const uint32_t *estr,
                                        unsigned interleave, unsigned swizzle, unsigned l2, unsigned oob) {
  tmap_args a = { .kind = IM2COL, .dtype = dtype, .rank = rank, .addr = (uintptr_t)addr, .dims = dims, .strides = strides, .estr = estr,
                  .cpp = cpp, .ppc = ppc, .interleave = interleave, .swizzle = swizzle, .l2 = l2, .oob = oob };
  a.bad = !lower || !upper;
  for (unsigned i = 0; !a.bad && rank >= 3 && rank <= 5 && i < rank - 2; i++) { a.lower[i] = lower[i]; a.upper[i] = upper[i]; }
  return encode(map, &a);
}
/* Wide mode takes only the 64B, 128B and 128B_ATOM_32B swizzles (cuda.h). */
EXPORT CUresult cuTensorMapEncodeIm2colWide(void *map, unsigned dtype, unsigned rank, void *addr, const uint64_t *dims, const uint64_t *strides,
                                            int lower, int upper, unsigned cpp, unsigned ppc, const uint32_t *estr, unsigned interleave,
                                            unsigned mode, unsigned swizzle, unsigned l2, unsigned oob) {
  tmap_args a = { .kind = WIDE, .dtype = dtype, .rank = rank, .addr = (uintptr_t)addr, .dims = dims, .strides = strides, .estr = estr,
                  .lower = { lower }, .upper = { upper }, .cpp = cpp, .ppc = ppc, .mode = mode, .interleave = interleave,
                  .swizzle = swizzle, .l2 = l2, .oob = oob };
  a.bad = swizzle != 2 && swizzle != 3 && swizzle != 4;
  return encode(map, &a);
}
/* The host re-points only a descriptor it handed this session, over memory the session owns; the
 * alignment a new address needs is the one the original encode had, which only the descriptor knows. */
EXPORT CUresult cuTensorMapReplaceAddress(void *map, void *addr) {
  CUresult r = smol_need_ctx(); if (r) return r;
  if (!map || (uintptr_t)map % 64 || !addr || (uintptr_t)addr % 16) return CUDA_ERROR_INVALID_VALUE;
  uint64_t a = (uintptr_t)addr;
  unsigned char out[MAP_BYTES]; size_t got = 0;
  r = smol_call(SMOL_OP_TENSOR_MAP_REPLACE_ADDRESS, &a, 1, map, MAP_BYTES, NULL, 0, out, sizeof out, &got);
  if (!r && got != MAP_BYTES) r = CUDA_ERROR_UNKNOWN;
  if (!r) memcpy(map, out, MAP_BYTES);
  return r;
}
