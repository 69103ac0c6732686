// The rmsnorm kernel-builder extension: backplane's RMSNorm (rmsnorm/rmsnorm.hpp) as LibTorch
// ops in the namespace BACKPLANE_OPS_ID (_rmsnorm_<cpu|cuda>_<rev>), with kernels-community's
// schemas:
//
//   rms_norm(Tensor! out, Tensor input, Tensor weight, float epsilon) -> ()
//       out = input * rsqrt(mean(input^2) + epsilon) * weight      per row of the last dim
//   fused_add_rms_norm(Tensor! out, Tensor input, Tensor! residual, Tensor weight,
//                      float epsilon) -> ()
//       residual += input (in place), then out = rms_norm(residual)
//   cpu_target() -> str                    the Highway target the kernel runs on ("AVX2", ...)
//
// One dtype for all tensors (float32, bfloat16, float16); the last dim of each contiguous. CPU
// implementations always; CUDA ones too in the cuda variant (BACKPLANE_KERNEL_BUILDER_CUDA).
#include <torch/library.h>

#include <optional>
#include <string>

#include "kernel_builder/tensor_view.hpp"
#include "rmsnorm/rmsnorm.hpp"

namespace backplane::kernel_builder {
namespace {

template <Where kWhere>
void run(const char* op, at::Tensor& out, const at::Tensor& input, at::Tensor* residual,
         const at::Tensor& weight, double epsilon) {
  const TensorView out_view(out, op, "out", kWhere, /*writable=*/true);
  const TensorView input_view(input, op, "input", kWhere);
  const TensorView weight_view(weight, op, "weight", kWhere);
  rmsnorm::Tensors tensors;
  tensors.input = input_view.get();
  tensors.weight = weight_view.get();
  tensors.output = out_view.get();
  std::optional<TensorView> residual_view;
  if (residual != nullptr) {
    residual_view.emplace(*residual, op, "residual", kWhere, /*writable=*/true);
    tensors.residual = residual_view->get();
  }
  if constexpr (kWhere == Where::kCpu) {
    check(rmsnorm::forward_cpu(tensors, epsilon), op);
  } else {
#ifdef BACKPLANE_KERNEL_BUILDER_CUDA
    check(on_current_stream(
              input, [&](void* stream) { return rmsnorm::forward_cuda(tensors, epsilon, stream); }),
          op);
#endif
  }
}

template <Where kWhere>
void rms_norm(at::Tensor& out, const at::Tensor& input, const at::Tensor& weight, double epsilon) {
  run<kWhere>("rms_norm", out, input, nullptr, weight, epsilon);
}

template <Where kWhere>
void fused_add_rms_norm(at::Tensor& out, const at::Tensor& input, at::Tensor& residual,
                        const at::Tensor& weight, double epsilon) {
  run<kWhere>("fused_add_rms_norm", out, input, &residual, weight, epsilon);
}

std::string cpu_target() {
  return rmsnorm::cpu_target();
}

}  // namespace
}  // namespace backplane::kernel_builder

BACKPLANE_TORCH_LIBRARY(BACKPLANE_OPS_ID, m) {
  m.def("rms_norm(Tensor! out, Tensor input, Tensor weight, float epsilon) -> ()");
  m.def(
      "fused_add_rms_norm(Tensor! out, Tensor input, Tensor! residual, Tensor weight, "
      "float epsilon) -> ()");
  m.def("cpu_target() -> str", &backplane::kernel_builder::cpu_target);
}

BACKPLANE_TORCH_LIBRARY_IMPL(BACKPLANE_OPS_ID, CPU, m) {
  using backplane::kernel_builder::Where;
  m.impl("rms_norm", &backplane::kernel_builder::rms_norm<Where::kCpu>);
  m.impl("fused_add_rms_norm", &backplane::kernel_builder::fused_add_rms_norm<Where::kCpu>);
}

#ifdef BACKPLANE_KERNEL_BUILDER_CUDA
BACKPLANE_TORCH_LIBRARY_IMPL(BACKPLANE_OPS_ID, CUDA, m) {
  using backplane::kernel_builder::Where;
  m.impl("rms_norm", &backplane::kernel_builder::rms_norm<Where::kCuda>);
  m.impl("fused_add_rms_norm", &backplane::kernel_builder::fused_add_rms_norm<Where::kCuda>);
}
#endif
