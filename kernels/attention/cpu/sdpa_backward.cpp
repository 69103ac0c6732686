// The sdpa backward: FlashAttention-2's algorithm on fp32 register tiles. The probabilities are
// recomputed block by block from the forward's logsumexp, never stored whole:
//
//   P  = exp(scale Q K^T + mask - lse)      one [query block x key block] tile at a time
//   dV += P^T dO        dP = dO V^T        dS = P * (dP - D),  D = rowsum(dO * O)
//   dK += scale dS^T Q  dQ += scale dS K
//
// bf16 runs on AMX where it can (sdpa_backward_amx-inl.h).
//
// One work item is one kv head (batch, kv head) with all the query rows of its group: it owns
// that head's dK, dV and dQ outright, so there are no atomics and no cross-thread sums, and
// every thread count gives the same bits. With fewer kv heads than the machine has cores to
// keep busy (batch 1 with GQA or MQA), the fp32 path also cuts each head's keys into chunks
// (KeyChunks): an item is then (kv head, chunk), owning its keys' dK and dV and writing its
// part of dQ to a slot of its own; the parts are summed in chunk order afterwards. Per item the
// operands are converted to fp32 once (K and V also transposed, per key block, for the products
// that take them as columns); the key blocks are the outer loop (dK and dV of a block stay in
// L1/L2), the query blocks the inner one. Every product is one kind of register tile: C[m][:] +=
// A(m, k) B[k][:], A's scalars broadcast (either layout), B's rows loaded as vectors.
//
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/sdpa_backward.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
// foreach_target.h first: it re-includes this file once per target.
#include <hwy/aligned_allocator.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <thread>

#include "common/thread_pool.hpp"
#include "cpu/problem.hpp"
#include "cpu/sdpa_backward-inl.h"
#include "cpu/sdpa_backward_amx-inl.h"

HWY_BEFORE_NAMESPACE();
namespace backplane::attention::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace backward {
using kernels::HWY_NAMESPACE::Exp2F;
// Query rows and keys per tile pair: both multiples of kMr; 64 x 64 fp32 tiles (16 KiB) keep
// P, dS and the mask bias in L1.
constexpr int64_t kBr = 64;
constexpr int64_t kBc = 64;
// Register tile: kMr rows of C x kNv vectors (32 vector registers on AVX-512, 16 on AVX2).
constexpr int kMr = 4;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
constexpr int kNv = 4;
#else
constexpr int kNv = 2;
#endif

// ------------------------------------------------------------------ the products

// C[r][0, NV vectors) (+)= sum_k A(r, k) B[k][..] for kMr rows; A(r, k) = a[r * a_m + k * a_k].
template <int NV>
HWY_INLINE void Tile(int64_t depth, const float* HWY_RESTRICT a, int64_t a_m, int64_t a_k,
                     const float* HWY_RESTRICT b, int64_t ldb, float* HWY_RESTRICT c, int64_t ldc,
                     bool accumulate) {
  const DF d;
  const size_t N = hn::Lanes(d);
  VF acc[kMr][NV];
  for (int r = 0; r < kMr; ++r)
    for (int v = 0; v < NV; ++v)
      acc[r][v] = accumulate ? hn::LoadU(d, c + r * ldc + v * N) : hn::Zero(d);
  for (int64_t k = 0; k < depth; ++k) {
    VF bv[NV];
    for (int v = 0; v < NV; ++v) bv[v] = hn::LoadU(d, b + k * ldb + v * N);
    const float* ak = a + k * a_k;
    for (int r = 0; r < kMr; ++r) {
      const VF av = hn::Set(d, ak[r * a_m]);
      for (int v = 0; v < NV; ++v) acc[r][v] = hn::MulAdd(av, bv[v], acc[r][v]);
    }
  }
  for (int r = 0; r < kMr; ++r)
    for (int v = 0; v < NV; ++v) hn::StoreU(acc[r][v], d, c + r * ldc + v * N);
}

// C[rows][cols] (+)= A B: rows a multiple of kMr, cols of the lanes, depth any.
void Gemm(int64_t rows, int64_t cols, int64_t depth, const float* a, int64_t a_m, int64_t a_k,
          const float* b, int64_t ldb, float* c, int64_t ldc, bool accumulate) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t m0 = 0; m0 < rows; m0 += kMr) {
    const float* am = a + m0 * a_m;
    float* cm = c + m0 * ldc;
    int64_t n0 = 0;
    for (; n0 + kNv * N <= cols; n0 += kNv * N)
      Tile<kNv>(depth, am, a_m, a_k, b + n0, ldb, cm + n0, ldc, accumulate);
    if (kNv > 2 && n0 + 2 * N <= cols) {
      Tile<2>(depth, am, a_m, a_k, b + n0, ldb, cm + n0, ldc, accumulate);
      n0 += 2 * N;
    }
    if (n0 < cols) Tile<1>(depth, am, a_m, a_k, b + n0, ldb, cm + n0, ldc, accumulate);
  }
}

