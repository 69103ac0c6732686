// The rotary kernel-builder extension: backplane's rotary embedding (rotary/rotary.hpp) as
// LibTorch ops in the namespace BACKPLANE_OPS_ID (_rotary_<cpu|cuda>_<rev>):
//
//   rotary_embedding(Tensor! query, Tensor! key, Tensor cos, Tensor sin, bool interleaved) -> ()
//       query [batch, heads_q, seq, head_dim] and key [batch, heads_k, seq, head_dim] rotated
//       in place; cos, sin [seq, rotary_dim / 2] or [batch or 1, seq, rotary_dim / 2].
//       Pairs (x[i], x[i + rotary_dim / 2]) (neox, transformers' rotate_half) or, interleaved,
//       (x[2i], x[2i + 1]):  x1' = x1 cos - x2 sin,  x2' = x2 cos + x1 sin
//   cpu_target() -> str                    the Highway target the kernel runs on ("AVX2", ...)
//
// query and key share a dtype (float32, bfloat16, float16); cos and sin are float32 or that
// dtype. Last dims contiguous; the other dims may have any strides ([batch, seq, heads,
// head_dim] passes as a transposed view). CPU implementations always; CUDA ones too in the
// cuda variant (BACKPLANE_KERNEL_BUILDER_CUDA).
#include <torch/library.h>

#include <string>

#include "kernel_builder/tensor_view.hpp"
#include "rotary/rotary.hpp"

namespace backplane::kernel_builder {
namespace {

template <Where kWhere>
void rotary_embedding(at::Tensor& query, at::Tensor& key, const at::Tensor& cos,
                      const at::Tensor& sin, bool interleaved) {
  const char* op = "rotary_embedding";
  const TensorView query_view(query, op, "query", kWhere, /*writable=*/true);
  const TensorView key_view(key, op, "key", kWhere, /*writable=*/true);
  const TensorView cos_view(cos, op, "cos", kWhere);
  const TensorView sin_view(sin, op, "sin", kWhere);
  rotary::Tensors tensors;
  tensors.query = query_view.get();
  tensors.key = key_view.get();
  tensors.cos = cos_view.get();
  tensors.sin = sin_view.get();
  const rotary::Style style = interleaved ? rotary::Style::kInterleaved : rotary::Style::kNeox;
  if constexpr (kWhere == Where::kCpu) {
    check(rotary::forward_cpu(tensors, style), op);
  } else {
#ifdef BACKPLANE_KERNEL_BUILDER_CUDA
    check(on_current_stream(
              query, [&](void* stream) { return rotary::forward_cuda(tensors, style, stream); }),
          op);
#endif
  }
}

std::string cpu_target() {
  return rotary::cpu_target();
}

}  // namespace
}  // namespace backplane::kernel_builder

BACKPLANE_TORCH_LIBRARY(BACKPLANE_OPS_ID, m) {
  m.def(
      "rotary_embedding(Tensor! query, Tensor! key, Tensor cos, Tensor sin, bool interleaved) "
      "-> ()");
  m.def("cpu_target() -> str", &backplane::kernel_builder::cpu_target);
}

BACKPLANE_TORCH_LIBRARY_IMPL(BACKPLANE_OPS_ID, CPU, m) {
  using backplane::kernel_builder::Where;
  m.impl("rotary_embedding", &backplane::kernel_builder::rotary_embedding<Where::kCpu>);
}

#ifdef BACKPLANE_KERNEL_BUILDER_CUDA
BACKPLANE_TORCH_LIBRARY_IMPL(BACKPLANE_OPS_ID, CUDA, m) {
  using backplane::kernel_builder::Where;
  m.impl("rotary_embedding", &backplane::kernel_builder::rotary_embedding<Where::kCuda>);
}
#endif
