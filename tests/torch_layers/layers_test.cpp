// backplane::torch's layers with the in-tree kernel packages bound by use_kernels, against the
// same layers without kernels (the LibTorch composites); a mode switch; the decoder block.
#include <backplane/backplane.hpp>
#include <backplane/hub/use_kernels.hpp>
#include <backplane/torch/layers.hpp>
#include <backplane/torch/output.hpp>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <memory>

#include "llama_block.hpp"

namespace {

using backplane::Device;
using backplane::KernelMode;
using backplane::Runtime;
using backplane::hub::LayerKernels;
using backplane::hub::LocalKernels;
using backplane::hub::Store;

Runtime open_cpu() {
  backplane::RuntimeOptions options;
  options.plugin_path = std::vector<std::filesystem::path>{PLUGIN_BUILD_DIR};
  options.only_plugins = std::vector<std::string>{"cpu"};
  options.log_sink = [](backplane::LogLevel, const std::string&) {};
  return Runtime::open(options);
}

// The packages as built, served as local folders (no install, no lock needed).
Store build_tree_store() {
  LocalKernels local;
  for (const char* name : {"rmsnorm", "activation", "rotary"}) {
    local.repos[std::string("backplane/") + name] =
        std::filesystem::path(PACKAGES_DIR) / "backplane" / name;
  }
  return Store(std::filesystem::temp_directory_path() / "backplane-unused-store", local);
}

class TorchLayersTest : public ::testing::Test {
 protected:
  Runtime runtime = open_cpu();
  std::shared_ptr<LayerKernels> kernels = std::make_shared<LayerKernels>(
      LayerKernels::use_kernels(runtime, Device("cpu"), build_tree_store()));
};

// max |a - b| relative to max |b|.
double relative_error(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor a64 = a.to(at::kDouble), b64 = b.to(at::kDouble);
  return (a64 - b64).abs().max().item<double>() / std::max(b64.abs().max().item<double>(), 1e-30);
}

double tolerance(at::ScalarType dtype) {
  return dtype == at::kFloat ? 1e-5 : 1.6e-2;
}

TEST_F(TorchLayersTest, EveryLayerIsBound) {
  for (const char* layer :
       {"RMSNorm", "SiluAndMul", "GeluAndMul", "GeluTanhAndMul", "RotaryEmbedding"}) {
    EXPECT_NE(kernels->find(layer), nullptr) << kernels->reason(layer);
  }
}

TEST_F(TorchLayersTest, KernelsMatchTheComposites) {
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    at::manual_seed(7);
    const at::Tensor w = (1 + 0.1 * at::randn({299})).to(dtype);
    const at::Tensor x = at::randn({3, 5, 299}).to(dtype);
    const backplane::torch::RMSNorm with(w, 1e-6, kernels), without(w, 1e-6);
    ASSERT_TRUE(with.uses_kernel());
    // The kernel really runs: a wrong-sized weight is refused by it, not by LibTorch.
    EXPECT_THROW(backplane::torch::RMSNorm(w.narrow(0, 0, 5), 1e-6, kernels)(x),
                 backplane::InvalidArgument);
    ASSERT_FALSE(without.uses_kernel());
    EXPECT_LT(relative_error(with(x), without(x)), tolerance(dtype));
    // Fused residual add: both update the residual the same way.
    at::Tensor r1 = at::randn({3, 5, 299}).to(dtype), r2 = r1.clone();
    const at::Tensor y1 = with(x, r1), y2 = without(x, r2);
    EXPECT_LT(relative_error(r1, r2), tolerance(dtype));
    EXPECT_LT(relative_error(y1, y2), tolerance(dtype));

    const at::Tensor g = at::randn({4, 7, 2 * 173}).to(dtype);
    EXPECT_LT(
        relative_error(backplane::torch::SiluAndMul{kernels}(g), backplane::torch::SiluAndMul{}(g)),
        tolerance(dtype));
    EXPECT_LT(
        relative_error(backplane::torch::GeluAndMul{kernels}(g), backplane::torch::GeluAndMul{}(g)),
        tolerance(dtype));
    EXPECT_LT(relative_error(backplane::torch::GeluTanhAndMul{kernels}(g),
                             backplane::torch::GeluTanhAndMul{}(g)),
              tolerance(dtype));

    for (const bool interleaved : {false, true}) {
      SCOPED_TRACE(interleaved ? "interleaved" : "neox");
      const auto [cos, sin] = backplane::torch::RotaryEmbedding::tables(11, 64);
      // q as a transposed view of [batch, seq, heads, dim], as a model makes it.
      at::Tensor q1 = at::randn({2, 11, 4, 64}).to(dtype).transpose(1, 2);
      at::Tensor k1 = at::randn({2, 2, 11, 64}).to(dtype);
      at::Tensor q2 = q1.clone(), k2 = k1.clone();
      backplane::torch::RotaryEmbedding{interleaved, kernels}(q1, k1, cos, sin);
      backplane::torch::RotaryEmbedding{interleaved}(q2, k2, cos, sin);
      EXPECT_LT(relative_error(q1, q2), tolerance(dtype));
      EXPECT_LT(relative_error(k1, k2), tolerance(dtype));
      EXPECT_GT(relative_error(q1, q1.clone().zero_() + 1), 0.0);  // it did change q
    }
  }
}