// ------------------------------------------------------------------ one kv head

// The fp32 buffers of one work item, in the worker's scratch (kept between calls).
struct HeadBuffers {
  float* q;           // [rows_p][dp]   Q rows of the group, zero padded
  float* dout;        // [rows_p][dvp]  dO rows
  float* dq;          // [rows_p][dp]   dQ accumulator (unscaled)
  float* delta;       // [rows_p]       D = rowsum(dO * O)
  float* lse2;        // [rows_p]       logsumexp in the log2 domain; +inf: the row sees no key
  float* k;           // [sk_p][dp]     K rows
  float* kt;          // [sk_p / kBc][d][kBc]   K^T per key block
  float* vt;          // [sk_p / kBc][dv][kBc]  V^T per key block
  float* dk;          // [kBc][dp]      dK of the key block
  float* dv;          // [kBc][dvp]     dV of the key block
  float* p;           // [kBr][kBc]     P
  float* ds;          // [kBr][kBc]     dP, then dS
  float* bias;        // [kBr][kBc]     mask bias (log2 domain)
  float* row;         // one O or V row
  int64_t* lim;       // [rows_p]       last key each row sees (-1: none)
  int64_t* mask_off;  // [rows_p]  mask offset of each row
};

struct Dims {
  int64_t rows, rows_p, sk_p, dp, dvp;
};

Dims DimsOf(const Problem& p) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  Dims m;
  m.rows = p.group() * p.seq_q;
  m.rows_p = RoundUp(m.rows, kBr);
  m.sk_p = RoundUp(p.seq_k, kBc);
  m.dp = RoundUp(p.head_dim, N);
  m.dvp = RoundUp(p.head_dim_v, N);
  return m;
}

HeadBuffers AllocHeadBuffers(const Problem& p, const Dims& m) {
  static thread_local hwy::AlignedFreeUniquePtr<float[]> storage;
  static thread_local size_t capacity = 0;
  const size_t rows = static_cast<size_t>(m.rows_p), sk = static_cast<size_t>(m.sk_p);
  const size_t dp = static_cast<size_t>(m.dp), dvp = static_cast<size_t>(m.dvp);
  const size_t d = static_cast<size_t>(p.head_dim), dv = static_cast<size_t>(p.head_dim_v);
  const size_t tile = static_cast<size_t>(kBr * kBc);
  HeadBuffers h{};
  struct Slot {
    float** ptr;
    size_t floats;
  } slots[] = {{&h.q, rows * dp},  {&h.dout, rows * dvp},
               {&h.dq, rows * dp}, {&h.delta, rows},
               {&h.lse2, rows},    {&h.k, sk * dp},
               {&h.kt, sk * d},    {&h.vt, sk * dv},
               {&h.dk, kBc * dp},  {&h.dv, kBc * dvp},
               {&h.p, tile},       {&h.ds, tile},
               {&h.bias, tile},    {&h.row, std::max(dp, dvp)}};
  auto align = [](size_t n) { return (n + 15) / 16 * 16; };
  size_t total = 2 * align(2 * rows);  // lim and mask_off: int64 each
  for (const Slot& s : slots) total += align(s.floats);
  if (total > capacity) {
    storage = hwy::AllocateAligned<float>(total);
    if (!storage) throw std::bad_alloc();
    capacity = total;
  }
  float* base = storage.get();
  for (const Slot& s : slots) {
    *s.ptr = base;
    base += align(s.floats);
  }
  h.lim = reinterpret_cast<int64_t*>(base);
  h.mask_off = reinterpret_cast<int64_t*>(base + align(2 * rows));
  return h;
}

