// The attention backward's bf16 tiles on AMX (CPUs with AMX-BF16, where Linux grants the
// process the tile state): every product on TDPBF16PS, the softmax recomputation and dS in
// fp32 on the vector units. The tiles are transposed against the fp32 path's, keys in rows and
// query rows across the lanes, so that each product finds its operands in a layout packed once
// per head and no tile is transposed in the loop:
//   S^T  [key][row]  = K rows          x  Q^T pairs (along head_dim), per row block
//   dV  [key][dim] += P^T rows (bf16)  x  dO pairs (along rows)
//   dP^T [key][row]  = V rows          x  dO^T pairs (along head_dim_v), per row block
//   dK  [key][dim] += dS^T rows (bf16) x  Q pairs (along rows)
//   dQ^T [dim][row] += K^T rows        x  dS^T pairs (along keys), per row block
// P and dS are rounded to bf16 for their products, as fused attention backwards do; D, the
// logsumexp and the accumulators stay fp32. float16 inputs take the fp32 tiles (bf16 would drop
// three bits of their mantissa).
// Included once per SIMD target (sdpa_backward.cpp's foreach_target), hence the toggle guard.
#if defined(BACKPLANE_ATTENTION_CPU_SDPA_BACKWARD_AMX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef BACKPLANE_ATTENTION_CPU_SDPA_BACKWARD_AMX_INL_H_
#undef BACKPLANE_ATTENTION_CPU_SDPA_BACKWARD_AMX_INL_H_
#else
#define BACKPLANE_ATTENTION_CPU_SDPA_BACKWARD_AMX_INL_H_
#endif

#include <hwy/aligned_allocator.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <new>

#include "cpu/amx-inl.h"
#include "cpu/sdpa_backward-inl.h"

