// The sdpa kernel's fp32 register tiles: the Q.K^T panel and dot-product tiles and the P.V
// tiles, sized to the target's vector registers (sdpa.cpp describes the layouts).
// Included once per SIMD target (sdpa.cpp's foreach_target), hence the toggle guard.
#if defined(BACKPLANE_ATTENTION_CPU_SDPA_TILES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef BACKPLANE_ATTENTION_CPU_SDPA_TILES_INL_H_
#undef BACKPLANE_ATTENTION_CPU_SDPA_TILES_INL_H_
#else
#define BACKPLANE_ATTENTION_CPU_SDPA_TILES_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "common/simd-inl.h"
#include "cpu/problem.hpp"

HWY_BEFORE_NAMESPACE();
namespace backplane::attention::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
using kernels::HWY_NAMESPACE::LoadF;
using kernels::HWY_NAMESPACE::PrefetchToL2;

// Register tiles: 32 vector registers on AVX-512, 16 on AVX2/SSE4.
//   Q.K^T: kQkRows keys x 2 query vectors;  P.V: kPvRows queries x kPvVecs head_dim vectors.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr int kQkRows = 12;
constexpr int kPvRows = 8;
constexpr int kPvVecs = 3;
constexpr int kDotKeys = 4;
#else
constexpr int kQkRows = 6;
constexpr int kPvRows = 4;
constexpr int kPvVecs = 2;
constexpr int kDotKeys = 2;
#endif
// Decoding: at most this many bytes of V rows a kv block (DefaultBlockKeys in
// sdpa_block-inl.h). Measured on AVX2 (Zen 3). On AVX-512 it keeps the tiles' 96 keys for V
// rows of up to 512 bytes (f32 head_dim 128, bf16 256); longer rows take fewer keys there too.
// Smaller budgets on Zen 4 (AVX-512, f32 GQA 32q/8kv, alternating calls): 24 KiB (48 keys) took
// 5-7% more time over 4096 and 16384 keys, 12 KiB (24 keys) 24-32% more; bf16 at 48 keys 2-14%.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr int64_t kDecodeBlockBytes = 48 << 10;
#else
constexpr int64_t kDecodeBlockBytes = 12 << 10;
#endif
// Blocks with at most this many query rows (decoding) take Q.K^T as dot products along
// head_dim instead of broadcasting K: K is then streamed with full-vector loads.
constexpr int64_t kDotMaxRows = 8;
constexpr float kLog2e = 1.4426950408889634f;

// Decoding reads each K and V row once, K for Q.K and then V for P.V: while one loop streams
// its rows it asks for the other stream's next rows into L2, a line for each line it reads
// (row j of `rows`, `stride` bytes apart, at the byte offset it reads in its own row j), so
// the memory stays busy with neither a burst that fills the core's miss buffers nor lines
// that push the loop's own out of L1. NULL rows: none. A prefetch never faults, so a last
// block shorter than the one asking costs a few lines past its end, no more.
struct Companion {
  const char* rows = nullptr;
  int64_t stride = 0;
  Companion At(int64_t row, int64_t byte = 0) const {
    return rows ? Companion{rows + row * stride + byte, stride} : Companion{};
  }
  // Line `byte` of row j, once per 64-byte line.
  HWY_INLINE void Ask(int64_t j, int64_t byte) const {
    if (rows && byte % 64 == 0) PrefetchToL2(rows + j * stride + byte);
  }
};

// ------------------------------------------------------------------ register tiles

// S^T rows from a K panel: kQkRows keys per tile, A(r, p) at tile[p * kQkRows + r]; every tile
// is whole (the panel pads with zero keys), so C gets round_up(rows, kQkRows) rows.
template <int NR>
HWY_INLINE void TileQKPanel(int64_t rows, const float* HWY_RESTRICT tiles, const float* b,
                            int64_t ldb, int64_t depth, float* c, int64_t ldc) {
  const DF d;
  const size_t N = hn::Lanes(d);
  for (int64_t r0 = 0; r0 < rows; r0 += kQkRows) {
    const float* HWY_RESTRICT a = tiles + r0 * depth;
    VF acc[kQkRows][NR];
    for (int r = 0; r < kQkRows; ++r)
      for (int v = 0; v < NR; ++v) acc[r][v] = hn::Zero(d);
    for (int64_t p = 0; p < depth; ++p) {
      VF bv[NR];
      for (int v = 0; v < NR; ++v) bv[v] = hn::LoadU(d, b + p * ldb + v * N);
      for (int r = 0; r < kQkRows; ++r) {
        const VF av = hn::Set(d, a[p * kQkRows + r]);
        for (int v = 0; v < NR; ++v) acc[r][v] = hn::MulAdd(av, bv[v], acc[r][v]);
      }
    }
    float* cr = c + r0 * ldc;
    for (int r = 0; r < kQkRows; ++r)
      for (int v = 0; v < NR; ++v) hn::StoreU(acc[r][v], d, cr + r * ldc + v * N);
  }
}

