// The sdpa implementation: fused, tiled attention with an online softmax (FlashAttention-2
// style). The score matrix exists only as one [kv block x query block] tile per worker.
//
// Layouts: the score tile is transposed, keys in rows and queries across the vector lanes:
//   S^T[j][i] = sum_p K[j][p] * Q^T[p][i]     K scalars broadcast, Q^T packed once per block
//   O[i][c]   = alpha[i] * O[i][c] + sum_j P^T[j][i] * V[j][c]
//                                             P scalars broadcast (contiguous in P^T's rows),
//                                             V rows loaded as vectors
// so the softmax max/sum over keys is a vertical max/add across S^T's rows: no horizontal
// reductions. K and V come from per-head panels (Panels) for blocks of queries, and straight
// from their rows when decoding (QKDot). bf16 runs on AMX where it can (RunBlockAmx).
//
// Compiled once per SIMD target (Highway foreach_target) and dispatched at runtime.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/sdpa.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
// foreach_target.h first: it re-includes this file once per target.
#include <hwy/aligned_allocator.h>
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "cpu/problem.hpp"
#include "common/thread_pool.hpp"

HWY_BEFORE_NAMESPACE();
namespace backplane::attention::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

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
// Blocks with at most this many query rows (decoding) take Q.K^T as dot products along
// head_dim instead of broadcasting K: K is then streamed with full-vector loads.
constexpr int64_t kDotMaxRows = 8;
constexpr float kLog2e = 1.4426950408889634f;

// ------------------------------------------------------------------ math

// 2^x for x <= 0 (x may be -inf), as 2^round(x) * p(f), f = x - round(x) in [-0.5, 0.5].
// kDegree 6: Cephes' exp2f polynomial, relative error ~2e-7 (fp32 probabilities); kDegree 4:
// Taylor, ~4e-5 (probabilities rounded to bf16 anyway). 0 below -126: never a denormal.
template <int kDegree>
HWY_INLINE VF Poly2(DF d, VF f) {
  if constexpr (kDegree == 6) {
    VF p = hn::Set(d, 1.535336188319500e-4f);
    p = hn::MulAdd(p, f, hn::Set(d, 1.339887440266574e-3f));
    p = hn::MulAdd(p, f, hn::Set(d, 9.618437357674640e-3f));
    p = hn::MulAdd(p, f, hn::Set(d, 5.550332471162809e-2f));
    p = hn::MulAdd(p, f, hn::Set(d, 2.402264791363012e-1f));
    p = hn::MulAdd(p, f, hn::Set(d, 6.931472028550421e-1f));
    return hn::MulAdd(p, f, hn::Set(d, 1.0f));
  } else {
    static_assert(kDegree == 4, "degree 4 or 6");
    VF p = hn::Set(d, 9.6181291076284772e-3f);
    p = hn::MulAdd(p, f, hn::Set(d, 5.5504108664821580e-2f));
    p = hn::MulAdd(p, f, hn::Set(d, 2.4022650695910071e-1f));
    p = hn::MulAdd(p, f, hn::Set(d, 6.9314718055994531e-1f));
    return hn::MulAdd(p, f, hn::Set(d, 1.0f));
  }
}

