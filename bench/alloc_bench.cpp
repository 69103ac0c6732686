// What a fresh output costs (docs/performance.md "Allocating outputs"): the RMSNorm kernel on
// 4096 x 4096 float32 (a 64 MiB output) with its output
//   alloc/rmsnorm_4096x4096_f32/preallocated   written into one buffer made once
//   alloc/rmsnorm_4096x4096_f32/malloc         malloc'ed and freed every call (glibc: above its
//                                              mmap threshold, a fresh mmap each call)
//   alloc/rmsnorm_4096x4096_f32/malloc_thp     2 MiB-aligned, madvise(MADV_HUGEPAGE), freed
//                                              every call (what PyTorch's THP_MEM_ALLOC_ENABLE
//                                              does)
//   alloc/rmsnorm_4096x4096_f32/output_blocks  the LibTorch bridge's output cache
//                                              (torch/src/output_blocks.hpp), given back every call
// Run it once more under GLIBC_TUNABLES=glibc.malloc.mmap_threshold=268435456 to see glibc
// keeping the block in its heap instead (a process-wide setting a library must not make).
#include <benchmark/benchmark.h>
#include <sys/mman.h>

#include <cstdlib>
#include <vector>

#include "output_blocks.hpp"
#include "rmsnorm/rmsnorm.hpp"

namespace {

constexpr int64_t kRows = 4096, kHidden = 4096;
constexpr size_t kBytes = sizeof(float) * kRows * kHidden;

DLTensor view(float* data, std::vector<int64_t>& shape) {
  DLTensor t{};
  t.data = data;
  t.device = {kDLCPU, 0};
  t.ndim = static_cast<int32_t>(shape.size());
  t.dtype = {kDLFloat, 32, 1};
  t.shape = shape.data();
  return t;
}

struct Inputs {
  std::vector<float> x = std::vector<float>(kRows * kHidden, 0.5f);
  std::vector<float> weight = std::vector<float>(kHidden, 1.0f);
  std::vector<int64_t> shape{kRows, kHidden}, weight_shape{kHidden};

  void run(float* out) {
    const DLTensor in = view(x.data(), shape), w = view(weight.data(), weight_shape),
                   o = view(out, shape);
    backplane::rmsnorm::Tensors tensors;
    tensors.input = &in;
    tensors.weight = &w;
    tensors.output = &o;
    if (!backplane::rmsnorm::forward_cpu(tensors, 1e-6).ok()) std::abort();
  }
};

Inputs& inputs() {
  static Inputs* made = new Inputs();
  return *made;
}

template <class Acquire, class Release>
void measure(benchmark::State& state, Acquire acquire, Release release) {
  for (auto _ : state) {
    float* out = acquire();
    inputs().run(out);
    benchmark::DoNotOptimize(out);
    release(out);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * 2 * kBytes);
}

void Preallocated(benchmark::State& state) {
  static std::vector<float> out(kRows * kHidden);
  measure(
      state, [] { return out.data(); }, [](float*) {});
}

void Malloc(benchmark::State& state) {
  measure(
      state, [] { return static_cast<float*>(std::malloc(kBytes)); },
      [](float* p) { std::free(p); });
}

void MallocThp(benchmark::State& state) {
  measure(
      state,
      [] {
        void* p = nullptr;
        if (posix_memalign(&p, size_t{2} << 20, kBytes) != 0) std::abort();
        madvise(p, kBytes, MADV_HUGEPAGE);
        return static_cast<float*>(p);
      },
      [](float* p) { std::free(p); });
}

void OutputBlocks(benchmark::State& state) {
  using backplane::torch::detail::OutputBlocks;
  measure(
      state, [] { return static_cast<float*>(OutputBlocks::process().acquire(kBytes)); },
      [](float* p) { OutputBlocks::process().release(p, kBytes); });
}

BENCHMARK(Preallocated)->Name("alloc/rmsnorm_4096x4096_f32/preallocated")->UseRealTime();
BENCHMARK(Malloc)->Name("alloc/rmsnorm_4096x4096_f32/malloc")->UseRealTime();
BENCHMARK(MallocThp)->Name("alloc/rmsnorm_4096x4096_f32/malloc_thp")->UseRealTime();
BENCHMARK(OutputBlocks)->Name("alloc/rmsnorm_4096x4096_f32/output_blocks")->UseRealTime();

}  // namespace