TEST_F(TorchLayersTest, TrainingModeUsesTheCompositeAndSwitchingBackTheKernel) {
  at::manual_seed(3);
  const at::Tensor w = at::randn({64}), x = at::randn({8, 64});
  const backplane::torch::RMSNorm norm(w, 1e-5, kernels), plain(w, 1e-5);
  kernels->set_mode(KernelMode::training());  // the packages have no backward
  EXPECT_FALSE(norm.uses_kernel());
  EXPECT_TRUE(at::equal(norm(x), plain(x)));
  kernels->set_mode(KernelMode::inference());
  EXPECT_TRUE(norm.uses_kernel());
  EXPECT_LT(relative_error(norm(x), plain(x)), 1e-5);
}

TEST_F(TorchLayersTest, BadInputIsAClearError) {
  try {
    backplane::torch::SiluAndMul{kernels}(at::randn({2, 7}));
    ADD_FAILURE() << "no error";
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("SiluAndMul: the last dim of x must be even"),
              std::string::npos)
        << e.what();
  }
  // A weight of the wrong size reaches the kernel, whose message names it.
  const backplane::torch::RMSNorm norm(at::randn({5}), 1e-6, kernels);
  try {
    norm(at::randn({2, 7}));
    ADD_FAILURE() << "no error";
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("RMSNorm kernel: "), std::string::npos) << e.what();
  }
}

// forward_out writes the same values as the allocating call into the caller's tensor, with or
// without a kernel bound; RMSNorm also in place.
TEST_F(TorchLayersTest, ForwardOutWritesTheCallersTensor) {
  at::manual_seed(3);
  const at::Tensor w = 1 + 0.1 * at::randn({64});
  const at::Tensor x = at::randn({4, 64}), gated = at::randn({4, 128});
  for (const bool bound : {true, false}) {
    SCOPED_TRACE(bound ? "kernel" : "composite");
    const backplane::torch::RMSNorm norm(w, 1e-6, bound ? kernels : nullptr);
    const backplane::torch::SiluAndMul act(bound ? kernels : nullptr);
    at::Tensor out = at::full({4, 64}, 7.0);
    EXPECT_EQ(&norm.forward_out(x, out), &out);
    EXPECT_LT(relative_error(out, norm(x)), 1e-6);
    at::Tensor act_out = at::full({4, 64}, 7.0);
    act.forward_out(gated, act_out);
    EXPECT_LT(relative_error(act_out, act(gated)), 1e-6);
    at::Tensor in_place = x.clone();
    norm.forward_out(in_place, in_place);
    EXPECT_LT(relative_error(in_place, norm(x)), 1e-6);
  }
}

