// The sdpa kernel's bfloat16 register tiles on AVX512-BF16 (vdpbf16ps), for CPUs that have it
// at the fp32 FMA's instruction rate (AMD Zen 4 and later: twice the multiply-adds of fp32)
// and no AMX. They read the operands the AMX tiles read (sdpa_amx-inl.h), in the same VNNI
// pair layout, so RunBlockBf16 shares its packing and softmax with the AMX path:
//   S^T[j][i] += K[j][2p, 2p+1] (one 32-bit pair broadcast) . Q^T pairs[p][16 queries]
//   O[i][c]   += P pairs[jj][i] (one 32-bit pair broadcast)  . V pairs[jj][16 dims]
// P stays in the [key pair][query] order the softmax writes it in: a broadcast needs no
// transpose. Decoding's Q.K dot products (DpQKDot) take K rows as they lie, pairs of head_dim
// in each lane, and reduce like the fp32 dot path (ReduceTree).
// Included once per SIMD target (sdpa.cpp's foreach_target), hence the toggle guard.
#if defined(BACKPLANE_ATTENTION_CPU_SDPA_DPBF16_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef BACKPLANE_ATTENTION_CPU_SDPA_DPBF16_INL_H_
#undef BACKPLANE_ATTENTION_CPU_SDPA_DPBF16_INL_H_
#else
#define BACKPLANE_ATTENTION_CPU_SDPA_DPBF16_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>
#include <cstring>

#include "cpu/sdpa_tiles-inl.h"

