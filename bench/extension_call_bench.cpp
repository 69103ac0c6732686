// What calling a Kernel Hub op through LibTorch's dispatcher costs over calling the in-tree
// kernel directly, on a small tensor where the call is all there is (rmsnorm [1, 64] float32):
//   call/rms_norm_1x64_f32/direct             backplane::rmsnorm::forward_cpu on DLTensors
//   call/rms_norm_1x64_f32/extension_typed    the published kernel-builder package's op through
//                                             TorchExtension::handle(...).typed<...>().call
//   call/rms_norm_1x64_f32/extension_checked  TorchExtension::call (boxed, arguments checked)
// The package wraps the same kernel, so the difference is the dispatcher, the boxing and the
// at::Tensor -> DLTensor views. Same thread count as the other benchmarks (one row: the pool
// is not woken for it).
#include <backplane/torch/extension.hpp>

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include "rmsnorm/rmsnorm.hpp"

namespace {

std::shared_ptr<const backplane::torch::TorchExtension> rmsnorm_package() {
  static const auto ext = backplane::torch::TorchExtension::load(
      std::string(BENCH_KB_PACKAGES) + "/rmsnorm/build/" + BENCH_KB_CPU_VARIANT);
  return ext;
}

struct Small {
  at::Tensor x = at::randn({1, 64}), weight = at::ones({64}), out = at::empty({1, 64});
};

DLTensor view(const at::Tensor& t, std::vector<int64_t>& shape) {
  shape = t.sizes().vec();
  DLTensor dl{};
  dl.data = t.data_ptr();
  dl.device = {kDLCPU, 0};
  dl.ndim = static_cast<int32_t>(shape.size());
  dl.dtype = {kDLFloat, 32, 1};
  dl.shape = shape.data();
  return dl;
}

void CallDirect(benchmark::State& state) {
  Small s;
  std::vector<int64_t> sx, sw, so;
  const DLTensor x = view(s.x, sx), w = view(s.weight, sw), o = view(s.out, so);
  const backplane::rmsnorm::Tensors t{&x, &w, nullptr, &o};
  for (auto _ : state) {
    if (!backplane::rmsnorm::forward_cpu(t, 1e-6).ok()) state.SkipWithError("rms_norm failed");
    benchmark::ClobberMemory();
  }
}

void CallTyped(benchmark::State& state) {
  Small s;
  const auto op = rmsnorm_package()
                      ->handle("rms_norm")
                      .typed<void(at::Tensor&, const at::Tensor&, const at::Tensor&, double)>();
  for (auto _ : state) {
    op.call(s.out, s.x, s.weight, 1e-6);
    benchmark::ClobberMemory();
  }
}

void CallChecked(benchmark::State& state) {
  Small s;
  const auto ext = rmsnorm_package();
  for (auto _ : state) {
    ext->call("rms_norm", {s.out, s.x, s.weight, 1e-6});
    benchmark::ClobberMemory();
  }
}

BENCHMARK(CallDirect)->Name("call/rms_norm_1x64_f32/direct")->Unit(benchmark::kMicrosecond);
BENCHMARK(CallTyped)->Name("call/rms_norm_1x64_f32/extension_typed")->Unit(benchmark::kMicrosecond);
BENCHMARK(CallChecked)
    ->Name("call/rms_norm_1x64_f32/extension_checked")
    ->Unit(benchmark::kMicrosecond);

}  // namespace
