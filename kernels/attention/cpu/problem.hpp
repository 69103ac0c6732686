// Internal: a validated attention call in a flat form the kernels read. No compatibility promise.
#pragma once

#include "attention/attention.hpp"
#include "attention/checks.hpp"
#include "common/scalar_convert.hpp"
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
  Operand lse;  // logsumexp over [batch, heads, seq_q] (stride[3] unused); data NULL: none

  int64_t group() const { return heads_q / heads_kv; }
  // Causal limit of query i: the last key index it may see (may be negative: sees none).
  int64_t causal_last_key(int64_t i) const { return i + seq_k - seq_q; }
};

// Built by validate(); `problem` is filled only when the status is ok.
Status make_problem(const Tensors& tensors, const Options& options, Problem* problem);

// A validated backward call: the forward's Problem (`out` its output, `lse` its saved
// logsumexp) and the gradients, over the same dims as the operands they belong to.
struct BackwardProblem {
  Problem fwd;
  Operand grad_out, grad_q, grad_k, grad_v;
};
Status make_backward_problem(const BackwardTensors& tensors, const Options& options,
                             BackwardProblem* problem);

// The implementations; the Problem is valid and non-empty.
void run_eager(const Problem& p, int threads);
// Fills info's target and tile_kernel (info may be NULL).
void run_sdpa(const Problem& p, int threads, RunInfo* info);
// The backward (sdpa_backward.cpp); fills info's target and tile_kernel (info may be NULL).
void run_sdpa_backward(const BackwardProblem& p, int threads, RunInfo* info);
// The Highway target run_sdpa dispatches to now.
const char* sdpa_target();
// Whether bf16 tiles run on AMX here (with the AVX3 target); asks Linux for the AMX state once.
bool amx_bf16_available();
// Whether bf16 tiles without AMX run on AVX512-BF16 (where it is faster than fp32 tiles).
bool dpbf16_tiles_available();
// Tests: turn the AMX or the AVX512-BF16 tiles off to check the other paths on the same CPU.
void set_amx_enabled(bool enabled);
void set_dpbf16_enabled(bool enabled);

// The scalar conversions (common/scalar_convert.hpp) under the names the kernels use.
using kernels::bf16_to_f32;
using kernels::f16_to_f32;
using kernels::f32_to_bf16;
using kernels::f32_to_f16;

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
