// A kernel-builder-shaped extension whose RMSNorm has its backward op (rms_norm_backward), for
// the training-mode binding test: TORCH_LIBRARY ops computed with ATen, a call counter, and the
// Python module init every Hub extension has.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <atomic>

namespace {

std::atomic<int64_t> forward_calls{0};

void rms_norm(at::Tensor& out, const at::Tensor& input, const at::Tensor& weight, double epsilon) {
  ++forward_calls;
  const at::Tensor x = input.to(at::kFloat);
  out.copy_(x * at::rsqrt(x.pow(2).mean(-1, true) + epsilon) * weight.to(at::kFloat));
}

// d/dx of x * rsqrt(mean(x^2) + eps) * w, row by row.
void rms_norm_backward(at::Tensor& grad_input, const at::Tensor& grad_out, const at::Tensor& input,
                       const at::Tensor& weight, double epsilon) {
  const at::Tensor x = input.to(at::kFloat), g = grad_out.to(at::kFloat) * weight.to(at::kFloat);
  const at::Tensor r = at::rsqrt(x.pow(2).mean(-1, true) + epsilon);
  grad_input.copy_(r * g - x * r.pow(3) * (g * x).mean(-1, true));
}

int64_t calls() {
  return forward_calls.load();
}

}  // namespace

TORCH_LIBRARY(_rmsnorm_backward_test_0000000, m) {
  m.def("rms_norm(Tensor! out, Tensor input, Tensor weight, float epsilon) -> ()");
  m.def(
      "rms_norm_backward(Tensor! grad_input, Tensor grad_out, Tensor input, Tensor weight, "
      "float epsilon) -> ()");
  m.def("calls() -> int", &calls);
}

TORCH_LIBRARY_IMPL(_rmsnorm_backward_test_0000000, CPU, m) {
  m.impl("rms_norm", &rms_norm);
  m.impl("rms_norm_backward", &rms_norm_backward);
}

extern "C" void* PyModule_Create2(void* definition, int api_version);

extern "C" __attribute__((visibility("default"))) void* PyInit__rmsnorm_backward_test_0000000() {
  static char definition[128];
  return PyModule_Create2(definition, 1013);
}