// The keys [begin, end) of one work item: a multiple of kBc wide, end clipped to sk_p.
struct KeyRange {
  int64_t begin, end;
};

// How many chunks each kv head's keys are cut into, and how wide: a function of the shape and
// of the machine's core count only, never of the call's thread count, so that every thread
// count sums dQ in the same order. No cut when the heads alone fill the cores evenly; else
// enough chunks for about two items per core, as long as each item keeps at least two key
// blocks and the dQ parts stay within kMaxPartBytes.
struct KeyChunks {
  int64_t count = 1;
  int64_t keys = 0;  // per chunk
};
constexpr int64_t kMaxPartBytes = int64_t{256} << 20;

KeyChunks KeyChunksOf(const Problem& p, const Dims& m) {
  const int64_t heads = p.batch * p.heads_kv;
  const int64_t cores = std::max<int64_t>(1, std::thread::hardware_concurrency());
  KeyChunks k;
  k.keys = m.sk_p;
  if (heads % cores == 0 || heads >= 2 * cores) return k;
  const int64_t part_bytes = heads * m.rows_p * m.dp * static_cast<int64_t>(sizeof(float));
  const int64_t wanted = std::min({(2 * cores + heads - 1) / heads, m.sk_p / (2 * kBc),
                                   std::max<int64_t>(1, kMaxPartBytes / part_bytes)});
  if (wanted <= 1) return k;
  k.keys = RoundUp((m.sk_p + wanted - 1) / wanted, kBc);
  k.count = (m.sk_p + k.keys - 1) / k.keys;
  return k;
}

// Q, dO, D, the logsumexp and each row's limits for rows [r0, r1) of the group, into h's row
// buffers (h.row: the worker's scratch for one O row).
void LoadRows(const BackwardProblem& bp, const Dims& m, int64_t b, int64_t hk, int64_t r0,
              int64_t r1, const HeadBuffers& h) {
  const Problem& p = bp.fwd;
  const int64_t D = p.head_dim, DV = p.head_dim_v;
  for (int64_t r = r0; r < r1; ++r) {
    float* q = h.q + r * m.dp;
    float* dout = h.dout + r * m.dvp;
    if (r >= m.rows) {  // padding: no key, zero operands
      std::fill(q, q + m.dp, 0.0f);
      std::fill(dout, dout + m.dvp, 0.0f);
      h.delta[r] = 0.0f;
      h.lse2[r] = std::numeric_limits<float>::infinity();
      h.lim[r] = -1;
      h.mask_off[r] = 0;
      continue;
    }
    const QueryRow row = LoadQueryRow(bp, b, hk, r, q, dout, h.row);
    std::fill(q + D, q + m.dp, 0.0f);
    std::fill(dout + DV, dout + m.dvp, 0.0f);
    h.delta[r] = row.delta;
    h.lse2[r] = row.lse2;
    h.lim[r] = row.last_key;
    h.mask_off[r] = row.mask_off;
  }
}

// The row buffers of one kv head laid out from `base`, RowFloats(m) floats: the chunked path
// loads them once per head and shares them between the head's chunks.
int64_t RowFloats(const Dims& m) {
  return m.rows_p * (m.dp + m.dvp + 2 + 2 * 2);  // q, dout, delta, lse2; lim, mask_off: int64
}
void PointRowsAt(float* base, const Dims& m, HeadBuffers* h) {
  h->q = base;
  h->dout = h->q + m.rows_p * m.dp;
  h->delta = h->dout + m.rows_p * m.dvp;
  h->lse2 = h->delta + m.rows_p;
  h->lim = reinterpret_cast<int64_t*>(h->lse2 + m.rows_p);
  h->mask_off = h->lim + m.rows_p;
}

