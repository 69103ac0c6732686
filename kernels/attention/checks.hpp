// The argument rules of every attention kernel, CPU and GPU: operands present in the right
// memory with 4 dims, one dtype, shapes that agree (batch, heads, grouped-query heads, head
// dims, the output's shape), a finite scale, an output that overlaps no input, and a mask that
// broadcasts. Each kernel adds its own limits after these (the GPU's grid and head dims).
// Internal to the kernel libraries; no compatibility promise.
#pragma once

#include <cstdint>
#include <optional>

#include "attention/attention.hpp"
#include "common/tensor.hpp"

namespace backplane::attention {

// Base pointer (byte_offset applied) and strides in elements over [batch, heads, seq, dim];
// a broadcast mask dim has stride 0.
struct StridedView {
  const void* data = nullptr;
  int64_t stride[4] = {0, 0, 0, 0};
};

enum class MaskDtype {
  kNone,
  kBool,                // 8-bit storage (DLPack bool or uint8), nonzero = keep
  kAdditiveF32,         // float32 added to the scaled scores
  kAdditiveQueryDtype,  // added, in the query's dtype (bfloat16 or float16)
};

struct CheckedCall {
  kernels::DType dtype = kernels::DType::kF32;
  int64_t batch = 0, heads_q = 0, heads_kv = 0, seq_q = 0, seq_k = 0, head_dim = 0, head_dim_v = 0;
  double scale = 1.0;  // the given scale, else 1 / sqrt(head_dim)
  StridedView q, k, v, out;
  MaskDtype mask_dtype = MaskDtype::kNone;
  StridedView mask;
  StridedView lse;  // logsumexp over [batch, heads_q, seq_q]; data NULL when not asked for
};

// Fills `call` when the arguments follow the rules for tensors in `memory` (device memory: all
// on query's device); otherwise an InvalidArgument status naming the argument, "attention: ...".
Status check_call(const Tensors& tensors, std::optional<double> scale, kernels::Memory memory,
                  CheckedCall* call);

// The backward's rules (checks of BackwardTensors, messages "attention_backward: ..."): the
// forward's operands by check_call's rules, the saved logsumexp, the output's gradient shaped
// like the output, each gradient shaped like its operand, one dtype for all, and gradients
// that overlap no operand and no other gradient.
struct CheckedBackward {
  CheckedCall call;  // the forward's operands; call.lse is the saved logsumexp
  StridedView grad_out, grad_q, grad_k, grad_v;
};
// A forward rule's refusal ("attention: ...") as the backward's ("attention_backward: ...").
Status backward_status(Status s);
Status check_backward_call(const BackwardTensors& tensors, std::optional<double> scale,
                           kernels::Memory memory, CheckedBackward* checked);

// A logsumexp operand of a checked call: float32 [batch, heads_q, seq_q] in `memory` (on
// query's device); `name` is how the caller calls it ("logsumexp"). Its view goes to `view`.
Status check_logsumexp(const DLTensor* lse, const char* name, const DLTensor& query,
                       kernels::Memory memory, const CheckedCall& call, StridedView* view);

}  // namespace backplane::attention