template <int kDegree = 6>
HWY_INLINE VF Exp2(DF d, VF x) {
  x = hn::Max(x, hn::Set(d, -127.0f));
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  // vrndscaleps + vscalefps: the 2^n scaling in one instruction; results below 2^-126 become 0
  // (denormal probabilities would only slow the products down).
  const VF n{_mm512_roundscale_ps(x.raw, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
  const VF p = Poly2<kDegree>(d, hn::Sub(x, n));
  return hn::IfThenZeroElse(hn::Lt(x, hn::Set(d, -126.0f)), VF{_mm512_scalef_ps(p.raw, n.raw)});
#else
  const auto n = hn::NearestInt(x);
  const VF p = Poly2<kDegree>(d, hn::Sub(x, hn::ConvertTo(d, n)));
  const hn::RebindToSigned<DF> di;
  const auto bits = hn::ShiftLeft<23>(hn::Add(n, hn::Set(di, 127)));
  return hn::Mul(p, hn::BitCast(d, bits));
#endif
}

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

// Few query rows (decoding): S^T[j][r] = dot(K[j], Q[r]) along head_dim, for R rows and KB
// keys at a time; Q rows are zero padded to dp, K rows are read with full (then masked) loads.
template <int R, int KB>
HWY_INLINE void DotTile(const float* HWY_RESTRICT k, int64_t lda, const float* HWY_RESTRICT q,
                        int64_t dp, int64_t depth, float* HWY_RESTRICT st, int64_t ldst) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  VF acc[R][KB];
  for (int r = 0; r < R; ++r)
    for (int kk = 0; kk < KB; ++kk) acc[r][kk] = hn::Zero(d);
  int64_t p = 0;
  for (; p + N <= depth; p += N) {
    VF kv[KB];
    for (int kk = 0; kk < KB; ++kk) kv[kk] = hn::LoadU(d, k + kk * lda + p);
    for (int r = 0; r < R; ++r) {
      const VF qv = hn::LoadU(d, q + r * dp + p);
      for (int kk = 0; kk < KB; ++kk) acc[r][kk] = hn::MulAdd(qv, kv[kk], acc[r][kk]);
    }
  }
  if (p < depth) {
    const auto tail = hn::FirstN(d, static_cast<size_t>(depth - p));
    VF kv[KB];
    for (int kk = 0; kk < KB; ++kk) kv[kk] = hn::MaskedLoad(tail, d, k + kk * lda + p);
    for (int r = 0; r < R; ++r) {
      const VF qv = hn::LoadU(d, q + r * dp + p);
      for (int kk = 0; kk < KB; ++kk) acc[r][kk] = hn::MulAdd(qv, kv[kk], acc[r][kk]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int kk = 0; kk < KB; ++kk) st[kk * ldst + r] = hn::GetLane(hn::SumOfLanes(d, acc[r][kk]));
}

// Sums each of the N accumulators a[0..N) (N = lanes, 4, 8 or 16) into one lane of the result,
// in log2(N) steps of shuffles and adds instead of N horizontal reductions. Source s lands in
// lane TreeLane(s).
constexpr int kLanes = static_cast<int>(HWY_LANES(float));
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

// R rows x (lanes / R) keys of dot products, reduced together by ReduceTree.
template <int R>
HWY_INLINE void DotTileTree(const float* HWY_RESTRICT k, int64_t lda, const float* HWY_RESTRICT q,
                            int64_t dp, int64_t depth, float* HWY_RESTRICT st, int64_t ldst) {
  constexpr int KB = kLanes / R;
  const DF d;
  const int64_t N = kLanes;
  VF acc[kLanes];  // source s = kk * R + r
  for (int s = 0; s < kLanes; ++s) acc[s] = hn::Zero(d);
  int64_t p = 0;
  for (; p + N <= depth; p += N) {
    VF qv[R];
    for (int r = 0; r < R; ++r) qv[r] = hn::LoadU(d, q + r * dp + p);
    for (int kk = 0; kk < KB; ++kk) {
      const VF kv = hn::LoadU(d, k + kk * lda + p);
      hwy::Prefetch(k + (kk + 4 * KB) * lda + p);  // K streams from L3/DRAM when decoding
      for (int r = 0; r < R; ++r) acc[kk * R + r] = hn::MulAdd(qv[r], kv, acc[kk * R + r]);
    }
  }
  if (p < depth) {
    const auto tail = hn::FirstN(d, static_cast<size_t>(depth - p));
    VF qv[R];
    for (int r = 0; r < R; ++r) qv[r] = hn::LoadU(d, q + r * dp + p);
    for (int kk = 0; kk < KB; ++kk) {
      const VF kv = hn::MaskedLoad(tail, d, k + kk * lda + p);
      for (int r = 0; r < R; ++r) acc[kk * R + r] = hn::MulAdd(qv[r], kv, acc[kk * R + r]);
    }
  }
  HWY_ALIGN float sums[kLanes];
  hn::Store(ReduceTree<kLanes>(acc), d, sums);
  for (int s = 0; s < kLanes; ++s) st[(s / R) * ldst + s % R] = sums[TreeLane(s)];
}
#endif  // HWY_TARGET != HWY_SCALAR

template <int R>
HWY_INLINE void DotRows(int64_t nk, const float* k, int64_t lda, const float* q, int64_t dp,
                        int64_t depth, float* st, int64_t ldst) {
  int64_t j = 0;
#if HWY_TARGET != HWY_SCALAR
  constexpr int KB = kLanes / R;
  for (; j + KB <= nk; j += KB) DotTileTree<R>(k + j * lda, lda, q, dp, depth, st + j * ldst, ldst);
#endif
  for (; j + kDotKeys <= nk; j += kDotKeys)
    DotTile<R, kDotKeys>(k + j * lda, lda, q, dp, depth, st + j * ldst, ldst);
  for (; j < nk; ++j) DotTile<R, 1>(k + j * lda, lda, q, dp, depth, st + j * ldst, ldst);
}

// All nrows (<= kDotMaxRows) rows, four at a time (Q rows past nrows are zeros); the block's
// other lanes are left alone.
HWY_INLINE void QKDot(int64_t nrows, int64_t bq, int64_t nk, const float* k, int64_t lda,
                      const float* q, int64_t dp, int64_t depth, float* st) {
  if (nrows == 1) return DotRows<1>(nk, k, lda, q, dp, depth, st, bq);
  if (nrows == 2) return DotRows<2>(nk, k, lda, q, dp, depth, st, bq);
  for (int64_t r = 0; r < nrows; r += 4) DotRows<4>(nk, k, lda, q + r * dp, dp, depth, st + r, bq);
}

// O rows: C[r][v] = alpha[r] * C[r][v] + sum_{j < depth} P[j * ldp + r] * V[j * ldv + v * N],
// for MR rows (queries) and NV vectors (head_dim).
template <int MR, int NV>
HWY_INLINE void TilePV(const float* HWY_RESTRICT pt, int64_t ldp, const float* HWY_RESTRICT v,
                       int64_t ldv, int64_t depth, float* HWY_RESTRICT c, int64_t ldc,
                       const float* HWY_RESTRICT alpha) {
  const DF d;
  const size_t N = hn::Lanes(d);
  VF acc[MR][NV];
  for (int r = 0; r < MR; ++r) {
    const VF al = hn::Set(d, alpha[r]);
    for (int n = 0; n < NV; ++n) acc[r][n] = hn::Mul(hn::LoadU(d, c + r * ldc + n * N), al);
  }
  for (int64_t j = 0; j < depth; ++j) {
    VF bv[NV];
    for (int n = 0; n < NV; ++n) bv[n] = hn::LoadU(d, v + j * ldv + n * N);
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

// MR query rows over all `vecs` head_dim vectors, chunk by chunk (ChunkVecs). V is either
// rows ldv apart (chunk n at v + n * N), or, when panel_keys > 0, the per-head panels (see
// Panels): chunk n at v + n * N * panel_keys, its rows one chunk wide, key0 the block's first
// key within the panels.
template <int MR>
HWY_INLINE void TilePVCols(int64_t vecs, const float* pt, int64_t ldp, const float* v, int64_t ldv,
                           int64_t panel_keys, int64_t key0, int64_t depth, float* c, int64_t ldc,
                           const float* alpha) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(DF()));
  for (int64_t n = 0; n < vecs;) {
    const int64_t nv = ChunkVecs(n, vecs);
    const float* vc = v + n * N;
    int64_t lc = ldv;
    if (panel_keys > 0) {
      vc = v + n * N * panel_keys + key0 * nv * N;
      lc = nv * N;
    }
    if (nv == kPvVecs) {
      TilePV<MR, kPvVecs>(pt, ldp, vc, lc, depth, c + n * N, ldc, alpha);
    } else if (nv == 2) {
      TilePV<MR, 2>(pt, ldp, vc, lc, depth, c + n * N, ldc, alpha);
    } else {
      TilePV<MR, 1>(pt, ldp, vc, lc, depth, c + n * N, ldc, alpha);
    }
    n += nv;
  }
}

HWY_INLINE void TilePVRows(int64_t rows, int64_t vecs, const float* pt, int64_t ldp, const float* v,
                           int64_t ldv, int64_t panel_keys, int64_t key0, int64_t depth, float* c,
                           int64_t ldc, const float* alpha) {
  int64_t r = 0;
  for (; r + kPvRows <= rows; r += kPvRows)
    TilePVCols<kPvRows>(vecs, pt + r, ldp, v, ldv, panel_keys, key0, depth, c + r * ldc, ldc,
                        alpha + r);
  if constexpr (kPvRows > 4) {
    if (r + 4 <= rows) {
      TilePVCols<4>(vecs, pt + r, ldp, v, ldv, panel_keys, key0, depth, c + r * ldc, ldc,
                    alpha + r);
      r += 4;
    }
  }
  if (r + 2 <= rows) {
    TilePVCols<2>(vecs, pt + r, ldp, v, ldv, panel_keys, key0, depth, c + r * ldc, ldc, alpha + r);
    r += 2;
  }
  if (r < rows) {
    TilePVCols<1>(vecs, pt + r, ldp, v, ldv, panel_keys, key0, depth, c + r * ldc, ldc, alpha + r);
  }
}

// ------------------------------------------------------------------ operand loading

// dst[0..n) = float(src[i * stride]).
HWY_INLINE void LoadRow(DType t, const void* src, int64_t stride, int64_t n, float* dst) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  if (t == DType::kF32) {
    const auto* s = static_cast<const float*>(src);
    if (stride == 1) {
      std::memcpy(dst, s, static_cast<size_t>(n) * sizeof(float));
    } else {
      for (int64_t i = 0; i < n; ++i) dst[i] = s[i * stride];
    }
    return;
  }
  const auto* s = static_cast<const uint16_t*>(src);
  int64_t i = 0;
  if (stride == 1) {
    const hn::Rebind<hwy::bfloat16_t, DF> dbf;
    const hn::Rebind<hwy::float16_t, DF> dh;
    if (t == DType::kBF16) {
      for (; i + N <= n; i += N)
        hn::StoreU(
            hn::PromoteTo(d, hn::LoadU(dbf, reinterpret_cast<const hwy::bfloat16_t*>(s + i))), d,
            dst + i);
    } else {
      for (; i + N <= n; i += N)
        hn::StoreU(hn::PromoteTo(d, hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(s + i))),
                   d, dst + i);
    }
  }
  if (t == DType::kBF16) {
    for (; i < n; ++i) dst[i] = bf16_to_f32(s[i * stride]);
  } else {
    for (; i < n; ++i) dst[i] = f16_to_f32(s[i * stride]);
  }
}

// ------------------------------------------------------------------ scratch

// Per-thread buffers, grown on demand and kept: steady-state calls allocate nothing.
struct Scratch {
  hwy::AlignedFreeUniquePtr<float[]> buf;
  size_t cap = 0;
  float* get(size_t n) {
    if (n > cap) {
      buf = hwy::AllocateAligned<float>(n);
      cap = buf ? n : 0;
      if (!buf) throw std::bad_alloc();
    }
    return buf.get();
  }
};
Scratch& WorkerScratch() {
  static thread_local Scratch s;
  return s;
}
Scratch& PartialScratch() {
  static thread_local Scratch s;
  return s;
}

// ------------------------------------------------------------------ the block loop

struct Plan {
  int nr;        // query vectors per tile (1 or 2)
  int64_t bq;    // queries (rows) per block = nr * lanes
  int64_t bk;    // keys per kv block
  int64_t dp;    // head_dim rounded up to whole vectors (Q rows of the dot path)
  int64_t dpad;  // head_dim rounded up to 32 (AMX tiles)
  int64_t dvp;   // head_dim_v rounded up to whole vectors (O's row length)
  int64_t rows;  // rows per kv head: group * seq_q (grouped heads share K and V)
  int64_t row_blocks;
  int64_t splits;     // kv splits per block (split-KV when there are few blocks)
  int64_t split_len;  // keys per split, a multiple of bk
  uint64_t call = 0;  // distinct per kernel call: keys per-thread caches (AMX packed V)
  int64_t partial_floats() const { return bq * dvp + 2 * bq; }  // O, m, l of one split
};

// Per-block state in the worker's scratch.
struct BlockBuffers {
  float* qt;          // [d][bq]  Q^T (f32)
  float* qr;          // [bq][dp] Q rows (f32, zero padded), for the dot-product path
  float* st;          // [bk][bq] scores, then probabilities
  float* o;           // [bq][dvp] output accumulator
  float* m;           // [bq] running max (log2 domain)
  float* l;           // [bq] running sum
  float* alpha;       // [bq]
  float* m_use;       // [bq] the max the probabilities are taken against
  float* lim;         // [bq] last visible key (causal), as float
  float* kbuf;        // [bk][d] K block converted to f32 (when not f32 with unit stride)
  float* vbuf;        // [bk][dvp] V block converted to f32 and padded
  float* bias;        // [bk][bq] mask bias (log2 domain); AMX: P pairs afterwards
  float* pa;          // AMX: [bq][(bk + 32) / 32 * 16] P rows as bf16 pairs
  float* row;         // one K or V row converted to f32 (panel packing)
  int64_t* mask_off;  // [bq] mask offsets of the block's rows
};

size_t AlignUp(size_t n) {
  return (n + 15) / 16 * 16;
}

BlockBuffers AllocBuffers(const Problem& p, const Plan& plan) {
  const size_t bq = static_cast<size_t>(plan.bq), bk = static_cast<size_t>(plan.bk);
  const size_t d = static_cast<size_t>(p.head_dim), dvp = static_cast<size_t>(plan.dvp);
  const size_t dp = static_cast<size_t>(plan.dp), dpad = static_cast<size_t>(plan.dpad);
  // The AMX path keeps bf16 pairs in qt, kbuf, vbuf (head_dim padded to 32) and qr (P pairs).
  const size_t dmax = std::max(d, dpad / 2);
  const size_t pairs_max = (bk + 32) / 32 * 16;  // key pairs of a block, shifted, in tiles
  BlockBuffers b;
  struct Slot {
    float** ptr;
    size_t floats;
  } slots[] = {{&b.qt, dmax * bq},
               {&b.qr, bq * std::max(dp, pairs_max)},
               {&b.st, bk * bq},
               {&b.o, bq * dvp},
               {&b.m, bq},
               {&b.l, bq},
               {&b.alpha, bq},
               {&b.m_use, bq},
               {&b.lim, bq},
               {&b.kbuf, bk * dmax},
               {&b.vbuf, bk * dvp},
               {&b.bias, bk * bq},
               {&b.pa, bq * pairs_max},
               {&b.row, std::max(d, dvp)}};
  float* mask_off = nullptr;
  size_t total = AlignUp(2 * bq);  // mask_off: bq int64
  for (const Slot& slot : slots) total += AlignUp(slot.floats);
  float* base = WorkerScratch().get(total);
  for (const Slot& slot : slots) {
    *slot.ptr = base;
    base += AlignUp(slot.floats);
  }
  mask_off = base;
  b.mask_off = reinterpret_cast<int64_t*>(mask_off);
  return b;
}

// out[b, h, qi, :] = O[i][:] / l[i] for the block's rows; zeros where l == 0 (no key seen).
void StoreBlock(const Problem& p, const Plan& plan, int64_t b, int64_t hk, int64_t rb,
                const float* o, const float* l) {
  const int64_t bq = plan.bq;
  const int64_t row0 = rb * bq;
  const int64_t nrows = std::min(bq, plan.rows - row0);
  const int64_t cs = p.out.stride[3];
  for (int64_t i = 0; i < nrows; ++i) {
    const int64_t r = row0 + i, g = r / p.seq_q, qi = r % p.seq_q;
    const int64_t h = hk * p.group() + g;
    const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
    const float* src = o + i * plan.dvp;
    const int64_t base = b * p.out.stride[0] + h * p.out.stride[1] + qi * p.out.stride[2];
    switch (p.dtype) {
      case DType::kF32: {
        auto* dst = static_cast<float*>(const_cast<void*>(p.out.data)) + base;
        for (int64_t c = 0; c < p.head_dim_v; ++c) dst[c * cs] = src[c] * inv;
        break;
      }
      case DType::kBF16: {
        auto* dst = static_cast<uint16_t*>(const_cast<void*>(p.out.data)) + base;
        for (int64_t c = 0; c < p.head_dim_v; ++c) dst[c * cs] = f32_to_bf16(src[c] * inv);
        break;
      }
      case DType::kF16: {
        auto* dst = static_cast<uint16_t*>(const_cast<void*>(p.out.data)) + base;
        for (int64_t c = 0; c < p.head_dim_v; ++c) dst[c * cs] = f32_to_f16(src[c] * inv);
        break;
      }
    }
  }
}

// Fills the mask bias tile of keys [j0, j0 + nk) for the block's rows (log2 domain).
void MaskTile(const Problem& p, const int64_t* mask_off, int64_t nrows, int64_t bq, int64_t j0,
              int64_t nk, float* bias) {
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < nk; ++j) {
    const int64_t joff = (j0 + j) * p.mask.stride[3];
    float* row = bias + j * bq;
    switch (p.mask_kind) {
      case MaskKind::kBool: {
        const auto* m = static_cast<const uint8_t*>(p.mask.data) + joff;
        for (int64_t i = 0; i < nrows; ++i) row[i] = m[mask_off[i]] ? 0.0f : neg_inf;
        break;
      }
      case MaskKind::kAdditiveF32: {
        const auto* m = static_cast<const float*>(p.mask.data) + joff;
        for (int64_t i = 0; i < nrows; ++i) row[i] = m[mask_off[i]] * kLog2e;
        break;
      }
      case MaskKind::kAdditiveBF16: {
        const auto* m = static_cast<const uint16_t*>(p.mask.data) + joff;
        for (int64_t i = 0; i < nrows; ++i) row[i] = bf16_to_f32(m[mask_off[i]]) * kLog2e;
        break;
      }
      case MaskKind::kAdditiveF16: {
        const auto* m = static_cast<const uint16_t*>(p.mask.data) + joff;
        for (int64_t i = 0; i < nrows; ++i) row[i] = f16_to_f32(m[mask_off[i]]) * kLog2e;
        break;
      }
      case MaskKind::kNone:
        break;
    }
    for (int64_t i = nrows; i < bq; ++i) row[i] = 0.0f;
  }
}