// K or V elements of storage T (fp32, or bf16 read straight from the caller's rows when
// decoding, widened in registers: no converted copy).
template <DType T>
using Elem = typename Storage<T>::type;

// Few query rows (decoding): S^T[j][r] = dot(K[j], Q[r]) along head_dim, for R rows and KB
// keys at a time; Q rows are zero padded to dp, K rows are read with full (then masked) loads.
// Rows of bf16 K need whole vectors (depth a multiple of the lanes).
template <int R, int KB, DType T = DType::kF32>
HWY_INLINE void DotTile(const Elem<T>* HWY_RESTRICT k, int64_t lda, const float* HWY_RESTRICT q,
                        int64_t dp, int64_t depth, float* HWY_RESTRICT st, int64_t ldst) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  VF acc[R][KB];
  for (int r = 0; r < R; ++r)
    for (int kk = 0; kk < KB; ++kk) acc[r][kk] = hn::Zero(d);
  int64_t p = 0;
  for (; p + N <= depth; p += N) {
    VF kv[KB];
    for (int kk = 0; kk < KB; ++kk) kv[kk] = LoadF<T>(d, k + kk * lda, p);
    for (int r = 0; r < R; ++r) {
      const VF qv = hn::LoadU(d, q + r * dp + p);
      for (int kk = 0; kk < KB; ++kk) acc[r][kk] = hn::MulAdd(qv, kv[kk], acc[r][kk]);
    }
  }
  if constexpr (T == DType::kF32) {
    if (p < depth) {
      const auto tail = hn::FirstN(d, static_cast<size_t>(depth - p));
      VF kv[KB];
      for (int kk = 0; kk < KB; ++kk) kv[kk] = hn::MaskedLoad(tail, d, k + kk * lda + p);
      for (int r = 0; r < R; ++r) {
        const VF qv = hn::LoadU(d, q + r * dp + p);
        for (int kk = 0; kk < KB; ++kk) acc[r][kk] = hn::MulAdd(qv, kv[kk], acc[r][kk]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int kk = 0; kk < KB; ++kk) st[kk * ldst + r] = hn::GetLane(hn::SumOfLanes(d, acc[r][kk]));
}

// Sums each of the N accumulators a[0..N) (N = lanes, 4, 8 or 16) into one lane of the result,
// in log2(N) steps of shuffles and adds instead of N horizontal reductions. Source s lands in
// lane TreeLane(s).
constexpr int kLanes = static_cast<int>(HWY_LANES(float));
// Vector registers the tiles may count on.
constexpr int kVectorRegisters = HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3 ? 32 : 16;
constexpr int TreeLane(int s) {
  // 16 lanes: the last step leaves the groups of four sources in block order 0, 2, 1, 3.
  return kLanes == 16 ? ((s / 4 == 1 ? 2 : s / 4 == 2 ? 1 : s / 4) * 4 + s % 4) : s;
}

#if HWY_TARGET != HWY_SCALAR
template <int L>
HWY_INLINE VF ReduceTree(const VF* a) {
  static_assert(L == 4 || L == 8 || L == 16, "ReduceTree handles 4, 8 or 16 lanes");
  const DF d;
  const hn::Repartition<uint64_t, DF> du;
  VF c[L / 2];
  for (int i = 0; i < L / 2; ++i) {
    c[i] = hn::Add(hn::InterleaveLower(d, a[2 * i], a[2 * i + 1]),
                   hn::InterleaveUpper(d, a[2 * i], a[2 * i + 1]));
  }
  VF e[L / 4];
  for (int i = 0; i < L / 4; ++i) {
    const auto lo = hn::BitCast(du, c[2 * i]), hi = hn::BitCast(du, c[2 * i + 1]);
    e[i] = hn::Add(hn::BitCast(d, hn::InterleaveLower(du, lo, hi)),
                   hn::BitCast(d, hn::InterleaveUpper(du, lo, hi)));
  }
  if constexpr (L == 4) {
    return e[0];
  } else {
    VF g[L / 8];
    for (int i = 0; i < L / 8; ++i) {
      g[i] = hn::Add(hn::ConcatUpperUpper(d, e[2 * i + 1], e[2 * i]),
                     hn::ConcatLowerLower(d, e[2 * i + 1], e[2 * i]));
    }
    if constexpr (L == 8) {
      return g[0];
    } else {
      return hn::Add(hn::OddEvenBlocks(g[1], g[0]),
                     hn::OddEvenBlocks(hn::SwapAdjacentBlocks(g[1]), hn::SwapAdjacentBlocks(g[0])));
    }
  }
}

// The dot products of R rows x KB keys, each still a vector of partial sums acc[s] (source
// s = key * R + row), reduced into S^T's rows: lanes sources at a time by ReduceTree, and a last
// four (8 lanes, 12 sources) by ReduceTree<4>, whose two halves then hold two partial sums each.
template <int R, int KB = kLanes / R>
HWY_INLINE void StoreDotTree(const VF* acc, float* HWY_RESTRICT st, int64_t ldst) {
  constexpr int kSources = R * KB;
  static_assert(kSources % kLanes == 0 || (kLanes == 8 && kSources % kLanes == 4),
                "whole trees, or one half tree of four on 8 lanes");
  const DF d;
  HWY_ALIGN float sums[kLanes];
  int g = 0;
  for (; g + kLanes <= kSources; g += kLanes) {
    hn::Store(ReduceTree<kLanes>(acc + g), d, sums);
    for (int s = 0; s < kLanes; ++s) st[((g + s) / R) * ldst + (g + s) % R] = sums[TreeLane(s)];
  }
  if constexpr (kSources % kLanes == 4) {
    const hn::Half<DF> dh;
    const VF four = ReduceTree<4>(acc + g);
    hn::Store(hn::Add(hn::LowerHalf(dh, four), hn::UpperHalf(dh, four)), dh, sums);
    for (int s = 0; s < 4; ++s) st[((g + s) / R) * ldst + (g + s) % R] = sums[s];
  }
}

// Keys per DotTileTree for R rows: R x keys accumulators. Eight chains of 4-cycle FMAs on two
// pipes leave no slack (on Zen 3, 1.72 FMAs a cycle against 2.06 with twelve); with 16
// registers on 8 lanes, 12 accumulators (a tree and a half) still leave room for K and Q (four
// rows: 12 + 3 K + 1 Q): bf16 GQA-4 decoding 5% faster there, f32 unchanged. 32 registers: one
// tree of 16.
constexpr int TreeKeys(int r) {
  return kLanes == 8 && kVectorRegisters == 16 ? 12 / r : kLanes / r;
}

// Key kk's vector at column p, asking as it goes: K's row 4 tiles of KB keys ahead (K streams
// from L3/DRAM when decoding) and v's line at the same byte (Companion).
template <int KB, DType T>
HWY_INLINE VF LoadKeyAsking(const Elem<T>* HWY_RESTRICT k, int64_t lda, int kk, int64_t p,
                            const Companion& v) {
  hwy::Prefetch(k + (kk + 4 * KB) * lda + p);
  v.Ask(kk, p * static_cast<int64_t>(sizeof(Elem<T>)));
  return LoadF<T>(DF(), k + kk * lda, p);
}

// R rows x KB keys of dot products, reduced together by StoreDotTree.
template <int R, int KB, DType T>
HWY_INLINE void DotTileTree(const Elem<T>* HWY_RESTRICT k, int64_t lda, const float* HWY_RESTRICT q,
                            int64_t dp, int64_t depth, float* HWY_RESTRICT st, int64_t ldst,
                            const Companion& v) {
  constexpr int kSources = R * KB;
  const DF d;
  const int64_t N = kLanes;
  VF acc[kSources];  // source s = kk * R + r
  for (int s = 0; s < kSources; ++s) acc[s] = hn::Zero(d);
  int64_t p = 0;
  for (; p + N <= depth; p += N) {
    // Every key's vector first, then each Q vector once, where they fit beside the accumulators
    // (a Q vector then feeds KB FMAs); else all Q vectors held, K key by key.
    if constexpr (kSources + KB + 1 <= kVectorRegisters) {
      VF kv[KB];
      for (int kk = 0; kk < KB; ++kk) kv[kk] = LoadKeyAsking<KB, T>(k, lda, kk, p, v);
      for (int r = 0; r < R; ++r) {
        const VF qv = hn::LoadU(d, q + r * dp + p);
        for (int kk = 0; kk < KB; ++kk) acc[kk * R + r] = hn::MulAdd(qv, kv[kk], acc[kk * R + r]);
      }
    } else {
      VF qv[R];
      for (int r = 0; r < R; ++r) qv[r] = hn::LoadU(d, q + r * dp + p);
      for (int kk = 0; kk < KB; ++kk) {
        const VF kv = LoadKeyAsking<KB, T>(k, lda, kk, p, v);
        for (int r = 0; r < R; ++r) acc[kk * R + r] = hn::MulAdd(qv[r], kv, acc[kk * R + r]);
      }
    }
  }
  if constexpr (T == DType::kF32) {
    if (p < depth) {
      const auto tail = hn::FirstN(d, static_cast<size_t>(depth - p));
      VF qv[R];
      for (int r = 0; r < R; ++r) qv[r] = hn::LoadU(d, q + r * dp + p);
      for (int kk = 0; kk < KB; ++kk) {
        const VF kv = hn::MaskedLoad(tail, d, k + kk * lda + p);
        for (int r = 0; r < R; ++r) acc[kk * R + r] = hn::MulAdd(qv[r], kv, acc[kk * R + r]);
      }
    }
  }
  StoreDotTree<R, KB>(acc, st, ldst);
}
#endif  // HWY_TARGET != HWY_SCALAR

template <int R, DType T>
HWY_INLINE void DotRows(int64_t nk, const Elem<T>* k, int64_t lda, const float* q, int64_t dp,
                        int64_t depth, float* st, int64_t ldst, const Companion& v) {
  int64_t j = 0;
#if HWY_TARGET != HWY_SCALAR
  constexpr int KB = TreeKeys(R), kOneTree = kLanes / R;
  for (; j + KB <= nk; j += KB)
    DotTileTree<R, KB, T>(k + j * lda, lda, q, dp, depth, st + j * ldst, ldst, v.At(j));
  if constexpr (KB > kOneTree) {
    for (; j + kOneTree <= nk; j += kOneTree)
      DotTileTree<R, kOneTree, T>(k + j * lda, lda, q, dp, depth, st + j * ldst, ldst, v.At(j));
  }
#else
  (void)v;
#endif
  for (; j + kDotKeys <= nk; j += kDotKeys)
    DotTile<R, kDotKeys, T>(k + j * lda, lda, q, dp, depth, st + j * ldst, ldst);
  for (; j < nk; ++j) DotTile<R, 1, T>(k + j * lda, lda, q, dp, depth, st + j * ldst, ldst);
}

// All nrows (<= kDotMaxRows) rows, four at a time (Q rows past nrows are zeros); the block's
// other lanes are left alone. The first pass over K asks for v's rows (Companion).
template <DType T = DType::kF32>
HWY_INLINE void QKDot(int64_t nrows, int64_t bq, int64_t nk, const Elem<T>* k, int64_t lda,
                      const float* q, int64_t dp, int64_t depth, float* st,
                      const Companion& v = Companion{}) {
  if (nrows == 1) return DotRows<1, T>(nk, k, lda, q, dp, depth, st, bq, v);
  if (nrows == 2) return DotRows<2, T>(nk, k, lda, q, dp, depth, st, bq, v);
  for (int64_t r = 0; r < nrows; r += 4)
    DotRows<4, T>(nk, k, lda, q + r * dp, dp, depth, st + r, bq, r == 0 ? v : Companion{});
}

// Pair order: O rows accumulated from bf16 V rows read as pairs (kPairs below) hold, in each
// group of 2N columns, the N even columns and then the N odd ones, as LoadTwoF reads a bf16 row:
// a bitwise op for each vector where widening a half costs a lane shuffle and a shift (P.V of
// 4 rows x 2 vectors on Zen 3, V in L1: 32 cycles a key against 37, the FMAs' own 32).
// FromPairOrder puts a row back in column order.
HWY_INLINE void FromPairOrder(float* row, int64_t n) {
  const DF d;
  for (int64_t g = 0; g + 2 * kLanes <= n; g += 2 * kLanes) {
    const VF even = hn::LoadU(d, row + g), odd = hn::LoadU(d, row + g + kLanes);
    hn::StoreInterleaved2(even, odd, d, row + g);
  }
}

// O rows: C[r][v] = alpha[r] * C[r][v] + sum_{j < depth} P[j * ldp + r] * V[j * ldv + v * N],
// for MR rows (queries) and NV vectors (head_dim); kPairs: bf16 V read as pairs, C's columns in
// pair order (NV even, v at a group of 2N columns).
template <int MR, int NV, DType T, bool kPairs = false>
HWY_INLINE void TilePV(const float* HWY_RESTRICT pt, int64_t ldp, const Elem<T>* HWY_RESTRICT v,
                       int64_t ldv, int64_t depth, float* HWY_RESTRICT c, int64_t ldc,
                       const float* HWY_RESTRICT alpha, const Companion& next) {
  static_assert(!kPairs || (T == DType::kBF16 && NV % 2 == 0), "pairs: bf16, whole groups");
  const DF d;
  const size_t N = hn::Lanes(d);
  VF acc[MR][NV];
  for (int r = 0; r < MR; ++r) {
    const VF al = hn::Set(d, alpha[r]);
    for (int n = 0; n < NV; ++n) acc[r][n] = hn::Mul(hn::LoadU(d, c + r * ldc + n * N), al);
  }
  for (int64_t j = 0; j < depth; ++j) {
    VF bv[NV];
    for (int n = 0; n < NV; n += kPairs ? 2 : 1) {
      const auto col = static_cast<int64_t>(n * N);
      if constexpr (kPairs) {
        kernels::HWY_NAMESPACE::LoadTwoF<T>(d, v + j * ldv, col, bv[n], bv[n + 1]);
      } else {
        bv[n] = LoadF<T>(d, v + j * ldv, col);
      }
    }
    for (int n = 0; n < NV; ++n) next.Ask(j, static_cast<int64_t>(n * N * sizeof(Elem<T>)));
    for (int r = 0; r < MR; ++r) {
      const VF av = hn::Set(d, pt[j * ldp + r]);
      for (int n = 0; n < NV; ++n) acc[r][n] = hn::MulAdd(av, bv[n], acc[r][n]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int n = 0; n < NV; ++n) hn::StoreU(acc[r][n], d, c + r * ldc + n * N);
}

// The P.V column chunks, in TilePVCols' order: kPvVecs vectors at a time, then 2, then 1.
HWY_INLINE int64_t ChunkVecs(int64_t n, int64_t vecs) {
  if (n + kPvVecs <= vecs) return kPvVecs;
  if (kPvVecs > 2 && n + 2 <= vecs) return 2;
  return 1;
}

// Chunk width for MR rows when V is read as it lies: as many accumulators as the kPvRows x
// kPvVecs tile, at most 8 vectors.
constexpr int WideVecs(int mr) {
  return mr >= kPvRows ? kPvVecs : std::min(8, kPvRows * kPvVecs / mr);
}

// f(std::integral_constant<int, MR>(), r) for the groups of MR rows from row r that P.V's
// tiles take: kPvRows rows at a time, then 4, 2 and 1.
template <class F>
HWY_INLINE void ForRowGroups(int64_t rows, const F& f) {
  int64_t r = 0;
  for (; r + kPvRows <= rows; r += kPvRows) f(std::integral_constant<int, kPvRows>(), r);
  if constexpr (kPvRows > 4) {
    if (r + 4 <= rows) {
      f(std::integral_constant<int, 4>(), r);
      r += 4;
    }
  }
  if (r + 2 <= rows) {
    f(std::integral_constant<int, 2>(), r);
    r += 2;
  }
  if (r < rows) f(std::integral_constant<int, 1>(), r);
}

// MR query rows over all `vecs` head_dim vectors of V's rows as they lie (ldv apart, chunk n
// at v + n * N), in chunks as wide as MR leaves accumulators for (WideVecs), then ChunkVecs'.
// `next`: asked for alongside V's rows (Companion). kPairs: bf16 rows read as pairs (TilePV;
// vecs even), in chunks of whole pairs.
template <int MR, DType T, bool kPairs = false>
HWY_INLINE void TilePVCols(int64_t vecs, const float* pt, int64_t ldp, const Elem<T>* v,
                           int64_t ldv, int64_t depth, float* c, int64_t ldc, const float* alpha,
                           const Companion& next) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(DF()));
  const auto column_bytes = [N](int64_t n) {
    return n * N * static_cast<int64_t>(sizeof(Elem<T>));
  };
  int64_t n = 0;
  if constexpr (kPairs) {
    constexpr int kWide = std::max(2, WideVecs(MR) / 2 * 2);
    for (; n + kWide <= vecs; n += kWide)
      TilePV<MR, kWide, T, true>(pt, ldp, v + n * N, ldv, depth, c + n * N, ldc, alpha,
                                 next.At(0, column_bytes(n)));
    for (; n < vecs; n += 2)
      TilePV<MR, 2, T, true>(pt, ldp, v + n * N, ldv, depth, c + n * N, ldc, alpha,
                             next.At(0, column_bytes(n)));
  } else {
    constexpr int kWide = WideVecs(MR);
    if constexpr (kWide > kPvVecs) {
      for (; n + kWide <= vecs; n += kWide)
        TilePV<MR, kWide, T>(pt, ldp, v + n * N, ldv, depth, c + n * N, ldc, alpha,
                             next.At(0, column_bytes(n)));
    }
    while (n < vecs) {
      const int64_t nv = ChunkVecs(n, vecs);
      const Companion next_n = next.At(0, column_bytes(n));
      if (nv == kPvVecs) {
        TilePV<MR, kPvVecs, T>(pt, ldp, v + n * N, ldv, depth, c + n * N, ldc, alpha, next_n);
      } else if (nv == 2) {
        TilePV<MR, 2, T>(pt, ldp, v + n * N, ldv, depth, c + n * N, ldc, alpha, next_n);
      } else {
        TilePV<MR, 1, T>(pt, ldp, v + n * N, ldv, depth, c + n * N, ldc, alpha, next_n);
      }
      n += nv;
    }
  }
}

// O = alpha O + P V with V's rows as they lie: fp32, or (T bf16, decoding) the caller's bf16
// rows widened in registers, as pairs where kPairs (TilePVCols). The first group of rows asks
// for next's rows (Companion); the others read the same V rows again.
template <DType T = DType::kF32, bool kPairs = false>
HWY_INLINE void TilePVRows(int64_t rows, int64_t vecs, const float* pt, int64_t ldp,
                           const Elem<T>* v, int64_t ldv, int64_t depth, float* c, int64_t ldc,
                           const float* alpha, const Companion& next = Companion{}) {
  ForRowGroups(rows, [&](auto mr, int64_t r) {
    TilePVCols<decltype(mr)::value, T, kPairs>(vecs, pt + r, ldp, v, ldv, depth, c + r * ldc, ldc,
                                               alpha + r, r == 0 ? next : Companion{});
  });
}

// O = alpha O + P V with V from the per-head panels (Panels): chunk n at v + n * N *
// panel_keys, its rows one chunk wide, key0 the block's first key within the panels. Chunk by
// chunk, every group of rows while the chunk is in L1: a block's chunks lie panel_keys rows
// apart (64 KiB for 1024 keys of two vectors), on the same L1 sets, so a group of rows going
// over all of them would find V evicted by the time the next group reads it (on Zen 3 the
// order moved f32 prefill within the noise; P.V there runs at 87% of the FMA peak, Q.K^T 95%).
HWY_INLINE void TilePVPanels(int64_t rows, int64_t vecs, const float* pt, int64_t ldp,
                             const float* v, int64_t panel_keys, int64_t key0, int64_t depth,
                             float* c, int64_t ldc, const float* alpha) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(DF()));
  for (int64_t n = 0; n < vecs;) {
    const int64_t nv = ChunkVecs(n, vecs);
    const float* vc = v + n * N * panel_keys + key0 * nv * N;
    ForRowGroups(rows, [&](auto mr, int64_t r) {
      constexpr int MR = decltype(mr)::value;
      const float* pr = pt + r;
      float* cr = c + r * ldc + n * N;
      if (nv == kPvVecs) {
        TilePV<MR, kPvVecs, DType::kF32>(pr, ldp, vc, nv * N, depth, cr, ldc, alpha + r, {});
      } else if (nv == 2) {
        TilePV<MR, 2, DType::kF32>(pr, ldp, vc, nv * N, depth, cr, ldc, alpha + r, {});
      } else {
        TilePV<MR, 1, DType::kF32>(pr, ldp, vc, nv * N, depth, cr, ldc, alpha + r, {});
      }
    });
    n += nv;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace backplane::attention::cpu
HWY_AFTER_NAMESPACE();

#endif  // BACKPLANE_ATTENTION_CPU_SDPA_TILES_INL_H_
