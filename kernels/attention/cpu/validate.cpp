// The CPU kernels' Problem from a call that passes the attention rules (attention/checks.hpp,
// shared with the GPU kernels), and the mask lookup the kernels use.
#include <limits>

#include "attention/checks.hpp"
#include "cpu/problem.hpp"

namespace backplane::attention::cpu {
namespace {

MaskKind mask_kind(MaskDtype mask, DType dtype) {
  switch (mask) {
    case MaskDtype::kNone:
      return MaskKind::kNone;
    case MaskDtype::kBool:
      return MaskKind::kBool;
    case MaskDtype::kAdditiveF32:
      return MaskKind::kAdditiveF32;
    case MaskDtype::kAdditiveQueryDtype:
      return dtype == DType::kBF16 ? MaskKind::kAdditiveBF16 : MaskKind::kAdditiveF16;
  }
  return MaskKind::kNone;
}

Problem problem_of(const CheckedCall& c, const Options& options) {
  Problem p;
  p.dtype = c.dtype;
  p.batch = c.batch;
  p.heads_q = c.heads_q;
  p.heads_kv = c.heads_kv;
  p.seq_q = c.seq_q;
  p.seq_k = c.seq_k;
  p.head_dim = c.head_dim;
  p.head_dim_v = c.head_dim_v;
  p.q = c.q;
  p.k = c.k;
  p.v = c.v;
  p.out = c.out;
  p.mask_kind = mask_kind(c.mask_dtype, c.dtype);
  p.mask = c.mask;
  p.causal = options.causal;
  p.scale = static_cast<float>(c.scale);
  p.lse = c.lse;
  return p;
}

}  // namespace

Status make_problem(const Tensors& tensors, const Options& options, Problem* problem) {
  CheckedCall c;
  if (Status s = check_call(tensors, options.scale, kernels::Memory::kHost, &c); !s.ok()) return s;
  *problem = problem_of(c, options);
  return Status::Ok();
}

Status make_backward_problem(const BackwardTensors& tensors, const Options& options,
                             BackwardProblem* problem) {
  CheckedBackward c;
  Status s = check_backward_call(tensors, options.scale, kernels::Memory::kHost, &c);
  if (!s.ok()) return s;
  BackwardProblem p;
  p.fwd = problem_of(c.call, options);
  p.grad_out = c.grad_out;
  p.grad_q = c.grad_q;
  p.grad_k = c.grad_k;
  p.grad_v = c.grad_v;
  *problem = p;
  return Status::Ok();
}

float mask_bias(const Problem& p, int64_t b, int64_t h, int64_t i, int64_t j) {
  const int64_t off =
      b * p.mask.stride[0] + h * p.mask.stride[1] + i * p.mask.stride[2] + j * p.mask.stride[3];
  switch (p.mask_kind) {
    case MaskKind::kNone:
      return 0.0f;
    case MaskKind::kBool:
      return static_cast<const uint8_t*>(p.mask.data)[off]
                 ? 0.0f
                 : -std::numeric_limits<float>::infinity();
    case MaskKind::kAdditiveF32:
      return static_cast<const float*>(p.mask.data)[off];
    case MaskKind::kAdditiveBF16:
      return bf16_to_f32(static_cast<const uint16_t*>(p.mask.data)[off]);
    case MaskKind::kAdditiveF16:
      return f16_to_f32(static_cast<const uint16_t*>(p.mask.data)[off]);
  }
  return 0.0f;
}

}  // namespace backplane::attention::cpu