// The scaled, masked score of S^T row j (log2 domain): x = s * scale2 + bias, -inf past a
// row's causal limit.
struct ScoreArgs {
  const float* st;
  const float* bias;
  int64_t bq, j0;
  float scale2;
  bool has_mask, need_causal;
};
HWY_INLINE VF Score(DF d, const ScoreArgs& a, const VF& scale2, const VF& lim, int64_t j,
                    int64_t off) {
  VF x = hn::Mul(hn::LoadU(d, a.st + j * a.bq + off), scale2);
  if (a.has_mask) x = hn::Add(x, hn::LoadU(d, a.bias + j * a.bq + off));
  if (a.need_causal) {
    const VF jv = hn::Set(d, static_cast<float>(a.j0 + j));
    x = hn::IfThenElse(hn::Gt(jv, lim), hn::Set(d, -std::numeric_limits<float>::infinity()), x);
  }
  return x;
}

// Online softmax, first pass over one S^T tile of nk keys: the new running max m, the shift
// m_use the probabilities take (0 for rows that saw no key yet, so that exp2(-inf - m_use) is
// 0, not NaN), and the rescale factor alpha = 2^(m_old - m_use).
template <int NR>
HWY_INLINE void SoftmaxMax(const BlockBuffers& buf, const ScoreArgs& a, int64_t nk) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const VF neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  const VF scale2 = hn::Set(d, a.scale2);
  for (int v = 0; v < NR; ++v) {
    const int64_t off = v * N;
    const VF lim = hn::LoadU(d, buf.lim + off);
    const VF m_old = hn::LoadU(d, buf.m + off);
    VF mx0 = m_old, mx1 = m_old;
    int64_t j = 0;
    for (; j + 2 <= nk; j += 2) {
      mx0 = hn::Max(mx0, Score(d, a, scale2, lim, j, off));
      mx1 = hn::Max(mx1, Score(d, a, scale2, lim, j + 1, off));
    }
    if (j < nk) mx0 = hn::Max(mx0, Score(d, a, scale2, lim, j, off));
    const VF mx = hn::Max(mx0, mx1);
    const VF m_use = hn::IfThenZeroElse(hn::Eq(mx, neg_inf), mx);
    hn::StoreU(mx, d, buf.m + off);
    hn::StoreU(m_use, d, buf.m_use + off);
    hn::StoreU(Exp2(d, hn::Sub(m_old, m_use)), d, buf.alpha + off);
  }
}