// K, K^T and V^T of keys [keys.begin, keys.end).
void LoadKeys(const BackwardProblem& bp, const Dims& m, int64_t b, int64_t hk, KeyRange keys,
              const HeadBuffers& h) {
  const Problem& p = bp.fwd;
  const DType t = p.dtype;
  const int64_t D = p.head_dim, DV = p.head_dim_v, sk = p.seq_k;
  for (int64_t j = keys.begin; j < keys.end; ++j) {
    float* k = h.k + j * m.dp;
    float* kt = h.kt + (j / kBc) * D * kBc + j % kBc;
    float* vt = h.vt + (j / kBc) * DV * kBc + j % kBc;
    if (j >= sk) {
      std::fill(k, k + m.dp, 0.0f);
      for (int64_t c = 0; c < D; ++c) kt[c * kBc] = 0.0f;
      for (int64_t c = 0; c < DV; ++c) vt[c * kBc] = 0.0f;
      continue;
    }
    LoadRow(t, Row(p.k, t, b, hk, j), p.k.stride[3], D, k);
    std::fill(k + D, k + m.dp, 0.0f);
    for (int64_t c = 0; c < D; ++c) kt[c * kBc] = k[c];
    LoadRow(t, Row(p.v, t, b, hk, j), p.v.stride[3], DV, h.row);
    for (int64_t c = 0; c < DV; ++c) vt[c * kBc] = h.row[c];
  }
}

// bias[r][c] = the mask at (row r0 + r, key j0 + c), log2 domain, for keys below seq_k.
void FillBias(const Problem& p, const HeadBuffers& h, int64_t r0, int64_t j0) {
  const int64_t nk = std::min(kBc, p.seq_k - j0);
  for (int64_t r = 0; r < kBr; ++r) {
    float* row = h.bias + r * kBc;
    MaskRowLog2(p, h.mask_off[r0 + r], j0, nk, row);
    std::fill(row + nk, row + kBc, 0.0f);  // past seq_k: masked by the limits
  }
}

// P = 2^(S scale2 + bias - lse2) in place of S, zero past each row's last key (and below
// 2^-126, as the forward's probabilities).
void Probabilities(const Problem& p, const HeadBuffers& h, int64_t r0, int64_t j0,
                   bool masked_keys) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const VF scale2 = hn::Set(d, p.scale * kLog2e);
  const VF floor = hn::Set(d, -126.0f);
  const bool bias = p.mask_kind != MaskKind::kNone;
  const auto lanes = hn::Iota(d, 0.0f);
  for (int64_t r = 0; r < kBr; ++r) {
    float* s = h.p + r * kBc;
    const VF shift = hn::Set(d, h.lse2[r0 + r]);
    const VF last = hn::Set(d, static_cast<float>(h.lim[r0 + r] - j0));
    for (int64_t c = 0; c < kBc; c += N) {
      VF x = hn::MulSub(hn::LoadU(d, s + c), scale2, shift);
      if (bias) x = hn::Add(x, hn::LoadU(d, h.bias + r * kBc + c));
      auto dead = hn::Lt(x, floor);
      if (masked_keys)
        dead = hn::Or(dead, hn::Gt(hn::Add(lanes, hn::Set(d, static_cast<float>(c))), last));
      hn::StoreU(hn::IfThenZeroElse(dead, Exp2F(d, x)), d, s + c);
    }
  }
}

// dS = P * (dP - D) in place of dP.
void ScoreGradients(const HeadBuffers& h, int64_t r0) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t r = 0; r < kBr; ++r) {
    const VF delta = hn::Set(d, h.delta[r0 + r]);
    float* ds = h.ds + r * kBc;
    const float* pr = h.p + r * kBc;
    for (int64_t c = 0; c < kBc; c += N) {
      hn::StoreU(hn::Mul(hn::LoadU(d, pr + c), hn::Sub(hn::LoadU(d, ds + c), delta)), d, ds + c);
    }
  }
}

