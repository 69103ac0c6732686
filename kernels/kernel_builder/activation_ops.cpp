// The activation kernel-builder extension: backplane's gated activations
// (activation/activation.hpp) as LibTorch ops in the namespace BACKPLANE_OPS_ID
// (_activation_<cpu|cuda>_<rev>), with kernels-community's schemas:
//
//   silu_and_mul(Tensor! out, Tensor input) -> ()        out = silu(x[..., :d]) * x[..., d:]
//   gelu_and_mul(Tensor! out, Tensor input) -> ()        gelu (erf), same gating
//   gelu_tanh_and_mul(Tensor! out, Tensor input) -> ()   gelu (tanh approximation)
//   cpu_target() -> str                    the Highway target the kernel runs on ("AVX2", ...)
//
// input [..., 2 * d], out [..., d], one dtype (float32, bfloat16, float16), last dims
// contiguous. CPU implementations always; CUDA ones too in the cuda variant
// (BACKPLANE_KERNEL_BUILDER_CUDA).
#include <torch/library.h>

#include <string>

#include "activation/activation.hpp"
#include "kernel_builder/tensor_view.hpp"

namespace backplane::kernel_builder {
namespace {

template <Where kWhere, activation::Activation kActivation>
void gated(at::Tensor& out, const at::Tensor& input) {
  const char* op = activation::op_name(kActivation);
  const TensorView out_view(out, op, "out", kWhere, /*writable=*/true);
  const TensorView input_view(input, op, "input", kWhere);
  if constexpr (kWhere == Where::kCpu) {
    check(activation::forward_cpu(kActivation, input_view.get(), out_view.get()), op);
  } else {
#ifdef BACKPLANE_KERNEL_BUILDER_CUDA
    check(on_current_stream(input,
                            [&](void* stream) {
                              return activation::forward_cuda(kActivation, input_view.get(),
                                                              out_view.get(), stream);
                            }),
          op);
#endif
  }
}

std::string cpu_target() {
  return activation::cpu_target();
}

}  // namespace
}  // namespace backplane::kernel_builder

BACKPLANE_TORCH_LIBRARY(BACKPLANE_OPS_ID, m) {
  m.def("silu_and_mul(Tensor! out, Tensor input) -> ()");
  m.def("gelu_and_mul(Tensor! out, Tensor input) -> ()");
  m.def("gelu_tanh_and_mul(Tensor! out, Tensor input) -> ()");
  m.def("cpu_target() -> str", &backplane::kernel_builder::cpu_target);
}

BACKPLANE_TORCH_LIBRARY_IMPL(BACKPLANE_OPS_ID, CPU, m) {
  using backplane::activation::Activation;
  using backplane::kernel_builder::gated;
  using backplane::kernel_builder::Where;
  m.impl("silu_and_mul", &gated<Where::kCpu, Activation::kSilu>);
  m.impl("gelu_and_mul", &gated<Where::kCpu, Activation::kGelu>);
  m.impl("gelu_tanh_and_mul", &gated<Where::kCpu, Activation::kGeluTanh>);
}

#ifdef BACKPLANE_KERNEL_BUILDER_CUDA
BACKPLANE_TORCH_LIBRARY_IMPL(BACKPLANE_OPS_ID, CUDA, m) {
  using backplane::activation::Activation;
  using backplane::kernel_builder::gated;
  using backplane::kernel_builder::Where;
  m.impl("silu_and_mul", &gated<Where::kCuda, Activation::kSilu>);
  m.impl("gelu_and_mul", &gated<Where::kCuda, Activation::kGelu>);
  m.impl("gelu_tanh_and_mul", &gated<Where::kCuda, Activation::kGeluTanh>);
}
#endif