// Second pass: P^T[j] = 2^(x_j - m_use) in place of the scores; l = l * alpha + sum_j P^T[j].
template <int NR>
HWY_INLINE void SoftmaxExp(const BlockBuffers& buf, const ScoreArgs& a, int64_t nk) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const VF scale2 = hn::Set(d, a.scale2);
  for (int v = 0; v < NR; ++v) {
    const int64_t off = v * N;
    const VF lim = hn::LoadU(d, buf.lim + off);
    const VF m_use = hn::LoadU(d, buf.m_use + off);
    VF sum0 = hn::Zero(d), sum1 = hn::Zero(d);
    int64_t j = 0;
    for (; j + 2 <= nk; j += 2) {
      const VF p0 = Exp2(d, hn::Sub(Score(d, a, scale2, lim, j, off), m_use));
      const VF p1 = Exp2(d, hn::Sub(Score(d, a, scale2, lim, j + 1, off), m_use));
      hn::StoreU(p0, d, buf.st + j * a.bq + off);
      hn::StoreU(p1, d, buf.st + (j + 1) * a.bq + off);
      sum0 = hn::Add(sum0, p0);
      sum1 = hn::Add(sum1, p1);
    }
    if (j < nk) {
      const VF p0 = Exp2(d, hn::Sub(Score(d, a, scale2, lim, j, off), m_use));
      hn::StoreU(p0, d, buf.st + j * a.bq + off);
      sum0 = hn::Add(sum0, p0);
    }
    const VF alpha = hn::LoadU(d, buf.alpha + off);
    hn::StoreU(hn::MulAdd(hn::LoadU(d, buf.l + off), alpha, hn::Add(sum0, sum1)), d, buf.l + off);
  }
}

// Row r of a block: query head and position.
struct RowPos {
  int64_t h, qi;
};
HWY_INLINE RowPos RowOf(const Problem& p, const Plan& plan, int64_t hk, int64_t rb, int64_t i) {
  const int64_t r = rb * plan.bq + i;
  return {hk * p.group() + r / p.seq_q, r % p.seq_q};
}

// First element of the block's query row i.
HWY_INLINE const char* QRow(const Problem& p, const Plan& plan, int64_t b, int64_t hk, int64_t rb,
                            int64_t i) {
  const RowPos rp = RowOf(p, plan, hk, rb, i);
  return static_cast<const char*>(p.q.data) +
         (b * p.q.stride[0] + rp.h * p.q.stride[1] + rp.qi * p.q.stride[2]) *
             static_cast<int64_t>(dtype_size(p.dtype));
}

struct RowLimits {
  float min, max;  // of the rows' last visible keys
};

// Causal limits and mask offsets of the block's rows; rows past the end see nothing.
RowLimits PrepareRows(const Problem& p, const Plan& plan, int64_t b, int64_t hk, int64_t rb,
                      const BlockBuffers& buf) {
  const int64_t nrows = std::min(plan.bq, plan.rows - rb * plan.bq);
  RowLimits lims{static_cast<float>(p.seq_k), -1.0f};
  for (int64_t i = 0; i < plan.bq; ++i) {
    if (i >= nrows) {
      buf.lim[i] = -1.0f;
      buf.mask_off[i] = 0;
      continue;
    }
    const RowPos rp = RowOf(p, plan, hk, rb, i);
    const float lim =
        p.causal ? static_cast<float>(p.causal_last_key(rp.qi)) : static_cast<float>(p.seq_k - 1);
    buf.lim[i] = lim;
    lims.max = std::max(lims.max, lim);
    lims.min = std::min(lims.min, lim);
    buf.mask_off[i] = b * p.mask.stride[0] + rp.h * p.mask.stride[1] + rp.qi * p.mask.stride[2];
  }
  return lims;
}

// Starts a block's accumulators: m = -inf, l = 0, O = 0.
void InitAccumulators(const Plan& plan, const BlockBuffers& buf) {
  std::fill(buf.m, buf.m + plan.bq, -std::numeric_limits<float>::infinity());
  std::fill(buf.l, buf.l + plan.bq, 0.0f);
  std::fill(buf.o, buf.o + plan.bq * plan.dvp, 0.0f);
}

// The end of a block: its output rows, or (split-KV) its O, m, l for the merge.
void FinishBlock(const Problem& p, const Plan& plan, int64_t b, int64_t hk, int64_t rb,
                 const BlockBuffers& buf, float* partial) {
  const int64_t bq = plan.bq, dvp = plan.dvp;
  if (partial) {
    std::memcpy(partial, buf.o, static_cast<size_t>(bq * dvp) * sizeof(float));
    std::memcpy(partial + bq * dvp, buf.m, static_cast<size_t>(bq) * sizeof(float));
    std::memcpy(partial + bq * dvp + bq, buf.l, static_cast<size_t>(bq) * sizeof(float));
    return;
  }
  StoreBlock(p, plan, b, hk, rb, buf.o, buf.l);
}

// The kv range [lo, hi) of a split, cut at the last key any of the rows sees. Blocks start
// at lo (a multiple of bk) and every bk keys after, so that their tiles line up with the
// per-head panels; only the last block, the one on the causal diagonal, is partial.
struct KvRange {
  int64_t lo, hi, first;  // first: length of the first block
};
KvRange KvRangeOf(const Problem& p, const Plan& plan, int64_t split, float max_lim) {
  KvRange r;
  r.lo = split * plan.split_len;
  r.hi = std::min({p.seq_k, r.lo + plan.split_len, static_cast<int64_t>(max_lim) + 1});
  r.first = std::max<int64_t>(0, std::min(plan.bk, r.hi - r.lo));
  return r;
}

// ------------------------------------------------------------------ per-head panels

// K and V of one head rearranged for the register tiles, in fp32: K in tiles of kQkRows keys,
// [p][key] inside a tile, so the broadcasts of TileQK walk one stream; V in column chunks,
// [key][chunk] inside a chunk, so TilePV streams rows of exactly its vectors. Kept per thread
// across the query blocks of the head within one call (each block needs a prefix of the same
// keys), so a head is packed about once per thread. Heads above kMaxBytes (4K keys of 128
// dims) use a window of one block instead, repacked per block; the cap bounds what each thread
// keeps between calls.
struct Panels {
  uint64_t call = ~uint64_t{0};
  int64_t b = -1, hk = -1, split = -1;
  int64_t base = 0;    // first key held
  int64_t keys = 0;    // keys the buffers hold (a multiple of kQkRows)
  int64_t packed = 0;  // keys [base, base + packed) are packed
  hwy::AlignedFreeUniquePtr<float[]> k, v;
  size_t kcap = 0, vcap = 0;
  static constexpr size_t kMaxBytes = size_t{4} << 20;

  const float* k_tile(int64_t key, int64_t d) const {  // key: a multiple of kQkRows
    return k.get() + (key - base) * d;
  }
};

// Packs keys [from, to) (from and to multiples of kQkRows, relative to nothing: absolute keys),
// zeros past seq_k.
HWY_INLINE void PackPanels(const Problem& p, const Plan& plan, int64_t b, int64_t hk, Panels& pn,
                           int64_t from, int64_t to, float* row) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t D = p.head_dim, DV = p.head_dim_v, dvp = plan.dvp, vecs = dvp / N;
  const int64_t es = static_cast<int64_t>(dtype_size(p.dtype));
  const char* kbase =
      static_cast<const char*>(p.k.data) + (b * p.k.stride[0] + hk * p.k.stride[1]) * es;
  const char* vbase =
      static_cast<const char*>(p.v.data) + (b * p.v.stride[0] + hk * p.v.stride[1]) * es;
  for (int64_t j = from; j < to; ++j) {
    // K: row j into its tile, transposed.
    float* tile = pn.k.get() + (j - j % kQkRows - pn.base) * D;
    const int64_t r = j % kQkRows;
    if (j < p.seq_k) {
      LoadRow(p.dtype, kbase + j * p.k.stride[2] * es, p.k.stride[3], D, row);
      for (int64_t c = 0; c < D; ++c) tile[c * kQkRows + r] = row[c];
    } else {
      for (int64_t c = 0; c < D; ++c) tile[c * kQkRows + r] = 0.0f;
    }
    // V: row j into each column chunk.
    if (j < p.seq_k) {
      LoadRow(p.dtype, vbase + j * p.v.stride[2] * es, p.v.stride[3], DV, row);
      std::fill(row + DV, row + dvp, 0.0f);
    } else {
      std::fill(row, row + dvp, 0.0f);
    }
    for (int64_t n = 0; n < vecs;) {
      const int64_t w = ChunkVecs(n, vecs) * N;
      std::memcpy(pn.v.get() + n * N * pn.keys + (j - pn.base) * w, row + n * N,
                  static_cast<size_t>(w) * sizeof(float));
      n += w / N;
    }
  }
}

