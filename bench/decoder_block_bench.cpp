// One Llama-style decoder block (bench/llama_block.hpp) with and without use_kernels, in
// backplane-bench's run:
//   decoder_block/<batch>x<seq>x<hidden>_<dtype>/use_kernels  the layers' Hub kernels (the
//       in-tree packages, bound by LayerKernels::use_kernels on the cpu) and backplane's sdpa
//   decoder_block/<batch>x<seq>x<hidden>_<dtype>/libtorch     LibTorch composites and
//       at::scaled_dot_product_attention
//   train_decoder_block/<batch>x<seq>x<hidden>_<dtype>/{use_kernels,libtorch}  one training step:
//       forward, a mean-square loss and autograd's backward into every weight, with the kernels
//       bound in training mode (the layers' backward kernels, backplane's attention backward) or
//       with LibTorch alone
// The packages come from BACKPLANE_BENCH_PACKAGES (a folder holding backplane/<name>/build/),
// default the build tree's hub-packages; without them the use_kernels cases are skipped with the
// reason. Threads: BACKPLANE_BENCH_THREADS (default hardware_concurrency()), for both.
#include <backplane/backplane.hpp>
#include <backplane/hub/use_kernels.hpp>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "llama_block.hpp"

namespace {

using backplane::bench::LlamaBlock;
using backplane::bench::LlamaBlockConfig;

struct BlockCase {
  int64_t batch;
  int64_t seq;
  at::ScalarType dtype;
  std::string name;
};

const BlockCase kCases[] = {
    {1, 256, at::kFloat, "decoder_block/1x256x512_f32"},
    {1, 256, at::kBFloat16, "decoder_block/1x256x512_bf16"},
};

void set_threads() {
  int n = 0;
  if (const char* env = std::getenv("BACKPLANE_BENCH_THREADS")) n = std::atoi(env);
  if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
  at::set_num_threads(n > 0 ? n : 1);
}

// The cpu runtime, the kernels bound for it and backplane's attention, made once; the reason
// when they cannot be.
struct Kernelized {
  std::shared_ptr<const backplane::hub::LayerKernels> kernels;
  std::shared_ptr<const backplane::hub::LayerKernels> training;  // bound in training mode
  std::shared_ptr<const backplane::torch::Attention> attention;
  std::string error;
};

const Kernelized& kernelized() {
  static const Kernelized k = [] {
    Kernelized out;
    try {
      const char* env = std::getenv("BACKPLANE_BENCH_PACKAGES");
      const std::filesystem::path packages = env != nullptr ? env : BENCH_PACKAGES_DIR;
      backplane::hub::LocalKernels local;
      for (const char* name : {"rmsnorm", "activation", "rotary"}) {
        const std::filesystem::path folder = packages / "backplane" / name;
        if (!std::filesystem::is_directory(folder / "build")) {
          throw backplane::NotFound("no kernel package at " + folder.string() +
                                    " (set BACKPLANE_BENCH_PACKAGES)");
        }
        local.repos[std::string("backplane/") + name] = folder;
      }
      const backplane::hub::Store store(std::filesystem::temp_directory_path(), local);
      const backplane::Runtime runtime = backplane::Runtime::open();
      out.kernels = std::make_shared<const backplane::hub::LayerKernels>(
          backplane::hub::LayerKernels::use_kernels(runtime, backplane::Device("cpu"), store));
      backplane::hub::UseKernelsOptions training;
      training.mode = backplane::KernelMode::training();
      out.training = std::make_shared<const backplane::hub::LayerKernels>(
          backplane::hub::LayerKernels::use_kernels(runtime, backplane::Device("cpu"), store,
                                                    training));
      out.attention =
          std::make_shared<const backplane::torch::Attention>(runtime, backplane::Device("cpu"));
    } catch (const std::exception& e) {
      out.error = e.what();
    }
    return out;
  }();
  return k;
}

// The case's block, with the kernels bound for inference or training; nullptr (the benchmark
// skipped with the reason) when use_kernels cannot run here.
std::unique_ptr<LlamaBlock> block_for(benchmark::State& state, const BlockCase& c, bool use_kernels,
                                      bool training) {
  set_threads();
  const Kernelized& k = kernelized();
  if (use_kernels && !k.error.empty()) {
    state.SkipWithError(k.error.c_str());
    return nullptr;
  }
  const auto& kernels = training ? k.training : k.kernels;
  return std::make_unique<LlamaBlock>(LlamaBlockConfig{}, c.dtype, 1,
                                      use_kernels ? kernels : nullptr,
                                      use_kernels ? k.attention : nullptr);
}

void run(benchmark::State& state, const BlockCase& c, bool use_kernels) {
  const std::unique_ptr<LlamaBlock> block = block_for(state, c, use_kernels, false);
  if (!block) return;
  const at::Tensor x = at::randn({c.batch, c.seq, block->config().hidden}).to(c.dtype);
  for (auto _ : state) benchmark::DoNotOptimize((*block)(x));
  state.counters["threads"] = at::get_num_threads();
}

void train(benchmark::State& state, const BlockCase& c, bool use_kernels) {
  const std::unique_ptr<LlamaBlock> block = block_for(state, c, use_kernels, true);
  if (!block) return;
  for (at::Tensor p : block->parameters()) p.requires_grad_(true);
  const at::Tensor x = at::randn({c.batch, c.seq, block->config().hidden}).to(c.dtype);
  for (auto _ : state) {
    for (at::Tensor p : block->parameters()) p.mutable_grad() = at::Tensor();
    (*block)(x).to(at::kFloat).pow(2).mean().backward();
    benchmark::DoNotOptimize(block->parameters().front().grad().data_ptr());
  }
  state.counters["threads"] = at::get_num_threads();
}

[[maybe_unused]] const bool registered = [] {
  for (const BlockCase& c : kCases) {
    benchmark::RegisterBenchmark((c.name + "/libtorch").c_str(),
                                 [&c](benchmark::State& s) { run(s, c, false); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark((c.name + "/use_kernels").c_str(),
                                 [&c](benchmark::State& s) { run(s, c, true); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  for (const BlockCase& c : kCases) {
    const std::string name = "train_" + c.name;
    benchmark::RegisterBenchmark((name + "/libtorch").c_str(),
                                 [&c](benchmark::State& s) { train(s, c, false); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark((name + "/use_kernels").c_str(),
                                 [&c](benchmark::State& s) { train(s, c, true); })
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  return true;
}();

}  // namespace
