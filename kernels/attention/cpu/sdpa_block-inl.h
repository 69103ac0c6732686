// The sdpa kernel's block loop on the fp32 tiles: operands loaded as float32, per-worker
// scratch, the online softmax of one [kv block x query block] tile, per-head K/V panels, one
// block (RunBlock), the merge of split-K partials and the plan of blocks and splits.
// Included once per SIMD target (sdpa.cpp's foreach_target), hence the toggle guard.
#if defined(BACKPLANE_ATTENTION_CPU_SDPA_BLOCK_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef BACKPLANE_ATTENTION_CPU_SDPA_BLOCK_INL_H_
#undef BACKPLANE_ATTENTION_CPU_SDPA_BLOCK_INL_H_
#else
#define BACKPLANE_ATTENTION_CPU_SDPA_BLOCK_INL_H_
#endif

#include <hwy/aligned_allocator.h>
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "common/simd-inl.h"
#include "cpu/problem.hpp"
#include "cpu/sdpa_dpbf16-inl.h"
#include "cpu/sdpa_tiles-inl.h"
#include "cpu/transpose-inl.h"

HWY_BEFORE_NAMESPACE();
namespace backplane::attention::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using kernels::HWY_NAMESPACE::Exp2F;
using kernels::HWY_NAMESPACE::LoadF;

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
    if (t == DType::kBF16) {
      for (; i + N <= n; i += N) hn::StoreU(LoadF<DType::kBF16>(d, s, i), d, dst + i);
    } else {
      for (; i + N <= n; i += N) hn::StoreU(LoadF<DType::kF16>(d, s, i), d, dst + i);
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
  int64_t splits;           // kv splits per block (split-KV when there are few blocks)
  int64_t split_len;        // keys per split, a multiple of bk
  uint64_t call = 0;        // distinct per kernel call: keys per-thread caches (AMX packed V)
  bool dpbf16_dot = false;  // decoding bf16: Q.K on vdpbf16ps (QKDotBf16)
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
  float* pv;          // AMX: [bq][dvp] P.V of one kv block, before it joins O
  float* rows;        // a K tile's rows or one V row converted to f32 (panel packing)
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
               {&b.pv, bq * dvp},
               {&b.rows, std::max(size_t{kQkRows} * d, dvp)}};
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

using kernels::HWY_NAMESPACE::StoreF;

// dst[0..n) = src[0..n) * inv in dtype T, whole vectors then the tail.
template <DType T>
HWY_INLINE void ScaleRowTo(const float* src, float inv, int64_t n, void* dst) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const VF scale = hn::Set(d, inv);
  int64_t c = 0;
  for (; c + N <= n; c += N) StoreF<T>(d, hn::Mul(hn::LoadU(d, src + c), scale), dst, c);
  auto* out = static_cast<typename Storage<T>::type*>(dst);
  for (; c < n; ++c) out[c] = Storage<T>::store(src[c] * inv);
}