// The thread's panels holding keys [j0, j0 + nk) of head (b, hk).
HWY_INLINE const Panels& PanelsFor(const Problem& p, const Plan& plan, int64_t b, int64_t hk,
                                   int64_t split, int64_t j0, int64_t nk, float* row) {
  static thread_local Panels pn;
  const int64_t full = (p.seq_k + kQkRows - 1) / kQkRows * kQkRows;
  const size_t bytes = static_cast<size_t>(full * (p.head_dim + plan.dvp)) * sizeof(float);
  const bool whole = bytes <= Panels::kMaxBytes;
  const bool same_head = pn.call == plan.call && pn.b == b && pn.hk == hk && pn.split == split;
  if (!same_head || !whole) {
    pn.call = plan.call;
    pn.b = b;
    pn.hk = hk;
    pn.split = split;
    pn.base = whole ? 0 : j0;  // a window: j0 is a multiple of bk
    pn.keys = whole ? full : plan.bk;
    pn.packed = 0;
    const size_t kn = static_cast<size_t>(pn.keys * p.head_dim);
    const size_t vn = static_cast<size_t>(pn.keys * plan.dvp);
    if (pn.kcap < kn) {
      pn.k = hwy::AllocateAligned<float>(kn);
      pn.kcap = pn.k ? kn : 0;
    }
    if (pn.vcap < vn) {
      pn.v = hwy::AllocateAligned<float>(vn);
      pn.vcap = pn.v ? vn : 0;
    }
    if (!pn.k || !pn.v) throw std::bad_alloc();
  }
  const int64_t end = (j0 + nk + kQkRows - 1) / kQkRows * kQkRows - pn.base;
  if (end > pn.packed) {
    PackPanels(p, plan, b, hk, pn, pn.base + pn.packed, pn.base + end, row);
    pn.packed = end;
  }
  return pn;
}

template <int NR>
void RunBlock(const Problem& p, const Plan& plan, int64_t b, int64_t hk, int64_t rb, int64_t split,
              float* partial) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t bq = plan.bq, bk = plan.bk, dvp = plan.dvp;
  const int64_t D = p.head_dim, DV = p.head_dim_v;
  const int64_t row0 = rb * bq;
  const int64_t nrows = std::min(bq, plan.rows - row0);
  const int64_t es = static_cast<int64_t>(dtype_size(p.dtype));
  BlockBuffers buf = AllocBuffers(p, plan);

  // Q^T (or Q rows for the dot path), causal limits and mask offsets of the block's rows.
  const bool dot = nrows <= kDotMaxRows && NR == 1;
  const int64_t dp = plan.dp;
  const RowLimits lims = PrepareRows(p, plan, b, hk, rb, buf);
  for (int64_t i = 0; i < bq; ++i) {
    float* qrow = buf.qr + i * dp;
    if (i >= nrows) {
      if (dot) {
        std::fill(qrow, qrow + dp, 0.0f);
      } else {
        for (int64_t c = 0; c < D; ++c) buf.qt[c * bq + i] = 0.0f;
      }
      continue;
    }
    LoadRow(p.dtype, QRow(p, plan, b, hk, rb, i), p.q.stride[3], D, qrow);
    std::fill(qrow + D, qrow + dp, 0.0f);
    if (!dot) {
      for (int64_t c = 0; c < D; ++c) buf.qt[c * bq + i] = qrow[c];
    }
  }
  const float min_lim = lims.min, max_lim = lims.max;

  const KvRange kv = KvRangeOf(p, plan, split, max_lim);
  InitAccumulators(plan, buf);
  if (dot) std::fill(buf.st, buf.st + bk * bq, 0.0f);  // lanes past nrows stay finite

  const char* kbase =
      static_cast<const char*>(p.k.data) + (b * p.k.stride[0] + hk * p.k.stride[1]) * es;
  const char* vbase =
      static_cast<const char*>(p.v.data) + (b * p.v.stride[0] + hk * p.v.stride[1]) * es;
  const bool k_direct = p.dtype == DType::kF32 && p.k.stride[3] == 1;
  const bool v_direct = p.dtype == DType::kF32 && p.v.stride[3] == 1 && DV == dvp;
  const bool has_mask = p.mask_kind != MaskKind::kNone;
  const float scale2 = p.scale * kLog2e;
  // P.V only for rows that exist (decoding fills few of a block's lanes).
  const int64_t pv_rows = nrows;

  for (int64_t j0 = kv.lo, nk = kv.first; j0 < kv.hi; j0 += nk, nk = std::min(bk, kv.hi - j0)) {
    const float* va;
    int64_t v_rs = 0, panel_keys = 0, key0 = 0;
    if (dot) {
      // Decoding: K rows streamed as they lie (or converted), V rows likewise.
      const float* ka;
      int64_t k_rs;
      if (k_direct) {
        ka = reinterpret_cast<const float*>(kbase) + j0 * p.k.stride[2];
        k_rs = p.k.stride[2];
      } else {
        for (int64_t j = 0; j < nk; ++j)
          LoadRow(p.dtype, kbase + (j0 + j) * p.k.stride[2] * es, p.k.stride[3], D,
                  buf.kbuf + j * D);
        ka = buf.kbuf;
        k_rs = D;
      }
      QKDot(nrows, bq, nk, ka, k_rs, buf.qr, dp, D, buf.st);
      if (v_direct) {
        va = reinterpret_cast<const float*>(vbase) + j0 * p.v.stride[2];
        v_rs = p.v.stride[2];
      } else {
        for (int64_t j = 0; j < nk; ++j) {
          float* row = buf.vbuf + j * dvp;
          LoadRow(p.dtype, vbase + (j0 + j) * p.v.stride[2] * es, p.v.stride[3], DV, row);
          std::fill(row + DV, row + dvp, 0.0f);
        }
        va = buf.vbuf;
        v_rs = dvp;
      }
    } else {
      // Blocks of queries: K and V from the head's panels.
      const Panels& pn = PanelsFor(p, plan, b, hk, split, j0, nk, buf.row);
      TileQKPanel<NR>(nk, pn.k_tile(j0, D), buf.qt, bq, D, buf.st, bq);
      va = pn.v.get();
      panel_keys = pn.keys;
      key0 = j0 - pn.base;
    }

    if (has_mask) MaskTile(p, buf.mask_off, nrows, bq, j0, nk, buf.bias);
    const ScoreArgs sa{
        buf.st, buf.bias, bq, j0, scale2, has_mask, static_cast<float>(j0 + nk - 1) > min_lim};
    SoftmaxMax<NR>(buf, sa, nk);
    SoftmaxExp<NR>(buf, sa, nk);

    // O = alpha O + P V_blk
    TilePVRows(pv_rows, dvp / N, buf.st, bq, va, v_rs, panel_keys, key0, nk, buf.o, dvp, buf.alpha);
  }

  FinishBlock(p, plan, b, hk, rb, buf, partial);
}

// Merges the splits of one block: O = sum_s O_s 2^(m_s - m), l = sum_s l_s 2^(m_s - m).
void MergeSplits(const Problem& p, const Plan& plan, int64_t b, int64_t hk, int64_t rb,
                 const float* partials, float* o, float* l) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t bq = plan.bq, dvp = plan.dvp;
  const int64_t stride = plan.partial_floats();
  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < bq; ++i) {
    float m = neg_inf;
    for (int64_t s = 0; s < plan.splits; ++s) m = std::max(m, partials[s * stride + bq * dvp + i]);
    const float m_use = m == neg_inf ? 0.0f : m;
    float lsum = 0.0f;
    float* orow = o + i * dvp;
    std::fill(orow, orow + dvp, 0.0f);
    for (int64_t s = 0; s < plan.splits; ++s) {
      const float* part = partials + s * stride;
      const float w = std::exp2(part[bq * dvp + i] - m_use);
      lsum += part[bq * dvp + bq + i] * w;
      const VF wv = hn::Set(d, w);
      for (int64_t c = 0; c < dvp; c += N) {
        hn::StoreU(hn::MulAdd(hn::LoadU(d, part + i * dvp + c), wv, hn::LoadU(d, orow + c)), d,
                   orow + c);
      }
    }
    l[i] = lsum;
  }
  StoreBlock(p, plan, b, hk, rb, o, l);
}

Plan MakePlan(const Problem& p, int threads) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  Plan plan;
  plan.rows = p.group() * p.seq_q;
  plan.nr = plan.rows <= N ? 1 : 2;
  plan.bq = plan.nr * N;
  plan.bk = 8 * kQkRows;
  plan.dp = (p.head_dim + N - 1) / N * N;
  plan.dpad = (p.head_dim + 31) / 32 * 32;
  plan.dvp = (p.head_dim_v + N - 1) / N * N;
  plan.row_blocks = (plan.rows + plan.bq - 1) / plan.bq;
  // Split the keys when the blocks alone cannot keep every thread busy (decoding).
  const int64_t blocks = p.batch * p.heads_kv * plan.row_blocks;
  const int64_t kv_blocks = (p.seq_k + plan.bk - 1) / plan.bk;
  plan.splits = 1;
  if (blocks < 2 * threads && kv_blocks >= 8) {
    plan.splits = std::min((2 * threads + blocks - 1) / blocks, kv_blocks / 4);
  }
  plan.split_len = std::max<int64_t>(1, (kv_blocks + plan.splits - 1) / plan.splits) * plan.bk;
  plan.splits = std::max<int64_t>(1, (p.seq_k + plan.split_len - 1) / plan.split_len);
  return plan;
}