HWY_BEFORE_NAMESPACE();
namespace backplane::attention::cpu {
namespace HWY_NAMESPACE {

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#ifndef BACKPLANE_DPBF16_TARGET
#define BACKPLANE_DPBF16_TARGET __attribute__((target("avx512bf16")))
#endif

// One bf16 pair as the 32-bit value vdpbf16ps broadcasts (the compiler folds it into the
// instruction's {1to16} memory operand).
BACKPLANE_DPBF16_TARGET HWY_INLINE __m512bh BroadcastPair(const void* pair) {
  int32_t bits;
  std::memcpy(&bits, pair, sizeof(bits));
  return reinterpret_cast<__m512bh>(_mm512_set1_epi32(bits));
}

// R keys x NV query vectors of S^T: st[r * bq + 16 v + lane] for keys k[r * k_rs ...].
template <int R, int NV>
BACKPLANE_DPBF16_TARGET HWY_INLINE void DpQKTile(const uint16_t* k, int64_t k_rs,
                                                 const uint32_t* qtp, int64_t bq, int64_t pairs,
                                                 float* st) {
  __m512 acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_setzero_ps();
  for (int64_t p = 0; p < pairs; ++p) {
    __m512bh q[NV];
    for (int v = 0; v < NV; ++v)
      q[v] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(qtp + p * bq + 16 * v));
    for (int r = 0; r < R; ++r) {
      const __m512bh kp = BroadcastPair(k + r * k_rs + 2 * p);
      for (int v = 0; v < NV; ++v) acc[r][v] = _mm512_dpbf16_ps(acc[r][v], kp, q[v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) _mm512_storeu_ps(st + r * bq + 16 * v, acc[r][v]);
}

// S^T rows [0, nk) of a block: bq = 16 NV queries, `pairs` head_dim pairs of each K row.
template <int NV>
BACKPLANE_DPBF16_TARGET HWY_INLINE void DpQK(const uint16_t* k, int64_t k_rs, const uint32_t* qtp,
                                             int64_t bq, int64_t pairs, int64_t nk, float* st) {
  constexpr int kRows = 24 / NV;  // 24 accumulators, 8 registers for the operands
  int64_t j = 0;
  for (; j + kRows <= nk; j += kRows)
    DpQKTile<kRows, NV>(k + j * k_rs, k_rs, qtp, bq, pairs, st + j * bq);
  for (; j + 4 <= nk; j += 4) DpQKTile<4, NV>(k + j * k_rs, k_rs, qtp, bq, pairs, st + j * bq);
  for (; j < nk; ++j) DpQKTile<1, NV>(k + j * k_rs, k_rs, qtp, bq, pairs, st + j * bq);
}

// O rows [i0, i0 + R) x CV head_dim vectors from column c0: O = alpha O + P V over kpairs
// key pairs. pp[jj * bq + i]: the probabilities of keys 2jj, 2jj + 1 for query i, as bf16;
// vp[(jj * dvp + c) * 2 + {0, 1}]: V of those keys at column c.
template <int R, int CV>
BACKPLANE_DPBF16_TARGET HWY_INLINE void DpPVTile(const uint32_t* pp, int64_t bq, int64_t i0,
                                                 const uint16_t* vp, int64_t dvp, int64_t c0,
                                                 int64_t kpairs, const float* alpha, float* o) {
  __m512 acc[R][CV];
  for (int r = 0; r < R; ++r) {
    const __m512 al = _mm512_set1_ps(alpha[i0 + r]);
    for (int c = 0; c < CV; ++c)
      acc[r][c] = _mm512_mul_ps(_mm512_loadu_ps(o + (i0 + r) * dvp + c0 + 16 * c), al);
  }
  for (int64_t jj = 0; jj < kpairs; ++jj) {
    __m512bh v[CV];
    for (int c = 0; c < CV; ++c)
      v[c] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(vp + (jj * dvp + c0 + 16 * c) * 2));
    for (int r = 0; r < R; ++r) {
      const __m512bh pr = BroadcastPair(pp + jj * bq + i0 + r);
      for (int c = 0; c < CV; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], pr, v[c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < CV; ++c) _mm512_storeu_ps(o + (i0 + r) * dvp + c0 + 16 * c, acc[r][c]);
}

template <int R>
BACKPLANE_DPBF16_TARGET HWY_INLINE void DpPVRows(const uint32_t* pp, int64_t bq, int64_t i0,
                                                 const uint16_t* vp, int64_t dvp, int64_t kpairs,
                                                 const float* alpha, float* o) {
  int64_t c = 0;
  for (; c + 64 <= dvp; c += 64) DpPVTile<R, 4>(pp, bq, i0, vp, dvp, c, kpairs, alpha, o);
  for (; c < dvp; c += 16) DpPVTile<R, 1>(pp, bq, i0, vp, dvp, c, kpairs, alpha, o);
}

// O = alpha O + P V for the block's rows [0, nrows).
BACKPLANE_DPBF16_TARGET HWY_INLINE void DpPV(const uint32_t* pp, int64_t bq, int64_t nrows,
                                             const uint16_t* vp, int64_t dvp, int64_t kpairs,
                                             const float* alpha, float* o) {
  int64_t i = 0;
  for (; i + 6 <= nrows; i += 6) DpPVRows<6>(pp, bq, i, vp, dvp, kpairs, alpha, o);
  for (; i + 2 <= nrows; i += 2) DpPVRows<2>(pp, bq, i, vp, dvp, kpairs, alpha, o);
  for (; i < nrows; ++i) DpPVRows<1>(pp, bq, i, vp, dvp, kpairs, alpha, o);
}

// Decoding: S^T[j][r] = dot(K[j], Q[r]) for R query rows and 16 / R keys at a time, head_dim
// (`depth`, a multiple of 32) in pairs: each lane sums two products per vdpbf16ps, so half the
// instructions of widening K to fp32 and no widening at all. q: the rows as bf16, `dq` apart.
template <int R>
BACKPLANE_DPBF16_TARGET HWY_INLINE void DpDotTree(const uint16_t* k, int64_t lda, const uint16_t* q,
                                                  int64_t dq, int64_t depth, float* st,
                                                  int64_t ldst, const Companion& v) {
  constexpr int KB = 16 / R;
  __m512 acc[16];
  for (int s = 0; s < 16; ++s) acc[s] = _mm512_setzero_ps();
  for (int64_t p = 0; p < depth; p += 32) {
    __m512bh qv[R];
    for (int r = 0; r < R; ++r)
      qv[r] = reinterpret_cast<__m512bh>(_mm512_loadu_si512(q + r * dq + p));
    for (int kk = 0; kk < KB; ++kk) {
      const __m512bh kv = reinterpret_cast<__m512bh>(_mm512_loadu_si512(k + kk * lda + p));
      hwy::Prefetch(k + (kk + 4 * KB) * lda + p);  // as DotTileTree: K streams when decoding
      v.Ask(kk, 2 * p);
      for (int r = 0; r < R; ++r) acc[kk * R + r] = _mm512_dpbf16_ps(acc[kk * R + r], qv[r], kv);
    }
  }
  VF partial[16];
  for (int s = 0; s < 16; ++s) partial[s] = VF{acc[s]};
  StoreDotTree<R>(partial, st, ldst);
}

// One key against R rows (the keys after the last whole DpDotTree).
template <int R>
BACKPLANE_DPBF16_TARGET HWY_INLINE void DpDotOne(const uint16_t* k, const uint16_t* q, int64_t dq,
                                                 int64_t depth, float* st) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t p = 0; p < depth; p += 32) {
    const __m512bh kv = reinterpret_cast<__m512bh>(_mm512_loadu_si512(k + p));
    for (int r = 0; r < R; ++r) {
      const __m512bh qv = reinterpret_cast<__m512bh>(_mm512_loadu_si512(q + r * dq + p));
      acc[r] = _mm512_dpbf16_ps(acc[r], qv, kv);
    }
  }
  for (int r = 0; r < R; ++r) st[r] = _mm512_reduce_add_ps(acc[r]);
}

template <int R>
BACKPLANE_DPBF16_TARGET HWY_INLINE void DpDotRows(int64_t nk, const uint16_t* k, int64_t lda,
                                                  const uint16_t* q, int64_t dq, int64_t depth,
                                                  float* st, int64_t ldst, const Companion& v) {
  constexpr int KB = 16 / R;
  int64_t j = 0;
  for (; j + KB <= nk; j += KB)
    DpDotTree<R>(k + j * lda, lda, q, dq, depth, st + j * ldst, ldst, v.At(j));
  for (; j < nk; ++j) DpDotOne<R>(k + j * lda, q, dq, depth, st + j * ldst);
}

// QKDot's work for bf16 K rows and bf16 Q rows (nrows <= kDotMaxRows, four at a time), the
// first pass asking for v's rows. Not forced inline: its callers are compiled without
// AVX512-BF16.
BACKPLANE_DPBF16_TARGET inline void DpQKDot(int64_t nrows, int64_t bq, int64_t nk,
                                            const uint16_t* k, int64_t lda, const uint16_t* q,
                                            int64_t dq, int64_t depth, float* st,
                                            const Companion& v) {
  if (nrows == 1) return DpDotRows<1>(nk, k, lda, q, dq, depth, st, bq, v);
  if (nrows == 2) return DpDotRows<2>(nk, k, lda, q, dq, depth, st, bq, v);
  for (int64_t r = 0; r < nrows; r += 4)
    DpDotRows<4>(nk, k, lda, q + r * dq, dq, depth, st + r, bq, r == 0 ? v : Companion{});
}
#endif  // AVX3

// Decoding bf16's Q.K: on vdpbf16ps when `pairs` (the plan's choice; AVX3 targets only) from
// the bf16 Q rows q16 (`depth` apart), else K widened to fp32 against the fp32 rows qr; either
// asks for v's rows as it goes (Companion).
HWY_INLINE void QKDotBf16(bool pairs, int64_t nrows, int64_t bq, int64_t nk, const uint16_t* k,
                          int64_t lda, const uint16_t* q16, const float* qr, int64_t dp,
                          int64_t depth, float* st, const Companion& v) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if (pairs) return DpQKDot(nrows, bq, nk, k, lda, q16, depth, depth, st, v);
#else
  (void)pairs;
  (void)q16;
#endif
  QKDot<DType::kBF16>(nrows, bq, nk, k, lda, qr, dp, depth, st, v);
}

}  // namespace HWY_NAMESPACE
}  // namespace backplane::attention::cpu
HWY_AFTER_NAMESPACE();

#endif  // BACKPLANE_ATTENTION_CPU_SDPA_DPBF16_INL_H_