HWY_BEFORE_NAMESPACE();
namespace backplane::attention::cpu {
namespace HWY_NAMESPACE {
namespace backward {

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL

using kernels::HWY_NAMESPACE::Exp2F;
using kernels::HWY_NAMESPACE::ToBf16Bits;

// Query rows and keys per tile pair (multiples of 32, AmxGemm's step).
constexpr int64_t kAmxRows = 64;
constexpr int64_t kAmxKeys = 64;

struct AmxDims {
  int64_t rows, rows_p, sk_p, dpad, dvpad, row_blocks;
  bool padded;  // some dim is not a whole tile: the packed operands start zeroed
};

HWY_INLINE AmxDims AmxDimsOf(const Problem& p) {
  AmxDims m;
  m.rows = p.group() * p.seq_q;
  m.rows_p = RoundUp(m.rows, kAmxRows);
  m.sk_p = RoundUp(p.seq_k, kAmxKeys);
  m.dpad = RoundUp(p.head_dim, 32);
  m.dvpad = RoundUp(p.head_dim_v, 32);
  m.row_blocks = m.rows_p / kAmxRows;
  m.padded =
      m.rows != m.rows_p || p.seq_k != m.sk_p || p.head_dim != m.dpad || p.head_dim_v != m.dvpad;
  return m;
}

// One work item's buffers in the worker's scratch (kept between calls). Pairs are 32-bit words
// of two bf16, the lower one first.
struct AmxBuffers {
  uint16_t* k;         // [sk_p][dpad]                K rows
  uint16_t* kt;        // [sk_p / keys][dpad][keys]   K^T per key block
  uint16_t* v;         // [sk_p][dvpad]               V rows
  uint32_t* qt;        // [row_blocks][dpad / 2][rows_per_block]   Q^T pairs along head_dim
  uint32_t* q;         // [rows_p / 2][dpad]          Q pairs along rows
  uint32_t* dout;      // [rows_p / 2][dvpad]         dO pairs along rows
  uint32_t* dot;       // [row_blocks][dvpad / 2][rows_per_block]  dO^T pairs along head_dim_v
  uint32_t* ds_pairs;  // [keys / 2][rows]        dS^T pairs along keys
  uint16_t* p_rows;    // [keys][rows]            P^T in bf16
  uint16_t* ds_rows;   // [keys][rows]            dS^T in bf16
  float* dqt;          // [row_blocks][dpad][rows_per_block]  dQ^T accumulator (unscaled)
  float* dk;           // [keys][dpad]
  float* dv;           // [keys][dvpad]
  float* st;           // [keys][rows]  S^T, then P^T
  float* dpt;          // [keys][rows]  dP^T
  float* bias;         // [keys][rows]  mask bias (log2 domain)
  float* delta;        // [rows_p]
  float* lse2;         // [rows_p]
  float* lim;          // [rows_p] last key seen, as float (-1: none)
  float* row;          // [max(dpad, dvpad, keys)] x 3: one row of q, dO and O or a mask row
  int64_t* mask_off;   // [rows_p]
};

HWY_INLINE AmxBuffers AllocAmxBuffers(const AmxDims& m) {
  static thread_local hwy::AlignedFreeUniquePtr<uint8_t[]> storage;
  static thread_local size_t capacity = 0;
  const size_t rows = static_cast<size_t>(m.rows_p), sk = static_cast<size_t>(m.sk_p);
  const size_t dpad = static_cast<size_t>(m.dpad), dvpad = static_cast<size_t>(m.dvpad);
  const size_t tile = static_cast<size_t>(kAmxRows * kAmxKeys);
  const size_t row = std::max({dpad, dvpad, static_cast<size_t>(kAmxKeys)});
  AmxBuffers h{};
  struct Slot {
    void** ptr;
    size_t bytes;
  } slots[] = {{reinterpret_cast<void**>(&h.k), sk * dpad * 2},
               {reinterpret_cast<void**>(&h.kt), sk * dpad * 2},
               {reinterpret_cast<void**>(&h.v), sk * dvpad * 2},
               {reinterpret_cast<void**>(&h.qt), rows * dpad * 2},
               {reinterpret_cast<void**>(&h.q), rows * dpad * 2},
               {reinterpret_cast<void**>(&h.dout), rows * dvpad * 2},
               {reinterpret_cast<void**>(&h.dot), rows * dvpad * 2},
               {reinterpret_cast<void**>(&h.ds_pairs), tile * 2},
               {reinterpret_cast<void**>(&h.p_rows), tile * 2},
               {reinterpret_cast<void**>(&h.ds_rows), tile * 2},
               {reinterpret_cast<void**>(&h.dqt), rows * dpad * 4},
               {reinterpret_cast<void**>(&h.dk), kAmxKeys * dpad * 4},
               {reinterpret_cast<void**>(&h.dv), kAmxKeys * dvpad * 4},
               {reinterpret_cast<void**>(&h.st), tile * 4},
               {reinterpret_cast<void**>(&h.dpt), tile * 4},
               {reinterpret_cast<void**>(&h.bias), tile * 4},
               {reinterpret_cast<void**>(&h.delta), rows * 4},
               {reinterpret_cast<void**>(&h.lse2), rows * 4},
               {reinterpret_cast<void**>(&h.lim), rows * 4},
               {reinterpret_cast<void**>(&h.row), 3 * row * 4},
               {reinterpret_cast<void**>(&h.mask_off), rows * 8}};
  auto align = [](size_t n) { return (n + 63) / 64 * 64; };
  size_t total = 0;
  for (const Slot& s : slots) total += align(s.bytes);
  if (total > capacity) {
    storage = hwy::AllocateAligned<uint8_t>(total);
    if (!storage) throw std::bad_alloc();
    capacity = total;
  }
  uint8_t* base = storage.get();
  for (const Slot& s : slots) {
    *s.ptr = base;
    base += align(s.bytes);
  }
  return h;
}

// The head's operands in the layouts above, and each query row's state.
HWY_INLINE void PackAmxHead(const BackwardProblem& bp, const AmxDims& m, int64_t b, int64_t hk,
                            const AmxBuffers& h) {
  const Problem& p = bp.fwd;
  const DType t = p.dtype;
  const int64_t D = p.head_dim, DV = p.head_dim_v, R = kAmxRows, K = kAmxKeys;
  if (m.padded) {
    const size_t rows = static_cast<size_t>(m.rows_p), sk = static_cast<size_t>(m.sk_p);
    const size_t dpad = static_cast<size_t>(m.dpad), dvpad = static_cast<size_t>(m.dvpad);
    std::memset(h.k, 0, sk * dpad * 2);
    std::memset(h.kt, 0, sk * dpad * 2);
    std::memset(h.v, 0, sk * dvpad * 2);
    std::memset(h.qt, 0, rows * dpad * 2);
    std::memset(h.q, 0, rows * dpad * 2);
    std::memset(h.dout, 0, rows * dvpad * 2);
    std::memset(h.dot, 0, rows * dvpad * 2);
  }
  const int64_t row_len = std::max({m.dpad, m.dvpad, K});
  float* qrow = h.row;
  float* drow = h.row + row_len;
  float* scratch = h.row + 2 * row_len;
  auto* qt = reinterpret_cast<uint16_t*>(h.qt);
  auto* q = reinterpret_cast<uint16_t*>(h.q);
  auto* dot = reinterpret_cast<uint16_t*>(h.dot);
  auto* dout = reinterpret_cast<uint16_t*>(h.dout);
  for (int64_t r = 0; r < m.rows_p; ++r) {
    if (r >= m.rows) {  // padding: no key, zero operands
      h.delta[r] = 0.0f;
      h.lse2[r] = std::numeric_limits<float>::infinity();
      h.lim[r] = -1.0f;
      h.mask_off[r] = 0;
      continue;
    }
    const QueryRow row = LoadQueryRow(bp, b, hk, r, qrow, drow, scratch);
    h.delta[r] = row.delta;
    h.lse2[r] = row.lse2;
    h.lim[r] = static_cast<float>(row.last_key);
    h.mask_off[r] = row.mask_off;
    const int64_t rb = r / R, rr = r % R;
    for (int64_t c = 0; c < D; ++c) {
      const uint16_t x = f32_to_bf16(qrow[c]);
      qt[((rb * (m.dpad / 2) + c / 2) * R + rr) * 2 + (c & 1)] = x;
      q[((r / 2) * m.dpad + c) * 2 + (r & 1)] = x;
    }
    for (int64_t c = 0; c < DV; ++c) {
      const uint16_t x = f32_to_bf16(drow[c]);
      dot[((rb * (m.dvpad / 2) + c / 2) * R + rr) * 2 + (c & 1)] = x;
      dout[((r / 2) * m.dvpad + c) * 2 + (r & 1)] = x;
    }
  }
  for (int64_t j = 0; j < p.seq_k; ++j) {
    LoadRow(t, Row(p.k, t, b, hk, j), p.k.stride[3], D, scratch);
    uint16_t* kt = h.kt + (j / K) * m.dpad * K + j % K;
    for (int64_t c = 0; c < D; ++c) {
      const uint16_t x = f32_to_bf16(scratch[c]);
      h.k[j * m.dpad + c] = x;
      kt[c * K] = x;
    }
    LoadRow(t, Row(p.v, t, b, hk, j), p.v.stride[3], DV, scratch);
    for (int64_t c = 0; c < DV; ++c) h.v[j * m.dvpad + c] = f32_to_bf16(scratch[c]);
  }
}

// P^T = 2^(S^T scale2 + bias - lse2) in place of S^T and in bf16 rows; zero past each row's
// last key and below 2^-126.
HWY_INLINE void AmxProbabilities(const Problem& p, const AmxBuffers& h, int64_t r0, int64_t j0,
                                 bool masked_keys) {
  const DF d;
  const hn::Rebind<uint16_t, DF> d16;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const VF scale2 = hn::Set(d, p.scale * kLog2e);
  const VF floor = hn::Set(d, -126.0f);
  const bool bias = p.mask_kind != MaskKind::kNone;
  for (int64_t c = 0; c < kAmxKeys; ++c) {
    float* s = h.st + c * kAmxRows;
    const VF key = hn::Set(d, static_cast<float>(j0 + c));
    for (int64_t r = 0; r < kAmxRows; r += N) {
      VF x = hn::MulSub(hn::LoadU(d, s + r), scale2, hn::LoadU(d, h.lse2 + r0 + r));
      if (bias) x = hn::Add(x, hn::LoadU(d, h.bias + c * kAmxRows + r));
      auto dead = hn::Lt(x, floor);
      if (masked_keys) dead = hn::Or(dead, hn::Gt(key, hn::LoadU(d, h.lim + r0 + r)));
      const VF pr = hn::IfThenZeroElse(dead, Exp2F(d, x));
      hn::StoreU(pr, d, s + r);
      hn::StoreU(ToBf16Bits(d, pr), d16, h.p_rows + c * kAmxRows + r);
    }
  }
}

// dS^T = P^T (dP^T - D), as bf16 rows and as pairs along keys.
HWY_INLINE void AmxScoreGradients(const AmxBuffers& h, int64_t r0) {
  const DF d;
  const hn::Rebind<uint16_t, DF> d16;
  const hn::RebindToUnsigned<DF> du;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  for (int64_t c = 0; c < kAmxKeys; c += 2) {
    for (int64_t r = 0; r < kAmxRows; r += N) {
      const VF delta = hn::LoadU(d, h.delta + r0 + r);
      const int64_t i0 = c * kAmxRows + r, i1 = i0 + kAmxRows;
      const VF ds0 = hn::Mul(hn::LoadU(d, h.st + i0), hn::Sub(hn::LoadU(d, h.dpt + i0), delta));
      const VF ds1 = hn::Mul(hn::LoadU(d, h.st + i1), hn::Sub(hn::LoadU(d, h.dpt + i1), delta));
      const auto b0 = ToBf16Bits(d, ds0), b1 = ToBf16Bits(d, ds1);
      hn::StoreU(b0, d16, h.ds_rows + i0);
      hn::StoreU(b1, d16, h.ds_rows + i1);
      const auto pair = hn::Or(hn::PromoteTo(du, b0), hn::ShiftLeft<16>(hn::PromoteTo(du, b1)));
      hn::StoreU(pair, du, h.ds_pairs + (c / 2) * kAmxRows + r);
    }
  }
}

BACKPLANE_AMX_TARGET HWY_NOINLINE void AmxBackwardHead(const BackwardProblem& bp, int64_t b,
                                                       int64_t hk) {
  const Problem& p = bp.fwd;
  const AmxDims m = AmxDimsOf(p);
  const AmxBuffers h = AllocAmxBuffers(m);
  PackAmxHead(bp, m, b, hk, h);
  const int64_t R = kAmxRows, K = kAmxKeys, dpad = m.dpad, dvpad = m.dvpad;
  std::fill(h.dqt, h.dqt + m.rows_p * dpad, 0.0f);
  const int64_t row_len = std::max({dpad, dvpad, K});
  float* scratch = h.row + 2 * row_len;
  AmxConfigure();
  for (int64_t j0 = 0; j0 < m.sk_p; j0 += K) {
    std::fill(h.dk, h.dk + K * dpad, 0.0f);
    std::fill(h.dv, h.dv + K * dvpad, 0.0f);
    const int64_t nk = std::min(K, p.seq_k - j0);
    for (int64_t rb = 0; rb < m.row_blocks; ++rb) {
      const int64_t r0 = rb * R;
      const auto [lo, hi] = std::minmax_element(h.lim + r0, h.lim + r0 + R);
      if (*hi < static_cast<float>(j0)) continue;  // no row of the block sees these keys
      const bool masked_keys = *lo < static_cast<float>(j0 + K - 1);
      AmxGemm(K, R, dpad, h.k + j0 * dpad, dpad, h.qt + rb * (dpad / 2) * R, R, h.st, R, false);
      if (p.mask_kind != MaskKind::kNone) {
        for (int64_t r = 0; r < R; ++r) {
          MaskRowLog2(p, h.mask_off[r0 + r], j0, nk, scratch);
          for (int64_t c = 0; c < nk; ++c) h.bias[c * R + r] = scratch[c];
        }
      }
      AmxProbabilities(p, h, r0, j0, masked_keys);
      AmxGemm(K, dvpad, R, h.p_rows, R, h.dout + (r0 / 2) * dvpad, dvpad, h.dv, dvpad, true);
      AmxGemm(K, R, dvpad, h.v + j0 * dvpad, dvpad, h.dot + rb * (dvpad / 2) * R, R, h.dpt, R,
              false);
      AmxScoreGradients(h, r0);
      AmxGemm(K, dpad, R, h.ds_rows, R, h.q + (r0 / 2) * dpad, dpad, h.dk, dpad, true);
      AmxGemm(dpad, R, K, h.kt + (j0 / K) * dpad * K, K, h.ds_pairs, R, h.dqt + rb * dpad * R, R,
              true);
    }
    for (int64_t c = 0; c < nk; ++c) {
      StoreRow(p.dtype, h.dk + c * dpad, p.scale, p.head_dim,
               WritableRow(bp.grad_k, p.dtype, b, hk, j0 + c), bp.grad_k.stride[3]);
      StoreRow(p.dtype, h.dv + c * dvpad, 1.0f, p.head_dim_v,
               WritableRow(bp.grad_v, p.dtype, b, hk, j0 + c), bp.grad_v.stride[3]);
    }
  }
  _tile_release();
  for (int64_t r = 0; r < m.rows; ++r) {
    const int64_t rb = r / R, rr = r % R;
    const float* col = h.dqt + rb * dpad * R + rr;
    for (int64_t c = 0; c < p.head_dim; ++c) scratch[c] = col[c * R];
    const int64_t g = r / p.seq_q, qi = r % p.seq_q, hq = hk * p.group() + g;
    StoreRow(p.dtype, scratch, p.scale, p.head_dim, WritableRow(bp.grad_q, p.dtype, b, hq, qi),
             bp.grad_q.stride[3]);
  }
}

#endif  // HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL

}  // namespace backward
}  // namespace HWY_NAMESPACE
}  // namespace backplane::attention::cpu
HWY_AFTER_NAMESPACE();

#endif  // BACKPLANE_ATTENTION_CPU_SDPA_BACKWARD_AMX_INL_H_