// ------------------------------------------------------------------ bf16 tiles (AMX)
//
// With bfloat16 inputs on CPUs with AMX-BF16 (Sapphire Rapids and later), the tile products run
// on the AMX unit: TDPBF16PS multiplies 16x32 by 32x16 bf16 tiles into a 16x16 fp32 tile, an
// order of magnitude more multiply-adds per cycle than fp32 FMA. (AVX512-BF16's vdpbf16ps, the
// other candidate, issues once per cycle here against two FMAs: the same rate as fp32, measured
// slower once the packing is paid.) The layouts stay those of the fp32 path:
//   S^T[16 keys][16 queries] += K rows [16][32 head_dim]  x  Q^T pairs [16 pairs][16 queries]
//   O[16 queries][16 dims]   += P rows [16][32 keys]       x  V pairs   [16 pairs][16 dims]
// K rows are used in place; Q^T and V are interleaved into pairs (the VNNI layout TDPBF16PS
// wants), P is rounded to bf16 as fused kernels do and transposed into rows. The softmax is
// the fp32 code above. Highway 1.0.3 has no AMX, hence intrinsics in functions built for
// amx-tile/amx-bf16 on top of the AVX3 target, run only where the CPU and OS allow AMX.
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
#ifndef BACKPLANE_AMX_TARGET
#define BACKPLANE_AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512bf16")))
#endif

// Palette 1, all eight tiles 16 rows x 64 bytes: tiles 0-3 accumulate, 4-5 hold A, 6-7 hold B.
BACKPLANE_AMX_TARGET HWY_INLINE void AmxConfigure() {
  struct alignas(64) {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
  } cfg;
  std::memset(&cfg, 0, sizeof(cfg));
  cfg.palette = 1;
  for (int t = 0; t < 8; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = 16;
  }
  _tile_loadconfig(&cfg);
}

// 16-bit lanes [a0..a15, b0..b15] -> pairs [a0 b0 a1 b1 ...].
HWY_INLINE __m512i PairIndex() {
  alignas(64) static const uint16_t idx[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                               21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                               11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  return _mm512_load_si512(idx);
}

// dst[c * ld + r] = src[r * ls + c] for a 16 x 16 block of 32-bit elements.
HWY_INLINE void Transpose16x16(const uint32_t* src, int64_t ls, uint32_t* dst, int64_t ld) {
  __m512i r[16], t[16];
  for (int i = 0; i < 16; ++i) r[i] = _mm512_loadu_si512(src + i * ls);
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_epi32(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_epi32(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);
    r[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);
    r[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);
    r[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);
  }
  // r[4g + k] holds, in 128-bit lane L, column 4L + k of rows 4g..4g+3.
  for (int k = 0; k < 4; ++k) {
    t[k] = _mm512_shuffle_i32x4(r[k], r[4 + k], 0x88);           // columns k, 8+k; rows 0-7
    t[4 + k] = _mm512_shuffle_i32x4(r[k], r[4 + k], 0xdd);       // columns 4+k, 12+k; rows 0-7
    t[8 + k] = _mm512_shuffle_i32x4(r[8 + k], r[12 + k], 0x88);  // rows 8-15
    t[12 + k] = _mm512_shuffle_i32x4(r[8 + k], r[12 + k], 0xdd);
  }
  for (int k = 0; k < 8; ++k) {
    _mm512_storeu_si512(dst + k * ld, _mm512_shuffle_i32x4(t[k], t[8 + k], 0x88));
    _mm512_storeu_si512(dst + (k + 8) * ld, _mm512_shuffle_i32x4(t[k], t[8 + k], 0xdd));
  }
}

// S^T tiles: C[jt][it] = sum over head_dim chunks of K rows (tile jt) x Q^T pairs (tile it).
// Strides in bytes. J2/I2: a second key / query tile.
template <bool J2, bool I2>
BACKPLANE_AMX_TARGET HWY_INLINE void AmxQK(const uint16_t* a0, const uint16_t* a1, int lda,
                                           const uint32_t* b0, const uint32_t* b1, int ldb,
                                           int64_t chunks, float* c0, float* c1, int ldc) {
  _tile_zero(0);
  if (I2) _tile_zero(1);
  if (J2) _tile_zero(2);
  if (J2 && I2) _tile_zero(3);
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t boff = ch * 16 * (ldb / 4);
    _tile_loadd(4, a0 + ch * 32, lda);
    if (J2) _tile_loadd(5, a1 + ch * 32, lda);
    _tile_loadd(6, b0 + boff, ldb);
    if (I2) _tile_loadd(7, b1 + boff, ldb);
    _tile_dpbf16ps(0, 4, 6);
    if (I2) _tile_dpbf16ps(1, 4, 7);
    if (J2) _tile_dpbf16ps(2, 5, 6);
    if (J2 && I2) _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c0, ldc);
  if (I2) _tile_stored(1, c0 + 16, ldc);
  if (J2) _tile_stored(2, c1, ldc);
  if (J2 && I2) _tile_stored(3, c1 + 16, ldc);
}

// O tiles: C[it][ct] += P rows (tile it) x V pairs (tile ct), over key chunks of 32.
template <bool I2, bool C2>
BACKPLANE_AMX_TARGET HWY_INLINE void AmxPV(const uint32_t* a0, const uint32_t* a1, int lda,
                                           const uint16_t* b, int ldb, int64_t chunks, float* c0,
                                           float* c1, int ldc) {
  _tile_loadd(0, c0, ldc);
  if (C2) _tile_loadd(1, c0 + 16, ldc);
  if (I2) _tile_loadd(2, c1, ldc);
  if (I2 && C2) _tile_loadd(3, c1 + 16, ldc);
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const uint16_t* bb = b + ch * 16 * (ldb / 2);
    _tile_loadd(4, a0 + ch * 16, lda);
    if (I2) _tile_loadd(5, a1 + ch * 16, lda);
    _tile_loadd(6, bb, ldb);
    if (C2) _tile_loadd(7, bb + 32, ldb);
    _tile_dpbf16ps(0, 4, 6);
    if (C2) _tile_dpbf16ps(1, 4, 7);
    if (I2) _tile_dpbf16ps(2, 5, 6);
    if (I2 && C2) _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c0, ldc);
  if (C2) _tile_stored(1, c0 + 16, ldc);
  if (I2) _tile_stored(2, c1, ldc);
  if (I2 && C2) _tile_stored(3, c1 + 16, ldc);
}

// Softmax second pass for the AMX path, straight into bf16 pairs along keys:
// Pp[jj][i] = (bf16(P[2jj + 1 - shift][i]) << 16) | bf16(P[2jj - shift][i]) for jj < pairs,
// zeros for keys outside [0, nk); l = l * alpha + the sum of the probabilities (in fp32).
template <int NR>
BACKPLANE_AMX_TARGET HWY_INLINE void SoftmaxExpPairs(const BlockBuffers& buf, const ScoreArgs& a,
                                                     int64_t nk, int64_t shift, int64_t pairs,
                                                     uint32_t* pp) {
  const DF d;
  const __m512i idx = PairIndex();
  const VF scale2 = hn::Set(d, a.scale2);
  for (int v = 0; v < NR; ++v) {
    const int64_t off = v * 16;
    const VF lim = hn::LoadU(d, buf.lim + off);
    const VF m_use = hn::LoadU(d, buf.m_use + off);
    VF sum = hn::Zero(d);
    for (int64_t jj = 0; jj < pairs; ++jj) {
      const int64_t j = 2 * jj - shift;
      VF p0 = hn::Zero(d), p1 = hn::Zero(d);
      if (j >= 0 && j < nk) p0 = Exp2<4>(d, hn::Sub(Score(d, a, scale2, lim, j, off), m_use));
      if (j + 1 >= 0 && j + 1 < nk) {
        p1 = Exp2<4>(d, hn::Sub(Score(d, a, scale2, lim, j + 1, off), m_use));
      }
      sum = hn::Add(sum, hn::Add(p0, p1));
      const __m512bh both = _mm512_cvtne2ps_pbh(p1.raw, p0.raw);  // [p0 x16, p1 x16]
      _mm512_storeu_si512(pp + jj * a.bq + off,
                          _mm512_permutexvar_epi16(idx, reinterpret_cast<const __m512i&>(both)));
    }
    const VF alpha = hn::LoadU(d, buf.alpha + off);
    hn::StoreU(hn::MulAdd(hn::LoadU(d, buf.l + off), alpha, sum), d, buf.l + off);
  }
}