// Keys [keys.begin, keys.end) of one kv head: their dK and dV, and dQ's sum over them, either
// stored into grad_q (the item has all the keys) or left unscaled in `dq_part` ([rows_p][dp],
// summed by SumDqParts).
void BackwardHead(const BackwardProblem& bp, const Dims& m, int64_t b, int64_t hk, KeyRange keys,
                  float* dq_part = nullptr, float* shared_rows = nullptr) {
  const Problem& p = bp.fwd;
  HeadBuffers h = AllocHeadBuffers(p, m);
  if (shared_rows) {
    PointRowsAt(shared_rows, m, &h);
  } else {
    LoadRows(bp, m, b, hk, 0, m.rows_p, h);
  }
  LoadKeys(bp, m, b, hk, keys, h);
  float* dq = dq_part ? dq_part : h.dq;
  std::fill(dq, dq + m.rows_p * m.dp, 0.0f);
  const int64_t D = p.head_dim, DV = p.head_dim_v, sk = p.seq_k;
  const int64_t row_blocks = m.rows_p / kBr;
  for (int64_t j0 = keys.begin; j0 < keys.end; j0 += kBc) {
    std::fill(h.dk, h.dk + kBc * m.dp, 0.0f);
    std::fill(h.dv, h.dv + kBc * m.dvp, 0.0f);
    const float* kt = h.kt + (j0 / kBc) * D * kBc;
    const float* vt = h.vt + (j0 / kBc) * DV * kBc;
    for (int64_t ib = 0; ib < row_blocks; ++ib) {
      const int64_t r0 = ib * kBr;
      int64_t lim_min = h.lim[r0], lim_max = h.lim[r0];
      for (int64_t r = r0 + 1; r < r0 + kBr; ++r) {
        lim_min = std::min(lim_min, h.lim[r]);
        lim_max = std::max(lim_max, h.lim[r]);
      }
      if (lim_max < j0) continue;  // no row of the block sees these keys
      const bool masked_keys = lim_min < j0 + kBc - 1;
      Gemm(kBr, kBc, D, h.q + r0 * m.dp, m.dp, 1, kt, kBc, h.p, kBc, false);
      if (p.mask_kind != MaskKind::kNone) FillBias(p, h, r0, j0);
      Probabilities(p, h, r0, j0, masked_keys);
      Gemm(kBc, m.dvp, kBr, h.p, 1, kBc, h.dout + r0 * m.dvp, m.dvp, h.dv, m.dvp, true);
      Gemm(kBr, kBc, DV, h.dout + r0 * m.dvp, m.dvp, 1, vt, kBc, h.ds, kBc, false);
      ScoreGradients(h, r0);
      Gemm(kBc, m.dp, kBr, h.ds, 1, kBc, h.q + r0 * m.dp, m.dp, h.dk, m.dp, true);
      Gemm(kBr, m.dp, kBc, h.ds, kBc, 1, h.k + j0 * m.dp, m.dp, dq + r0 * m.dp, m.dp, true);
    }
    for (int64_t c = 0; c < kBc && j0 + c < sk; ++c) {
      StoreRow(p.dtype, h.dk + c * m.dp, p.scale, D, WritableRow(bp.grad_k, p.dtype, b, hk, j0 + c),
               bp.grad_k.stride[3]);
      StoreRow(p.dtype, h.dv + c * m.dvp, 1.0f, DV, WritableRow(bp.grad_v, p.dtype, b, hk, j0 + c),
               bp.grad_v.stride[3]);
    }
  }
  if (dq_part) return;
  for (int64_t r = 0; r < m.rows; ++r) {
    const int64_t g = r / p.seq_q, qi = r % p.seq_q, hq = hk * p.group() + g;
    StoreRow(p.dtype, h.dq + r * m.dp, p.scale, D, WritableRow(bp.grad_q, p.dtype, b, hq, qi),
             bp.grad_q.stride[3]);
  }
}

// dQ of rows [r0, r1) of one kv head: its chunks' parts summed in chunk order, scaled, stored.
void SumDqParts(const BackwardProblem& bp, const Dims& m, int64_t b, int64_t hk, int64_t r0,
                int64_t r1, const float* parts, int64_t count) {
  const Problem& p = bp.fwd;
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t part = m.rows_p * m.dp;
  const HeadBuffers h = AllocHeadBuffers(p, m);
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t c = 0; c < m.dp; c += N) {
      VF sum = hn::LoadU(d, parts + r * m.dp + c);
      for (int64_t k = 1; k < count; ++k)
        sum = hn::Add(sum, hn::LoadU(d, parts + k * part + r * m.dp + c));
      hn::StoreU(sum, d, h.row + c);
    }
    const int64_t g = r / p.seq_q, qi = r % p.seq_q, hq = hk * p.group() + g;
    StoreRow(p.dtype, h.row, p.scale, p.head_dim, WritableRow(bp.grad_q, p.dtype, b, hq, qi),
             bp.grad_q.stride[3]);
  }
}