// out[b, h, qi, :] = O[i][:] / l[i] for the block's rows; zeros where l == 0 (no key seen).
// With a logsumexp output also lse[b, h, qi] = ln(l[i] 2^m[i]) (m in the log2 domain), -inf
// where no key was seen.
void StoreBlock(const Problem& p, const Plan& plan, int64_t b, int64_t hk, int64_t rb,
                const float* o, const float* m, const float* l) {
  const int64_t bq = plan.bq;
  const int64_t row0 = rb * bq;
  const int64_t nrows = std::min(bq, plan.rows - row0);
  const int64_t cs = p.out.stride[3];
  for (int64_t i = 0; i < nrows; ++i) {
    const int64_t r = row0 + i, g = r / p.seq_q, qi = r % p.seq_q;
    const int64_t h = hk * p.group() + g;
    const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
    if (p.lse.data) {
      constexpr float kLn2 = 0.6931471805599453f;
      float* lse = static_cast<float*>(const_cast<void*>(p.lse.data));
      lse[b * p.lse.stride[0] + h * p.lse.stride[1] + qi * p.lse.stride[2]] =
          l[i] > 0.0f ? (m[i] + std::log2(l[i])) * kLn2 : -std::numeric_limits<float>::infinity();
    }
    const float* src = o + i * plan.dvp;
    const int64_t base = b * p.out.stride[0] + h * p.out.stride[1] + qi * p.out.stride[2];
    if (cs == 1) {  // rows as they lie: vectors
      const int64_t es = static_cast<int64_t>(dtype_size(p.dtype));
      void* dst = static_cast<char*>(const_cast<void*>(p.out.data)) + base * es;
      switch (p.dtype) {
        case DType::kF32:
          ScaleRowTo<DType::kF32>(src, inv, p.head_dim_v, dst);
          break;
        case DType::kBF16:
          ScaleRowTo<DType::kBF16>(src, inv, p.head_dim_v, dst);
          break;
        case DType::kF16:
          ScaleRowTo<DType::kF16>(src, inv, p.head_dim_v, dst);
          break;
      }
      continue;
    }
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
// row's causal limit. bq: the scores' row stride. With two keys a vector (kKeys 2, decoding few
// rows: half a vector of rows a key), the vector at key j holds keys j and j + 1, one a half.
struct ScoreArgs {
  const float* st;
  const float* bias;
  int64_t bq, j0;
  float scale2;
  bool has_mask, need_causal;
};
template <int kKeys = 1>
HWY_INLINE VF Score(DF d, const ScoreArgs& a, const VF& scale2, const VF& lim, int64_t j,
                    int64_t off) {
  VF x = hn::Mul(hn::LoadU(d, a.st + j * a.bq + off), scale2);
  if (a.has_mask) x = hn::Add(x, hn::LoadU(d, a.bias + j * a.bq + off));
  if (a.need_causal) {
    VF jv = hn::Set(d, static_cast<float>(a.j0 + j));
    if constexpr (kKeys == 2) {  // the upper half's key is the next one
      const size_t half = hn::Lanes(d) / 2;
      jv = hn::Add(jv, hn::IfThenZeroElse(hn::FirstN(d, half), hn::Set(d, 1.0f)));
    }
    x = hn::IfThenElse(hn::Gt(jv, lim), hn::Set(d, -std::numeric_limits<float>::infinity()), x);
  }
  return x;
}

// The vector with its halves swapped: with two keys a vector, each row's other lane.
HWY_INLINE VF SwapHalves(DF d, VF v) {
#if HWY_TARGET == HWY_SCALAR
  (void)d;
  return v;  // one lane never holds two keys
#else
  return hn::ConcatLowerUpper(d, v, v);
#endif
}

// A vector of two keys whose second is past the tile's end: its half -inf.
HWY_INLINE VF FirstKeyOnly(DF d, VF x) {
  return hn::IfThenElse(hn::FirstN(d, hn::Lanes(d) / 2), x,
                        hn::Set(d, -std::numeric_limits<float>::infinity()));
}

// Online softmax, first pass over one S^T tile of nk keys: the new running max m, the shift
// m_use the probabilities take (0 for rows that saw no key yet, so that exp2(-inf - m_use) is
// 0, not NaN), and the rescale factor alpha = 2^(m_old - m_use).
// kKeys 2: two keys a vector (ScoreArgs); every lane pair (r, r + N/2) is one row, and gets
// one max.
template <int NR, int kKeys = 1>
HWY_INLINE void SoftmaxMax(const BlockBuffers& buf, const ScoreArgs& a, int64_t nk) {
  static_assert(kKeys == 1 || (kKeys == 2 && NR == 1), "two keys a vector: one vector of rows");
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const VF neg_inf = hn::Set(d, -std::numeric_limits<float>::infinity());
  const VF scale2 = hn::Set(d, a.scale2);
  for (int v = 0; v < NR; ++v) {
    const int64_t off = v * N;
    const VF lim = hn::LoadU(d, buf.lim + off);
    const VF m_old = hn::LoadU(d, buf.m + off);
    VF mx0 = m_old, mx1 = m_old;
    constexpr int64_t kStep = 2 * kKeys;
    int64_t j = 0;
    for (; j + kStep <= nk; j += kStep) {
      mx0 = hn::Max(mx0, Score<kKeys>(d, a, scale2, lim, j, off));
      mx1 = hn::Max(mx1, Score<kKeys>(d, a, scale2, lim, j + kKeys, off));
    }
    for (; j + kKeys <= nk; j += kKeys) mx0 = hn::Max(mx0, Score<kKeys>(d, a, scale2, lim, j, off));
    VF mx = hn::Max(mx0, mx1);
    if constexpr (kKeys == 2) {
      if (j < nk) mx = hn::Max(mx, FirstKeyOnly(d, Score<kKeys>(d, a, scale2, lim, j, off)));
      mx = hn::Max(mx, SwapHalves(d, mx));  // the row's halves: one max
    }
    const VF m_use = hn::IfThenZeroElse(hn::Eq(mx, neg_inf), mx);
    hn::StoreU(mx, d, buf.m + off);
    hn::StoreU(m_use, d, buf.m_use + off);
    hn::StoreU(Exp2F(d, hn::Sub(m_old, m_use)), d, buf.alpha + off);
  }
}

// Second pass: P^T[j] = 2^(x_j - m_use) in place of the scores; l = l * alpha + sum_j P^T[j].
// kKeys 2: as SoftmaxMax; each lane of l then sums the keys of its half, and the block's end
// adds the halves (RunBlock).
template <int NR, int kKeys = 1>
HWY_INLINE void SoftmaxExp(const BlockBuffers& buf, const ScoreArgs& a, int64_t nk) {
  static_assert(kKeys == 1 || (kKeys == 2 && NR == 1), "two keys a vector: one vector of rows");
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const VF scale2 = hn::Set(d, a.scale2);
  for (int v = 0; v < NR; ++v) {
    const int64_t off = v * N;
    const VF lim = hn::LoadU(d, buf.lim + off);
    const VF m_use = hn::LoadU(d, buf.m_use + off);
    VF sum0 = hn::Zero(d), sum1 = hn::Zero(d);
    const auto p_at = [&](int64_t j, VF x) HWY_ATTR {
      const VF p = Exp2F(d, hn::Sub(x, m_use));
      hn::StoreU(p, d, buf.st + j * a.bq + off);
      return p;
    };
    constexpr int64_t kStep = 2 * kKeys;
    int64_t j = 0;
    for (; j + kStep <= nk; j += kStep) {
      sum0 = hn::Add(sum0, p_at(j, Score<kKeys>(d, a, scale2, lim, j, off)));
      sum1 = hn::Add(sum1, p_at(j + kKeys, Score<kKeys>(d, a, scale2, lim, j + kKeys, off)));
    }
    for (; j + kKeys <= nk; j += kKeys)
      sum0 = hn::Add(sum0, p_at(j, Score<kKeys>(d, a, scale2, lim, j, off)));
    if constexpr (kKeys == 2) {
      if (j < nk)
        sum0 = hn::Add(sum0, p_at(j, FirstKeyOnly(d, Score<kKeys>(d, a, scale2, lim, j, off))));
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
  StoreBlock(p, plan, b, hk, rb, buf.o, buf.m, buf.l);
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

// dst[c * ld + i] = src[i * ls + c] for i < rows, c < cols: a vector's square at a time
// (TransposeSquare), element by element at the edges. Scalar, this was 3% of f32 causal
// prefill on Zen 3 (Q^T of every block).
HWY_INLINE void TransposeRows(const float* src, int64_t ls, int64_t rows, int64_t cols, float* dst,
                              int64_t ld) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(DF()));
  int64_t i0 = 0, c0 = 0;
  for (; i0 + N <= rows; i0 += N) {
    for (c0 = 0; c0 + N <= cols; c0 += N) {
      if (!TransposeSquare(src + i0 * ls + c0, ls, dst + c0 * ld + i0, ld)) break;
    }
    for (int64_t i = i0; i < i0 + N; ++i)
      for (int64_t c = c0; c < cols; ++c) dst[c * ld + i] = src[i * ls + c];
  }
  for (int64_t i = i0; i < rows; ++i)
    for (int64_t c = 0; c < cols; ++c) dst[c * ld + i] = src[i * ls + c];
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

// K rows k0[r * ks] (r < live, zeros after) transposed into tile[c * kQkRows + r], a vector's
// square of columns at a time where the target can (kQkRows at most the lanes); returns the
// columns done.
HWY_INLINE int64_t PackKTileColumns(const float* k0, int64_t ks, int64_t live, int64_t D,
                                    float* tile) {
  const DF d;
  constexpr int64_t kN = static_cast<int64_t>(hn::MaxLanes(DF()));
  if constexpr (kQkRows > kN) {
    (void)d, (void)k0, (void)ks, (void)live, (void)D, (void)tile;
    return 0;
  } else {
    // A column's kN - kQkRows lanes past the tile's rows are zeros: a plain store carries them
    // into the next column, which its own store then writes. The tile's last column, and every
    // column where a masked store costs no more than a plain one (AVX-512), keep to their rows.
    constexpr bool kMaskedStores = HWY_TARGET <= HWY_AVX3;
    const auto tile_rows = hn::FirstN(d, kQkRows);
    int64_t c0 = 0;
    for (; c0 + kN <= D; c0 += kN) {
      VF r[kN];
      for (int64_t i = 0; i < kN; ++i)
        r[i] = i < live && i < kQkRows ? hn::LoadU(d, k0 + i * ks + c0) : hn::Zero(d);
      if (!TransposeSquareRegs(d, r)) return c0;
      for (int64_t c = 0; c < kN; ++c) {
        float* column = tile + (c0 + c) * kQkRows;
        if (kMaskedStores || c0 + c + 1 == D) {
          hn::BlendedStore(r[c], tile_rows, d, column);
        } else {
          hn::StoreU(r[c], d, column);
        }
      }
    }
    return c0;
  }
}

// Packs keys [from, to) (from and to multiples of kQkRows, relative to nothing: absolute keys),
// zeros past seq_k. rows: scratch for a tile's K rows or one V row in fp32 (BlockBuffers::rows).
HWY_INLINE void PackPanels(const Problem& p, const Plan& plan, int64_t b, int64_t hk, Panels& pn,
                           int64_t from, int64_t to, float* rows) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t D = p.head_dim, DV = p.head_dim_v, dvp = plan.dvp, vecs = dvp / N;
  const int64_t es = static_cast<int64_t>(dtype_size(p.dtype));
  const char* kbase =
      static_cast<const char*>(p.k.data) + (b * p.k.stride[0] + hk * p.k.stride[1]) * es;
  const char* vbase =
      static_cast<const char*>(p.v.data) + (b * p.v.stride[0] + hk * p.v.stride[1]) * es;
  const bool k_rows = p.dtype == DType::kF32 && p.k.stride[3] == 1;
  const bool v_rows = p.dtype == DType::kF32 && p.v.stride[3] == 1 && DV == dvp;
  for (int64_t t0 = from; t0 < to; t0 += kQkRows) {
    // K: the tile's rows, transposed.
    float* tile = pn.k.get() + (t0 - pn.base) * D;
    const int64_t live = std::clamp<int64_t>(p.seq_k - t0, 0, kQkRows);
    // K's rows as they lie (fp32, unit stride), else converted into `rows`.
    const float* k0 = rows;
    int64_t ks = D;
    if (k_rows) {
      k0 = reinterpret_cast<const float*>(kbase) + t0 * p.k.stride[2];
      ks = p.k.stride[2];
    } else {
      for (int64_t r = 0; r < live; ++r)
        LoadRow(p.dtype, kbase + (t0 + r) * p.k.stride[2] * es, p.k.stride[3], D, rows + r * D);
    }
    const int64_t c0 = PackKTileColumns(k0, ks, live, D, tile);
    for (int64_t r = 0; c0 < D && r < kQkRows; ++r) {
      for (int64_t c = c0; c < D; ++c) tile[c * kQkRows + r] = r < live ? k0[r * ks + c] : 0.0f;
    }
    // V: each row into each column chunk.
    for (int64_t j = t0; j < t0 + kQkRows; ++j) {
      const float* src = rows;
      if (j >= p.seq_k) {
        std::fill(rows, rows + dvp, 0.0f);
      } else if (v_rows) {
        src = reinterpret_cast<const float*>(vbase) + j * p.v.stride[2];
      } else {
        LoadRow(p.dtype, vbase + j * p.v.stride[2] * es, p.v.stride[3], DV, rows);
        std::fill(rows + DV, rows + dvp, 0.0f);
      }
      for (int64_t n = 0; n < vecs;) {
        const int64_t w = ChunkVecs(n, vecs) * N;
        float* dst = pn.v.get() + n * N * pn.keys + (j - pn.base) * w;
        for (int64_t i = 0; i < w; i += N) hn::Store(hn::LoadU(d, src + n * N + i), d, dst + i);
        n += w / N;
      }
    }
  }
}

// The thread's panels holding keys [j0, j0 + nk) of head (b, hk).
HWY_INLINE const Panels& PanelsFor(const Problem& p, const Plan& plan, int64_t b, int64_t hk,
                                   int64_t split, int64_t j0, int64_t nk, float* rows) {
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
    PackPanels(p, plan, b, hk, pn, pn.base + pn.packed, pn.base + end, rows);
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
      std::fill(qrow, qrow + dp, 0.0f);
      continue;
    }
    LoadRow(p.dtype, QRow(p, plan, b, hk, rb, i), p.q.stride[3], D, qrow);
    std::fill(qrow + D, qrow + dp, 0.0f);
  }
  if (!dot) TransposeRows(buf.qr, dp, bq, D, buf.qt, bq);
  const float min_lim = lims.min, max_lim = lims.max;
  // Decoding few rows (at most half a vector): two keys a vector of scores, one a half, so that
  // the softmax's exps fill every lane (ScoreArgs); the scores' stride is then half a vector,
  // and each row's limit is in both halves.
  const bool two_keys = dot && N >= 2 && 2 * nrows <= N;
  const int64_t ls = two_keys ? N / 2 : bq;
  if (two_keys) std::copy(buf.lim, buf.lim + N / 2, buf.lim + N / 2);

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

  // Decoding bf16 with unit-stride rows of whole vectors: K and V read as they lie, widened in
  // registers (a converted copy would cost more than the bf16 stream it saves).
  const bool bf16_rows = dot && p.dtype == DType::kBF16 && p.k.stride[3] == 1 &&
                         p.v.stride[3] == 1 && D % N == 0 && DV == dvp;
  // V's rows read as pairs where head_dim_v is whole groups of 2N: O in pair order until the
  // block's end (FromPairOrder).
  const bool v_pairs = bf16_rows && DV % (2 * N) == 0;
  // And where the plan takes Q.K on bf16 pairs: the Q rows as bf16 (exact: Q is bf16) in qt,
  // which the dot path leaves unused; the zero rows past nrows too, up to QKDot's groups of 4.
  const bool dp_dot = bf16_rows && plan.dpbf16_dot;
  auto* const q16 = reinterpret_cast<uint16_t*>(buf.qt);
  if (dp_dot) {
    const int64_t rows16 = std::min(bq, (nrows + 3) / 4 * 4);
    for (int64_t i = 0; i < rows16; ++i)
      for (int64_t c = 0; c < D; ++c) q16[i * D + c] = f32_to_bf16(buf.qr[i * dp + c]);
  }

  // Decoding with K and V read as they lie: Q.K asks for the block's V rows as it reads K, P.V
  // for the next block's K rows as it reads V (Companion). In place of asking for a block's
  // rows at once into L1, this took 22-31% less time from DRAM and 24-27% with the KV cache in
  // L3 on Zen 4 (32 KiB L1: a block's V rows are 24-48 KiB), f32 and bf16, GQA 32q/8kv.
  const bool companions = bf16_rows || (dot && k_direct && v_direct);
  const int64_t k_row_bytes = p.k.stride[2] * es, v_row_bytes = p.v.stride[2] * es;

  for (int64_t j0 = kv.lo, nk = kv.first; j0 < kv.hi; j0 += nk, nk = std::min(bk, kv.hi - j0)) {
    const float* va = nullptr;
    int64_t v_rs = 0, panel_keys = 0, key0 = 0;
    const uint16_t* vb = nullptr;  // bf16_rows: the block's V rows as they lie
    const Companion v_rows =
        companions ? Companion{vbase + j0 * v_row_bytes, v_row_bytes} : Companion{};
    const Companion next_k = companions && j0 + nk < kv.hi
                                 ? Companion{kbase + (j0 + nk) * k_row_bytes, k_row_bytes}
                                 : Companion{};
    if (bf16_rows) {
      const auto* kb = reinterpret_cast<const uint16_t*>(kbase) + j0 * p.k.stride[2];
      vb = reinterpret_cast<const uint16_t*>(vbase) + j0 * p.v.stride[2];
      QKDotBf16(dp_dot, nrows, ls, nk, kb, p.k.stride[2], q16, buf.qr, dp, D, buf.st, v_rows);
    } else if (dot) {
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
      QKDot(nrows, ls, nk, ka, k_rs, buf.qr, dp, D, buf.st, v_rows);
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
      const Panels& pn = PanelsFor(p, plan, b, hk, split, j0, nk, buf.rows);
      TileQKPanel<NR>(nk, pn.k_tile(j0, D), buf.qt, bq, D, buf.st, bq);
      va = pn.v.get();
      panel_keys = pn.keys;
      key0 = j0 - pn.base;
    }

    if (has_mask) MaskTile(p, buf.mask_off, nrows, ls, j0, nk, buf.bias);
    const ScoreArgs sa{
        buf.st, buf.bias, ls, j0, scale2, has_mask, static_cast<float>(j0 + nk - 1) > min_lim};
    if (two_keys) {
      SoftmaxMax<1, 2>(buf, sa, nk);
      SoftmaxExp<1, 2>(buf, sa, nk);
    } else {
      SoftmaxMax<NR>(buf, sa, nk);
      SoftmaxExp<NR>(buf, sa, nk);
    }

    // O = alpha O + P V_blk
    if (v_pairs) {
      TilePVRows<DType::kBF16, true>(pv_rows, dvp / N, buf.st, ls, vb, p.v.stride[2], nk, buf.o,
                                     dvp, buf.alpha, next_k);
    } else if (bf16_rows) {
      TilePVRows<DType::kBF16>(pv_rows, dvp / N, buf.st, ls, vb, p.v.stride[2], nk, buf.o, dvp,
                               buf.alpha, next_k);
    } else if (panel_keys > 0) {
      TilePVPanels(pv_rows, dvp / N, buf.st, ls, va, panel_keys, key0, nk, buf.o, dvp, buf.alpha);
    } else {
      TilePVRows(pv_rows, dvp / N, buf.st, ls, va, v_rs, nk, buf.o, dvp, buf.alpha, next_k);
    }
  }

  if (v_pairs) {
    for (int64_t i = 0; i < nrows; ++i) FromPairOrder(buf.o + i * dvp, dvp);
  }
  if (two_keys) {  // each half of l summed its keys (SoftmaxExp)
    for (int64_t i = 0; i < N / 2; ++i) buf.l[i] += buf.l[N / 2 + i];
  }
  FinishBlock(p, plan, b, hk, rb, buf, partial);
}

// Merges the splits of one block: O = sum_s O_s 2^(m_s - m), l = sum_s l_s 2^(m_s - m).
void MergeSplits(const Problem& p, const Plan& plan, int64_t b, int64_t hk, int64_t rb,
                 const float* partials, float* o, float* m_out, float* l) {
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
    m_out[i] = m_use;
  }
  StoreBlock(p, plan, b, hk, rb, o, m_out, l);
}