// Vp[jj][c][2] = (V[2jj][c], V[2jj + 1][c]) for jj < pairs and c < dvp; zeros past head_dim_v
// and past nk. `rows`: the block's first V row; rs, cs: row and column strides in elements.
BACKPLANE_AMX_TARGET HWY_INLINE void PackV(const uint16_t* rows, int64_t rs, int64_t cs, int64_t nk,
                                           int64_t pairs, int64_t dv, int64_t dvp, uint16_t* vp) {
  const __m512i idx = PairIndex();
  for (int64_t jj = 0; jj < pairs; ++jj) {
    const uint16_t* r0 = rows + 2 * jj * rs;
    const uint16_t* r1 = r0 + rs;
    const bool has0 = 2 * jj < nk, has1 = 2 * jj + 1 < nk;
    uint16_t* dst = vp + jj * dvp * 2;
    if (cs == 1) {
      for (int64_t c = 0; c < dvp; c += 16) {
        const int64_t left = std::min<int64_t>(16, std::max<int64_t>(0, dv - c));
        const __mmask16 m = static_cast<__mmask16>((1u << left) - 1u);
        const __m256i a = has0 ? _mm256_maskz_loadu_epi16(m, r0 + c) : _mm256_setzero_si256();
        const __m256i bb = has1 ? _mm256_maskz_loadu_epi16(m, r1 + c) : _mm256_setzero_si256();
        const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(a), bb, 1);
        _mm512_storeu_si512(dst + 2 * c, _mm512_permutexvar_epi16(idx, both));
      }
    } else {
      for (int64_t c = 0; c < dvp; ++c) {
        dst[2 * c] = c < dv && has0 ? r0[c * cs] : 0;
        dst[2 * c + 1] = c < dv && has1 ? r1[c * cs] : 0;
      }
    }
  }
}

// V of one head packed into pairs (PackV), kept per thread across the query blocks of that head
// within one call: each block needs a prefix of the same pairs, so V is packed about once per
// head and thread instead of once per block. Heads above kMaxBytes (16K keys of 128 dims) pack
// per block; the cap bounds what each thread keeps between calls.
struct PackedV {
  uint64_t call = ~uint64_t{0};
  int64_t b = -1, hk = -1, split = -1;
  int64_t pairs = 0;  // pairs [0, pairs) are packed
  size_t cap = 0;
  hwy::AlignedFreeUniquePtr<uint16_t[]> data;
  static constexpr size_t kMaxBytes = size_t{4} << 20;
};

// Pointer to pairs [pair0, pair0 + n) of the head's packed V (zeros past seq_k), or NULL when
// the head is too large to cache.
BACKPLANE_AMX_TARGET HWY_INLINE const uint16_t* PackedVPairs(const Problem& p, const Plan& plan,
                                                             int64_t b, int64_t hk, int64_t split,
                                                             int64_t pair0, int64_t n) {
  static thread_local PackedV cache;
  const int64_t dvp = plan.dvp;
  const int64_t total_pairs = ((p.seq_k + 1) / 2 + 15) / 16 * 16 + 16;
  const size_t elems = static_cast<size_t>(total_pairs * dvp * 2);
  if (elems * 2 > PackedV::kMaxBytes) return nullptr;
  if (cache.call != plan.call || cache.b != b || cache.hk != hk || cache.split != split) {
    if (cache.cap < elems) {
      cache.data = hwy::AllocateAligned<uint16_t>(elems);
      if (!cache.data) throw std::bad_alloc();
      cache.cap = elems;
    }
    cache.call = plan.call;
    cache.b = b;
    cache.hk = hk;
    cache.split = split;
    cache.pairs = 0;
  }
  const int64_t want = std::min(pair0 + n, total_pairs);
  if (want > cache.pairs) {
    const auto* vbase =
        static_cast<const uint16_t*>(p.v.data) + b * p.v.stride[0] + hk * p.v.stride[1];
    const int64_t j = 2 * cache.pairs;
    PackV(vbase + j * p.v.stride[2], p.v.stride[2], p.v.stride[3],
          std::max<int64_t>(0, p.seq_k - j), want - cache.pairs, p.head_dim_v, dvp,
          cache.data.get() + cache.pairs * dvp * 2);
    cache.pairs = want;
  }
  return cache.data.get() + pair0 * dvp * 2;
}

template <int NR>
BACKPLANE_AMX_TARGET void RunBlockAmx(const Problem& p, const Plan& plan, int64_t b, int64_t hk,
                                      int64_t rb, int64_t split, float* partial) {
  const int64_t bq = plan.bq, bk = plan.bk, dvp = plan.dvp;
  const int64_t D = p.head_dim, DV = p.head_dim_v;
  const int64_t nrows = std::min(bq, plan.rows - rb * bq);
  if (NR == 1 && nrows <= kDotMaxRows) return RunBlock<NR>(p, plan, b, hk, rb, split, partial);
  const int64_t dpad = plan.dpad;  // head_dim in whole 32-element chunks
  const int64_t pairs_d = dpad / 2;
  BlockBuffers buf = AllocBuffers(p, plan);
  const RowLimits lims = PrepareRows(p, plan, b, hk, rb, buf);

  // Q^T as bf16 pairs along head_dim: qtp[pp][i], zero padded.
  auto* qtp = reinterpret_cast<uint32_t*>(buf.qt);
  std::fill(qtp, qtp + pairs_d * bq, 0u);
  for (int64_t i = 0; i < nrows; ++i) {
    const auto* q = reinterpret_cast<const uint16_t*>(QRow(p, plan, b, hk, rb, i));
    const int64_t cs = p.q.stride[3];
    for (int64_t pp = 0; 2 * pp < D; ++pp) {
      const uint32_t lo = q[2 * pp * cs];
      const uint32_t hi = 2 * pp + 1 < D ? q[(2 * pp + 1) * cs] : 0u;
      qtp[pp * bq + i] = lo | (hi << 16);
    }
  }

  const KvRange kv = KvRangeOf(p, plan, split, lims.max);
  InitAccumulators(plan, buf);
  const auto* kbase =
      static_cast<const uint16_t*>(p.k.data) + b * p.k.stride[0] + hk * p.k.stride[1];
  const auto* vbase =
      static_cast<const uint16_t*>(p.v.data) + b * p.v.stride[0] + hk * p.v.stride[1];
  const bool has_mask = p.mask_kind != MaskKind::kNone;
  const float scale2 = p.scale * kLog2e;
  auto* kbuf = reinterpret_cast<uint16_t*>(buf.kbuf);
  auto* vp = reinterpret_cast<uint16_t*>(buf.vbuf);
  auto* pp = reinterpret_cast<uint32_t*>(buf.qr);
  auto* pa = reinterpret_cast<uint32_t*>(buf.pa);
  const int ldq = static_cast<int>(bq * 4), ldo = static_cast<int>(dvp * 4);
  const int64_t it_count = bq / 16, ct_count = dvp / 16;
  AmxConfigure();

  for (int64_t j0 = kv.lo, nk = kv.first; j0 < kv.hi; j0 += nk, nk = std::min(bk, kv.hi - j0)) {
    const int64_t jt_count = (nk + 15) / 16;
    // K rows in place when whole tiles of them exist; else copied, padded with zeros.
    const uint16_t* ka;
    int64_t k_rs;
    if (p.k.stride[3] == 1 && D == dpad && nk % 16 == 0) {
      ka = kbase + j0 * p.k.stride[2];
      k_rs = p.k.stride[2];
    } else {
      for (int64_t j = 0; j < jt_count * 16; ++j) {
        const uint16_t* src = kbase + (j0 + j) * p.k.stride[2];
        for (int64_t c = 0; c < dpad; ++c)
          kbuf[j * dpad + c] = j < nk && c < D ? src[c * p.k.stride[3]] : 0;
      }
      ka = kbuf;
      k_rs = dpad;
    }
    const int lda = static_cast<int>(k_rs * 2);
    for (int64_t jt = 0; jt < jt_count; jt += 2) {
      const bool j2 = jt + 1 < jt_count;
      const uint16_t* a0 = ka + jt * 16 * k_rs;
      const uint16_t* a1 = a0 + 16 * k_rs;
      float* c0 = buf.st + jt * 16 * bq;
      float* c1 = c0 + 16 * bq;
      for (int64_t it = 0; it < it_count; it += 2) {
        const bool i2 = it + 1 < it_count;
        const uint32_t* b0 = qtp + it * 16;
        if (j2 && i2)
          AmxQK<true, true>(a0, a1, lda, b0, b0 + 16, ldq, dpad / 32, c0 + it * 16, c1 + it * 16,
                            ldq);
        else if (j2)
          AmxQK<true, false>(a0, a1, lda, b0, b0, ldq, dpad / 32, c0 + it * 16, c1 + it * 16, ldq);
        else if (i2)
          AmxQK<false, true>(a0, a0, lda, b0, b0 + 16, ldq, dpad / 32, c0 + it * 16, c0 + it * 16,
                             ldq);
        else
          AmxQK<false, false>(a0, a0, lda, b0, b0, ldq, dpad / 32, c0 + it * 16, c0 + it * 16, ldq);
      }
    }

    if (has_mask) MaskTile(p, buf.mask_off, nrows, bq, j0, nk, buf.bias);
    const ScoreArgs sa{
        buf.st, buf.bias, bq, j0, scale2, has_mask, static_cast<float>(j0 + nk - 1) > lims.min};
    SoftmaxMax<NR>(buf, sa, nk);

    // V pairs from the per-thread cache (pairs start at even keys: an odd j0 shifts P by one
    // key, with a zero probability in front), else packed for this block alone.
    int64_t shift = j0 & 1;
    int64_t kpairs = (nk + shift + 31) / 32 * 16;
    const uint16_t* vpairs = PackedVPairs(p, plan, b, hk, split, (j0 - shift) / 2, kpairs);
    if (!vpairs) {
      shift = 0;
      kpairs = (nk + 31) / 32 * 16;
      PackV(vbase + j0 * p.v.stride[2], p.v.stride[2], p.v.stride[3], nk, kpairs, DV, dvp, vp);
      vpairs = vp;
    }
    // P rows in bf16: pairs along keys, then transposed to [query][key pair].
    SoftmaxExpPairs<NR>(buf, sa, nk, shift, kpairs, pp);
    for (int64_t kc = 0; kc < kpairs; kc += 16)
      for (int64_t it = 0; it < it_count; ++it)
        Transpose16x16(pp + kc * bq + it * 16, bq, pa + it * 16 * kpairs + kc, kpairs);

    // O = alpha O + P V_blk
    for (int64_t i = 0; i < nrows; ++i) {
      const __m512 al = _mm512_set1_ps(buf.alpha[i]);
      float* orow = buf.o + i * dvp;
      for (int64_t c = 0; c < dvp; c += 16)
        _mm512_storeu_ps(orow + c, _mm512_mul_ps(_mm512_loadu_ps(orow + c), al));
    }
    const int ldp = static_cast<int>(kpairs * 4);
    for (int64_t it = 0; it < it_count; it += 2) {
      const bool i2 = it + 1 < it_count;
      const uint32_t* a0 = pa + it * 16 * kpairs;
      const uint32_t* a1 = a0 + 16 * kpairs;
      float* o0 = buf.o + it * 16 * dvp;
      float* o1 = o0 + 16 * dvp;
      for (int64_t ct = 0; ct < ct_count; ct += 2) {
        const bool c2 = ct + 1 < ct_count;
        const uint16_t* bv = vpairs + ct * 32;
        if (i2 && c2)
          AmxPV<true, true>(a0, a1, ldp, bv, ldo, kpairs / 16, o0 + ct * 16, o1 + ct * 16, ldo);
        else if (i2)
          AmxPV<true, false>(a0, a1, ldp, bv, ldo, kpairs / 16, o0 + ct * 16, o1 + ct * 16, ldo);
        else if (c2)
          AmxPV<false, true>(a0, a0, ldp, bv, ldo, kpairs / 16, o0 + ct * 16, o0 + ct * 16, ldo);
        else
          AmxPV<false, false>(a0, a0, ldp, bv, ldo, kpairs / 16, o0 + ct * 16, o0 + ct * 16, ldo);
      }
    }
  }
  _tile_release();
  FinishBlock(p, plan, b, hk, rb, buf, partial);
}

