// Internal: one validated attention call, flat and trivially copyable, passed by value to the
// GPU kernels. Read by host code (g++) and device code (nvcc, hipcc) alike. No compatibility
// promise.
#pragma once

#include <stdint.h>

namespace backplane::attention::gpu {

enum class ElementType : int32_t { kFloat32 = 0, kBfloat16 = 1, kFloat16 = 2 };

enum class MaskType : int32_t {
  kNone = 0,
  kBool = 1,         // 8-bit, nonzero keeps
  kAdditiveF32 = 2,  // added to the scaled scores
  kAdditiveBf16 = 3,
  kAdditiveF16 = 4,
};

// Strides in elements for the logical dims [batch, heads, seq, dim]; a broadcast mask dim has
// stride 0. Pointers have byte_offset applied.
struct Params {
  const void* q;
  const void* k;
  const void* v;
  const void* mask;  // null when mask_type is kNone
  void* out;
  int64_t q_stride[4];
  int64_t k_stride[4];
  int64_t v_stride[4];
  int64_t mask_stride[4];
  int64_t out_stride[4];
  int32_t batch, heads_q, heads_kv, seq_q, seq_k, head_dim, head_dim_v;
  int32_t group;  // heads_q / heads_kv: query head h reads kv head h / group
  ElementType dtype;
  MaskType mask_type;
  int32_t causal;  // bottom-right aligned: query i sees keys j <= i + seq_k - seq_q
  float scale;
  // q, k and v can be copied in 16-byte pieces: dim stride 1, the other strides multiples of 8
  // elements, 16-byte aligned bases, head dims multiples of 8.
  int32_t vector_loads;
  int32_t device_id;  // the DLDevice's ordinal
  // The logsumexp the forward writes on request (float32 over [batch, heads_q, seq_q]) and the
  // backward reads; null: none.
  float* lse;
  int64_t lse_stride[3];
};

// One validated backward call: the forward's operands (out its output, lse its saved
// logsumexp), the output's gradient, and the gradients written (grad_key and grad_value over
// [batch, heads_kv, seq_k, dim]).
struct BackwardParams {
  Params fwd;
  const void* grad_out;
  void* grad_q;
  void* grad_k;
  void* grad_v;
  int64_t grad_out_stride[4];
  int64_t grad_q_stride[4];
  int64_t grad_k_stride[4];
  int64_t grad_v_stride[4];
};

}  // namespace backplane::attention::gpu
