// Internal: a validated attention call in a flat form the kernels read. No compatibility promise.
#pragma once

#include "attention/attention.hpp"
#include "attention/checks.hpp"
#include "common/tensor.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace backplane::attention::cpu {

using kernels::DType;
using kernels::dtype_size;

enum class MaskKind {
  kNone,
  kBool,         // uint8 storage, nonzero = keep
  kAdditiveF32,  // float32 added to the scaled scores
  kAdditiveBF16,
  kAdditiveF16,
};

// One operand: base pointer and strides in elements over [batch, heads, seq, dim].
using Operand = StridedView;

struct Problem {
  DType dtype = DType::kF32;
  int64_t batch = 0, heads_q = 0, heads_kv = 0, seq_q = 0, seq_k = 0, head_dim = 0, head_dim_v = 0;
  Operand q, k, v, out;
  MaskKind mask_kind = MaskKind::kNone;
  Operand mask;
  bool causal = false;
  float scale = 1.0f;

  int64_t group() const { return heads_q / heads_kv; }
  // Causal limit of query i: the last key index it may see (may be negative: sees none).
  int64_t causal_last_key(int64_t i) const { return i + seq_k - seq_q; }
};

// Built by validate(); `problem` is filled only when the status is ok.
Status make_problem(const Tensors& tensors, const Options& options, Problem* problem);

// The implementations; the Problem is valid and non-empty.
void run_eager(const Problem& p, int threads);
// Fills info's target and tile_kernel (info may be NULL).
void run_sdpa(const Problem& p, int threads, RunInfo* info);
// The Highway target run_sdpa dispatches to now.
const char* sdpa_target();
// Whether bf16 tiles run on AMX here (with the AVX3 target); asks Linux for the AMX state once.
bool amx_bf16_available();
// Tests: turn the AMX tiles off to check the f32 path on the same CPU.
void set_amx_enabled(bool enabled);

// ------------------------------------------------------------------ scalar conversions
inline float bf16_to_f32(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even; NaN stays NaN.
inline uint16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

inline float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalize
      int e = -1;
      do {
        mant <<= 1;
        ++e;
      } while ((mant & 0x400u) == 0);
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Round to nearest even, overflow to inf, NaN stays NaN.
inline uint16_t f32_to_f16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65536
  if (abs < 0x38800000u) {                                               // f16 subnormal or 0
    if (abs < 0x33000000u) return sign;  // below half the smallest subnormal
    const uint32_t exp = abs >> 23;
    const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
    // value = mant * 2^(exp - 150); in units of the f16 subnormal 2^-24: mant >> (126 - exp).
    const uint32_t shift = 126 - exp;
    uint32_t r = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = abs - (112u << 23);  // rebias exponent 127 -> 15
  r += 0xfffu + ((r >> 13) & 1u);
  return static_cast<uint16_t>(sign | (r >> 13));
}

template <DType T>
struct Storage;
template <>
struct Storage<DType::kF32> {
  using type = float;
  static float load(float x) { return x; }
  static float store(float x) { return x; }
};
template <>
struct Storage<DType::kBF16> {
  using type = uint16_t;
  static float load(uint16_t x) { return bf16_to_f32(x); }
  static uint16_t store(float x) { return f32_to_bf16(x); }
};
template <>
struct Storage<DType::kF16> {
  using type = uint16_t;
  static float load(uint16_t x) { return f16_to_f32(x); }
  static uint16_t store(float x) { return f32_to_f16(x); }
};

// Reads element (b, h, i, j) of the mask as an additive bias: 0 or -inf for boolean masks.
float mask_bias(const Problem& p, int64_t b, int64_t h, int64_t i, int64_t j);

}  // namespace backplane::attention::cpu