bool AmxUsable(const Problem& p) {
  return p.dtype == DType::kBF16 && amx_bf16_available();
}
#else
bool AmxUsable(const Problem&) {
  return false;
}
#endif  // AVX3

using BlockFn = void (*)(const Problem&, const Plan&, int64_t, int64_t, int64_t, int64_t, float*);

void RunAll(const Problem& p, const Plan& plan, int threads, BlockFn run_block) {
  const int64_t heads = p.batch * p.heads_kv;
  const int64_t nrb = plan.row_blocks;
  const int64_t blocks = heads * nrb;
  kernels::ThreadPool& pool = kernels::ThreadPool::global();
  if (plan.splits == 1) {
    // A work item is a share of one kv head's row blocks (every chunks-th one, the blocks that
    // see the most keys first): a thread keeps a head's panels to itself and packs them once,
    // while the items stay many enough (4 per thread) to balance.
    const int64_t chunks =
        std::min<int64_t>(nrb, std::max<int64_t>(1, (4 * threads + heads - 1) / heads));
    pool.parallel_for(heads * chunks, threads, [&](int64_t item, int) {
      const int64_t bh = item / chunks, c = item % chunks;
      for (int64_t rb = nrb - 1 - c; rb >= 0; rb -= chunks)
        run_block(p, plan, bh / p.heads_kv, bh % p.heads_kv, rb, 0, nullptr);
    });
    return;
  }
  const int64_t stride = plan.partial_floats();
  float* partials = PartialScratch().get(static_cast<size_t>(blocks * plan.splits * stride));
  pool.parallel_for(blocks * plan.splits, threads, [&](int64_t item, int) {
    const int64_t split = item % plan.splits, block = item / plan.splits;
    const int64_t bh = block / nrb, rb = block % nrb;
    run_block(p, plan, bh / p.heads_kv, bh % p.heads_kv, rb, split, partials + item * stride);
  });
  pool.parallel_for(blocks, threads, [&](int64_t block, int) {
    const int64_t bh = block / nrb, rb = block % nrb;
    BlockBuffers buf = AllocBuffers(p, plan);
    MergeSplits(p, plan, bh / p.heads_kv, bh % p.heads_kv, rb,
                partials + block * plan.splits * stride, buf.o, buf.l);
  });
}

void RunSdpa(const Problem& p, int threads, RunInfo* info) {
  static std::atomic<uint64_t> calls{0};
  // Blocks of at most kDotMaxRows rows (decoding) always take the f32 dot-product path.
  const bool amx = AmxUsable(p) && p.group() * p.seq_q > kDotMaxRows;
  Plan plan = MakePlan(p, threads);
  plan.call = calls.fetch_add(1, std::memory_order_relaxed);
  BlockFn run_block = plan.nr == 1 ? &RunBlock<1> : &RunBlock<2>;
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if (amx) {
    run_block = plan.nr == 1 ? &RunBlockAmx<1> : &RunBlockAmx<2>;
  }
#endif
  if (info) {
    info->target = hwy::TargetName(HWY_TARGET);
    info->tile_kernel = amx ? "amx-bf16" : "f32-fma";
  }
  RunAll(p, plan, threads, run_block);
}

const char* TargetNameHere() {
  return hwy::TargetName(HWY_TARGET);
}

}  // namespace HWY_NAMESPACE
}  // namespace backplane::attention::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace backplane::attention::cpu {

HWY_EXPORT(RunSdpa);
HWY_EXPORT(TargetNameHere);

void run_sdpa(const Problem& p, int threads, RunInfo* info) {
  HWY_DYNAMIC_DISPATCH(RunSdpa)(p, threads, info);
}

const char* sdpa_target() {
  return HWY_DYNAMIC_DISPATCH(TargetNameHere)();
}

namespace {
std::atomic<bool> g_amx_enabled{true};

// AMX needs the CPU (AMX-TILE, AMX-BF16) and, on Linux, the process's permission to use the
// tile data state (arch_prctl ARCH_REQ_XCOMP_PERM, granted once per process; oneDNN asks the
// same way). Anything else: the fp32 tiles.
bool amx_allowed() {
#if HWY_ARCH_X86_64 && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
  if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-bf16") ||
      !__builtin_cpu_supports("avx512bf16")) {
    return false;
  }
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}
}  // namespace

bool amx_bf16_available() {
  static const bool allowed = amx_allowed();
  return allowed && g_amx_enabled.load(std::memory_order_relaxed);
}

void set_amx_enabled(bool enabled) {
  g_amx_enabled.store(enabled);
}

}  // namespace backplane::attention::cpu
#endif  // HWY_ONCE
