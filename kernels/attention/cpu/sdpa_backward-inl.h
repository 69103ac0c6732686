// The attention backward's operand handling, shared by its fp32 tiles (sdpa_backward.cpp) and
// its AMX tiles (sdpa_backward_amx-inl.h): rows read as fp32 and written back in the operands'
// dtype, and the per-row state of a query row (D = rowsum(dO O), the logsumexp in the log2
// domain, the last key it sees, its mask offset). Names live in namespace `backward`, apart
// from the forward's (sdpa_block-inl.h) in the same per-target namespace.
// Included once per SIMD target (sdpa_backward.cpp's foreach_target), hence the toggle guard.
#if defined(BACKPLANE_ATTENTION_CPU_SDPA_BACKWARD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef BACKPLANE_ATTENTION_CPU_SDPA_BACKWARD_INL_H_
#undef BACKPLANE_ATTENTION_CPU_SDPA_BACKWARD_INL_H_
#else
#define BACKPLANE_ATTENTION_CPU_SDPA_BACKWARD_INL_H_
#endif

#include <hwy/highway.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "common/simd-inl.h"
#include "cpu/problem.hpp"

HWY_BEFORE_NAMESPACE();
namespace backplane::attention::cpu {
namespace HWY_NAMESPACE {
namespace backward {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
using kernels::HWY_NAMESPACE::LoadF;
using kernels::HWY_NAMESPACE::StoreF;

constexpr float kLog2e = 1.4426950408889634f;

HWY_INLINE int64_t RoundUp(int64_t n, int64_t m) {
  return (n + m - 1) / m * m;
}

// ------------------------------------------------------------------ operands in fp32

// dst[0..n) = float(src[i * stride]), src of dtype t.
HWY_INLINE void LoadRow(DType t, const void* src, int64_t stride, int64_t n, float* dst) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t i = 0;
  if (stride == 1) {
    switch (t) {
      case DType::kF32:
        std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
        return;
      case DType::kBF16:
        for (; i + N <= n; i += N) hn::StoreU(LoadF<DType::kBF16>(d, src, i), d, dst + i);
        break;
      case DType::kF16:
        for (; i + N <= n; i += N) hn::StoreU(LoadF<DType::kF16>(d, src, i), d, dst + i);
        break;
    }
  }
  for (; i < n; ++i) {
    switch (t) {
      case DType::kF32:
        dst[i] = static_cast<const float*>(src)[i * stride];
        break;
      case DType::kBF16:
        dst[i] = bf16_to_f32(static_cast<const uint16_t*>(src)[i * stride]);
        break;
      case DType::kF16:
        dst[i] = f16_to_f32(static_cast<const uint16_t*>(src)[i * stride]);
        break;
    }
  }
}

// dst[i * stride] = src[i] * factor in dtype t, for i < n.
HWY_INLINE void StoreRow(DType t, const float* src, float factor, int64_t n, void* dst,
                         int64_t stride) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const VF f = hn::Set(d, factor);
  int64_t i = 0;
  if (stride == 1) {
    switch (t) {
      case DType::kF32:
        for (; i + N <= n; i += N)
          StoreF<DType::kF32>(d, hn::Mul(hn::LoadU(d, src + i), f), dst, i);
        break;
      case DType::kBF16:
        for (; i + N <= n; i += N)
          StoreF<DType::kBF16>(d, hn::Mul(hn::LoadU(d, src + i), f), dst, i);
        break;
      case DType::kF16:
        for (; i + N <= n; i += N)
          StoreF<DType::kF16>(d, hn::Mul(hn::LoadU(d, src + i), f), dst, i);
        break;
    }
  }
  for (; i < n; ++i) {
    const float x = src[i] * factor;
    switch (t) {
      case DType::kF32:
        static_cast<float*>(dst)[i * stride] = x;
        break;
      case DType::kBF16:
        static_cast<uint16_t*>(dst)[i * stride] = f32_to_bf16(x);
        break;
      case DType::kF16:
        static_cast<uint16_t*>(dst)[i * stride] = f32_to_f16(x);
        break;
    }
  }
}

// Row (i0, i1, i2) of an operand; the gradients' rows are written (WritableRow).
HWY_INLINE const void* Row(const Operand& o, DType t, int64_t i0, int64_t i1, int64_t i2) {
  const int64_t off = i0 * o.stride[0] + i1 * o.stride[1] + i2 * o.stride[2];
  return static_cast<const char*>(o.data) + off * static_cast<int64_t>(dtype_size(t));
}
HWY_INLINE void* WritableRow(const Operand& o, DType t, int64_t i0, int64_t i1, int64_t i2) {
  return const_cast<void*>(Row(o, t, i0, i1, i2));
}

// What the backward needs of query row r of kv head (b, hk) (r < group * seq_q).
struct QueryRow {
  float delta;       // D = rowsum(dO * O)
  float lse2;        // logsumexp * log2(e); +inf where the row sees no key (P = 0)
  int64_t last_key;  // the last key the row sees (causal, seq_k), -1: none
  int64_t mask_off;  // the mask's offset of (b, head, query)
};

// Loads row r's query into q[0, head_dim) and output gradient into dout[0, head_dim_v) as fp32
// (`scratch` holds head_dim_v floats), and returns its state.
HWY_INLINE QueryRow LoadQueryRow(const BackwardProblem& bp, int64_t b, int64_t hk, int64_t r,
                                 float* q, float* dout, float* scratch) {
  const Problem& p = bp.fwd;
  const DType t = p.dtype;
  const int64_t g = r / p.seq_q, qi = r % p.seq_q, hq = hk * p.group() + g;
  LoadRow(t, Row(p.q, t, b, hq, qi), p.q.stride[3], p.head_dim, q);
  LoadRow(t, Row(bp.grad_out, t, b, hq, qi), bp.grad_out.stride[3], p.head_dim_v, dout);
  LoadRow(t, Row(p.out, t, b, hq, qi), p.out.stride[3], p.head_dim_v, scratch);
  QueryRow row;
  row.delta = 0.0f;
  for (int64_t c = 0; c < p.head_dim_v; ++c) row.delta += dout[c] * scratch[c];
  const float inf = std::numeric_limits<float>::infinity();
  const float lse = *static_cast<const float*>(Row(p.lse, DType::kF32, b, hq, qi));
  row.lse2 = lse == -inf ? inf : lse * kLog2e;
  const int64_t last = p.causal ? std::min(p.causal_last_key(qi), p.seq_k - 1) : p.seq_k - 1;
  row.last_key = std::max<int64_t>(last, -1);
  row.mask_off = b * p.mask.stride[0] + hq * p.mask.stride[1] + qi * p.mask.stride[2];
  return row;
}

// out[c] = the mask at (row's offset, key j0 + c) in the log2 domain, for c < n.
HWY_INLINE void MaskRowLog2(const Problem& p, int64_t mask_off, int64_t j0, int64_t n, float* out) {
  const int64_t s3 = p.mask.stride[3];
  const int64_t base = mask_off + j0 * s3;
  const float neg_inf = -std::numeric_limits<float>::infinity();
  switch (p.mask_kind) {
    case MaskKind::kNone:
      std::fill(out, out + n, 0.0f);
      break;
    case MaskKind::kBool: {
      const auto* mk = static_cast<const uint8_t*>(p.mask.data) + base;
      for (int64_t c = 0; c < n; ++c) out[c] = mk[c * s3] ? 0.0f : neg_inf;
      break;
    }
    case MaskKind::kAdditiveF32: {
      const auto* mk = static_cast<const float*>(p.mask.data) + base;
      for (int64_t c = 0; c < n; ++c) out[c] = mk[c * s3] * kLog2e;
      break;
    }
    case MaskKind::kAdditiveBF16: {
      const auto* mk = static_cast<const uint16_t*>(p.mask.data) + base;
      for (int64_t c = 0; c < n; ++c) out[c] = bf16_to_f32(mk[c * s3]) * kLog2e;
      break;
    }
    case MaskKind::kAdditiveF16: {
      const auto* mk = static_cast<const uint16_t*>(p.mask.data) + base;
      for (int64_t c = 0; c < n; ++c) out[c] = f16_to_f32(mk[c * s3]) * kLog2e;
      break;
    }
  }
}

}  // namespace backward
}  // namespace HWY_NAMESPACE
}  // namespace backplane::attention::cpu
HWY_AFTER_NAMESPACE();

#endif  // BACKPLANE_ATTENTION_CPU_SDPA_BACKWARD_INL_H_