// Keys per kv block for the fp32 tiles and the dot path (decoding), a multiple of kQkRows.
// Decoding: as many keys as keep a block's V rows within kDecodeBlockBytes. Each of its loops
// asks for the other stream's rows a block ahead (Companion), so the block sets how far the
// asks run ahead of the memory. f32 GQA 32q/8kv decoding on Zen 3 (AVX2, alternating calls, 2
// threads): 24 keys (12 KiB) a block against 48 took 5-9% less time over 4096 and 16384 keys,
// from L3 and DRAM, and the same with K and V in L2; bf16 at 24 keys against 48 (12 KiB either
// way) was within the noise. Why is not settled: this VM exposes no hardware counters.
inline int64_t DefaultBlockKeys(const Problem& p, int64_t rows) {
  constexpr int64_t kTileKeys = 8 * kQkRows;
  if (rows > kDotMaxRows) return kTileKeys;
  const int64_t row_bytes = std::max<int64_t>(1, p.head_dim_v * dtype_size(p.dtype));
  const int64_t fit = kDecodeBlockBytes / row_bytes / kQkRows * kQkRows;
  return std::clamp<int64_t>(fit, kQkRows, kTileKeys);
}

// bk: keys per kv block, a multiple of kQkRows (fp32 panels) and of 32 (AMX pairs); 0 for
// DefaultBlockKeys.
Plan MakePlan(const Problem& p, int threads, int64_t bk = 0) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  Plan plan;
  plan.rows = p.group() * p.seq_q;
  plan.nr = plan.rows <= N ? 1 : 2;
  plan.bq = plan.nr * N;
  plan.bk = bk > 0 ? bk : DefaultBlockKeys(p, plan.rows);
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

}  // namespace HWY_NAMESPACE
}  // namespace backplane::attention::cpu
HWY_AFTER_NAMESPACE();

#endif  // BACKPLANE_ATTENTION_CPU_SDPA_BLOCK_INL_H_