float* DqPartScratch(size_t floats) {
  static thread_local hwy::AlignedFreeUniquePtr<float[]> storage;
  static thread_local size_t capacity = 0;
  if (floats > capacity) {
    storage = hwy::AllocateAligned<float>(floats);
    if (!storage) throw std::bad_alloc();
    capacity = floats;
  }
  return storage.get();
}

}  // namespace backward

void RunBackward(const BackwardProblem& bp, int threads, RunInfo* info) {
  const Problem& p = bp.fwd;
  const backward::Dims m = backward::DimsOf(p);
  void (*head)(const BackwardProblem&, int64_t, int64_t) = nullptr;
  const char* tile_kernel = "f32-fma";
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if (p.dtype == DType::kBF16 && amx_bf16_available()) {
    head = &backward::AmxBackwardHead;
    tile_kernel = "amx-bf16";
  }
#endif
  if (info) {
    info->target = hwy::TargetName(HWY_TARGET);
    info->tile_kernel = tile_kernel;
  }
  kernels::ThreadPool& pool = kernels::ThreadPool::global();
  const backward::KeyChunks chunks = head ? backward::KeyChunks{} : backward::KeyChunksOf(p, m);
  if (chunks.count == 1) {
    pool.parallel_for(p.batch * p.heads_kv, threads, [&](int64_t item, int) {
      const int64_t b = item / p.heads_kv, hk = item % p.heads_kv;
      if (head) {
        head(bp, b, hk);
      } else {
        backward::BackwardHead(bp, m, b, hk, {0, m.sk_p});
      }
    });
    return;
  }
  // On the calling thread's scratch (kept): each head's rows, loaded once for all its chunks,
  // then the dQ parts, [kv head][chunk][rows_p][dp].
  const int64_t heads = p.batch * p.heads_kv;
  const int64_t part = m.rows_p * m.dp, rows = backward::RowFloats(m);
  float* shared_rows =
      backward::DqPartScratch(static_cast<size_t>(heads * (rows + chunks.count * part)));
  float* parts = shared_rows + heads * rows;
  const int64_t row_blocks = m.rows_p / backward::kBr;
  pool.parallel_for(heads * row_blocks, threads, [&](int64_t item, int) {
    const int64_t head_item = item / row_blocks, r0 = (item % row_blocks) * backward::kBr;
    backward::HeadBuffers h = backward::AllocHeadBuffers(p, m);
    backward::PointRowsAt(shared_rows + head_item * rows, m, &h);
    backward::LoadRows(bp, m, head_item / p.heads_kv, head_item % p.heads_kv, r0,
                       r0 + backward::kBr, h);
  });
  pool.parallel_for(heads * chunks.count, threads, [&](int64_t item, int) {
    const int64_t head_item = item / chunks.count, chunk = item % chunks.count;
    const int64_t begin = chunk * chunks.keys;
    backward::BackwardHead(bp, m, head_item / p.heads_kv, head_item % p.heads_kv,
                           {begin, std::min(m.sk_p, begin + chunks.keys)}, parts + item * part,
                           shared_rows + head_item * rows);
  });
  // Then dQ, a block of kBr rows of one head per item.
  pool.parallel_for(heads * row_blocks, threads, [&](int64_t item, int) {
    const int64_t head_item = item / row_blocks, r0 = (item % row_blocks) * backward::kBr;
    backward::SumDqParts(bp, m, head_item / p.heads_kv, head_item % p.heads_kv, r0,
                         std::min(m.rows, r0 + backward::kBr),
                         parts + head_item * chunks.count * part, chunks.count);
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace backplane::attention::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace backplane::attention::cpu {

HWY_EXPORT(RunBackward);

void run_sdpa_backward(const BackwardProblem& p, int threads, RunInfo* info) {
  HWY_DYNAMIC_DISPATCH(RunBackward)(p, threads, info);
}

}  // namespace backplane::attention::cpu
#endif  // HWY_ONCE