TEST_F(TorchLayersTest, ForwardOutRefusesAnOutItCannotWrite) {
  const backplane::torch::RMSNorm norm(at::ones({64}), 1e-6, kernels);
  const backplane::torch::SiluAndMul act(kernels);
  const at::Tensor x = at::randn({4, 64});
  const auto message = [](const auto& call) {
    try {
      call();
    } catch (const backplane::InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  at::Tensor wrong_shape = at::empty({4, 63}), wrong_dtype = at::empty({4, 64}, at::kDouble),
             strided = at::empty({64, 4}).t(), undefined;
  EXPECT_EQ(message([&] { norm.forward_out(x, wrong_shape); }),
            "RMSNorm: out has shape [4, 63], expected [4, 64]");
  EXPECT_EQ(message([&] { norm.forward_out(x, wrong_dtype); }),
            "RMSNorm: out is Double, expected x's dtype Float");
  EXPECT_EQ(message([&] { norm.forward_out(x, strided); }),
            "RMSNorm: out must be contiguous (the kernels write whole rows)");
  EXPECT_EQ(message([&] { norm.forward_out(x, undefined); }),
            "RMSNorm: out is an undefined tensor; pass a tensor of shape [4, 64]");
  at::Tensor gated = at::randn({4, 64});
  EXPECT_EQ(message([&] { act.forward_out(gated, gated); }),
            "SiluAndMul: out has shape [4, 64], expected [4, 32]");
  at::Tensor half = gated.narrow(-1, 0, 32);
  EXPECT_EQ(message([&] { act.forward_out(gated, half); }),
            "SiluAndMul: out must be contiguous (the kernels write whole rows)");
}

// A large output comes from the output cache: the second call of the same size reuses the block
// the first call's output gave back, and the values are the kernel's.
TEST_F(TorchLayersTest, LargeOutputsReuseTheBlockOfTheLastCall) {
  const backplane::torch::RMSNorm with(at::ones({1024}), 1e-6, kernels),
      without(at::ones({1024}), 1e-6);
  const at::Tensor x = at::randn({1024, 1024});  // 4 MiB of output
  const void* first_block = nullptr;
  {
    const at::Tensor first = with(x);
    first_block = first.data_ptr();
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(first_block) % (2u << 20), 0u);
  }
  const backplane::torch::OutputCacheStats before = backplane::torch::output_cache_stats();
  EXPECT_GE(before.cached_bytes, 4u << 20);
  const at::Tensor second = with(x);
  const backplane::torch::OutputCacheStats after = backplane::torch::output_cache_stats();
  EXPECT_EQ(second.data_ptr(), first_block);
  EXPECT_EQ(after.reused, before.reused + 1);
  EXPECT_TRUE(second.is_contiguous());
  EXPECT_LT(relative_error(second, without(x)), 1e-5);
  // A small output is LibTorch's own.
  EXPECT_EQ(with(at::randn({4, 1024})).sizes(), (at::IntArrayRef{4, 1024}));
  EXPECT_EQ(backplane::torch::output_cache_stats().reused, after.reused);
  backplane::torch::trim_output_cache();
  EXPECT_EQ(backplane::torch::output_cache_stats().cached_bytes, 0u);
}

// The end-to-end check: one Llama-style block, with use_kernels (layer kernels and backplane's
// attention) and without (LibTorch), from the same weights.
TEST_F(TorchLayersTest, DecoderBlockWithAndWithoutUseKernels) {
  const backplane::bench::LlamaBlockConfig config;
  const auto attention = std::make_shared<backplane::torch::Attention>(runtime, Device("cpu"));
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    const backplane::bench::LlamaBlock with(config, dtype, 11, kernels, attention);
    const backplane::bench::LlamaBlock without(config, dtype, 11);
    at::manual_seed(5);
    const at::Tensor x = at::randn({2, 37, config.hidden}).to(dtype);
    const at::Tensor a = with(x), b = without(x);
    ASSERT_EQ(a.sizes(), b.sizes());
    // Stated tolerance: float32 1e-4 and bfloat16 5e-2 of the largest output, relative (bf16
    // rounds every intermediate, in different places on the two paths).
    EXPECT_LT(relative_error(a, b), dtype == at::kFloat ? 1e-4 : 5e-2);
  }
}

}  // namespace
