// backplane::torch's layers with the in-tree kernel packages bound by use_kernels, against the
// same layers without kernels (the LibTorch composites); a mode switch; the decoder block.
#include <backplane/backplane.hpp>
#include <backplane/hub/use_kernels.hpp>
#include <backplane/torch/layers.hpp>
#include <backplane/torch/output.hpp>

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <gtest/gtest.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/tensor.h>

#include <cstdint>
#include <filesystem>
#include <memory>

#include "attention_autograd.hpp"
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

TEST_F(TorchLayersTest, TrainingModeBindsTheBackwardKernelsAndSwitchingBackTheForwardOnes) {
  at::manual_seed(3);
  const at::Tensor w = at::randn({64}), x = at::randn({8, 64});
  const backplane::torch::RMSNorm norm(w, 1e-5, kernels), plain(w, 1e-5);
  kernels->set_mode(KernelMode::training());
  EXPECT_TRUE(norm.uses_kernel());
  EXPECT_NE(kernels->find("RMSNorm")->backward.function, nullptr);
  EXPECT_LT(relative_error(norm(x), plain(x)), 1e-5);  // no gradient asked: the forward kernel
  kernels->set_mode(KernelMode::inference());
  EXPECT_TRUE(norm.uses_kernel());
  EXPECT_EQ(kernels->find("RMSNorm")->backward.function, nullptr);
  EXPECT_LT(relative_error(norm(x), plain(x)), 1e-5);
}

// A leaf copy that records its gradient.
at::Tensor leaf(const at::Tensor& t) {
  return t.detach().clone().requires_grad_(true);
}

// The name of the autograd node that made `t` ("...RmsNormFunction..." for the kernels'; for a
// view modified in place, the node that modified it).
std::string made_by(const at::Tensor& t) {
  if (!t.grad_fn()) return "";
  if (const auto* slices = dynamic_cast<const torch::autograd::CopySlices*>(t.grad_fn().get())) {
    return slices->fn->name();
  }
  return t.grad_fn()->name();
}

// In training mode each layer's kernels run under autograd (the forward kernel, then the
// package's backward kernel) and give the composites' gradients, within the dtype's tolerance.
TEST_F(TorchLayersTest, TrainingKernelsGiveTheCompositesGradients) {
  kernels->set_mode(KernelMode::training());
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    const double tol = dtype == at::kFloat ? 2e-5 : 3e-2;
    at::manual_seed(21);
    const at::Tensor x0 = at::randn({4, 6, 96}).to(dtype),
                     w0 = (1 + 0.1 * at::randn({96})).to(dtype);
    {
      const at::Tensor x = leaf(x0), w = leaf(w0), xr = leaf(x0), wr = leaf(w0);
      const at::Tensor g = at::randn({4, 6, 96}).to(dtype);
      const at::Tensor y = backplane::torch::RMSNorm(w, 1e-6, kernels)(x);
      EXPECT_NE(made_by(y).find("RmsNormFunction"), std::string::npos) << made_by(y);
      (y * g).sum().backward();
      (backplane::torch::RMSNorm(wr, 1e-6)(xr) * g).sum().backward();
      EXPECT_LT(relative_error(x.grad(), xr.grad()), tol) << "RMSNorm input";
      EXPECT_LT(relative_error(w.grad(), wr.grad()), tol) << "RMSNorm weight";
    }
    for (const auto kind : {backplane::torch::GatedActivation::Kind::kSilu,
                            backplane::torch::GatedActivation::Kind::kGelu,
                            backplane::torch::GatedActivation::Kind::kGeluTanh}) {
      const at::Tensor x = leaf(x0), xr = leaf(x0);
      const at::Tensor g = at::randn({4, 6, 48}).to(dtype);
      const at::Tensor y = backplane::torch::GatedActivation(kind, kernels)(x);
      EXPECT_NE(made_by(y).find("GatedFunction"), std::string::npos) << made_by(y);
      (y * g).sum().backward();
      (backplane::torch::GatedActivation(kind)(xr) * g).sum().backward();
      EXPECT_LT(relative_error(x.grad(), xr.grad()), tol) << static_cast<int>(kind);
    }
    for (const bool interleaved : {false, true}) {
      // q and k as a model makes them: views of their projections' outputs, rotated in place.
      const at::Tensor base = leaf(at::randn({2, 2, 5, 3, 32}).to(dtype));
      const at::Tensor base_r = leaf(base);
      const auto [cos, sin] = backplane::torch::RotaryEmbedding::tables(5, 32);
      const at::Tensor gq = at::randn({2, 3, 5, 32}).to(dtype),
                       gk = at::randn({2, 3, 5, 32}).to(dtype);
      const auto run = [&](const at::Tensor& b, backplane::torch::SharedLayerKernels with) {
        const at::Tensor qk = b * 1.0;  // non-leaf, so that it may be rotated in place
        at::Tensor q = qk.select(1, 0).transpose(1, 2), k = qk.select(1, 1).transpose(1, 2);
        backplane::torch::RotaryEmbedding(interleaved, with)(q, k, cos.to(dtype), sin.to(dtype));
        const std::string node = made_by(qk);          // the base of the rotated views, before the
        ((q * gq).sum() + (k * gk).sum()).backward();  // backward releases its nodes
        return node;
      };
      const std::string node = run(base, kernels);
      EXPECT_NE(node.find("RotaryFunction"), std::string::npos) << node;
      run(base_r, nullptr);
      EXPECT_LT(relative_error(base.grad(), base_r.grad()), tol) << "interleaved " << interleaved;
    }
  }
}

// With inputs that require grad but no backward bound (inference mode), a layer says so once
// and runs its composite, so the gradients are still right; forward_out refuses such inputs.
TEST_F(TorchLayersTest, GradientsInInferenceModeTakeTheCompositeAndSaySo) {
  const at::Tensor x = leaf(at::randn({3, 64})), w = at::randn({64});
  const backplane::torch::RMSNorm norm(w, 1e-6, kernels);
  ::testing::internal::CaptureStderr();
  const at::Tensor y = norm(x);
  norm(x);
  const std::string told = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(made_by(y).find("RmsNormFunction"), std::string::npos);
  EXPECT_NE(told.find("layer `RMSNorm`: an input requires grad, but the kernel bound in mode "
                      "inference has no backward (set_mode(training) binds the training "
                      "kernels); running the layer's own composite"),
            std::string::npos)
      << told;
  EXPECT_EQ(told.find("layer `RMSNorm`", told.find("layer `RMSNorm`") + 1), std::string::npos)
      << "said more than once: " << told;
  y.sum().backward();
  const at::Tensor xr = leaf(x);
  backplane::torch::RMSNorm(w, 1e-6)(xr).sum().backward();
  EXPECT_LT(relative_error(x.grad(), xr.grad()), 1e-5);
  at::Tensor out = at::empty({3, 64});
  try {
    norm.forward_out(x, out);
    ADD_FAILURE() << "no error";
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("RMSNorm: forward_out writes into out, which autograd "
                                         "cannot record"),
              std::string::npos)
        << e.what();
  }
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

// backplane's attention is differentiable (the cpu plugin's attention_backward from the saved
// logsumexp): the gradients of LibTorch's own attention in float64, GQA, a boolean mask and the
// bottom-right causal limit (seq_q < seq_k); out= and a mask that requires grad are refused.
TEST_F(TorchLayersTest, AttentionGradientsAreLibTorchs) {
  const backplane::torch::Attention attention(runtime, Device("cpu"));
  at::manual_seed(9);
  const at::Tensor q = leaf(at::randn({2, 4, 7, 32})), k = leaf(at::randn({2, 2, 11, 32}));
  const at::Tensor v = leaf(at::randn({2, 2, 11, 32}));
  const at::Tensor mask = at::rand({7, 11}) > 0.2;
  backplane::torch::AttentionArgs args;
  args.mask = mask;
  args.causal = true;
  const at::Tensor out = attention(q, k, v, args);
  EXPECT_NE(made_by(out).find("AttentionFunction"), std::string::npos) << made_by(out);
  const at::Tensor g = at::randn(out.sizes());
  (out * g).sum().backward();

  const at::Tensor q64 = leaf(q.to(at::kDouble)), k64 = leaf(k.to(at::kDouble)),
                   v64 = leaf(v.to(at::kDouble));
  const at::Tensor keep = at::logical_and(mask, at::ones({7, 11}, at::kBool).tril(11 - 7));
  const at::Tensor ref = at::scaled_dot_product_attention(q64, k64.repeat_interleave(2, 1),
                                                          v64.repeat_interleave(2, 1), keep);
  (ref * g.to(at::kDouble)).sum().backward();
  EXPECT_LT(relative_error(out, ref), 1e-5);
  EXPECT_LT(relative_error(q.grad(), q64.grad()), 1e-5);
  EXPECT_LT(relative_error(k.grad(), k64.grad()), 1e-5);
  EXPECT_LT(relative_error(v.grad(), v64.grad()), 1e-5);

  const auto message = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const backplane::InvalidArgument& e) {
      return e.what();
    }
    return "no error";
  };
  backplane::torch::AttentionArgs with_out;
  with_out.out = at::empty({2, 4, 7, 32});
  EXPECT_NE(message([&] { attention(q, k, v, with_out); }).find("out= cannot be recorded"),
            std::string::npos);
  backplane::torch::AttentionArgs learned_mask;
  learned_mask.mask = leaf(at::zeros({7, 11}));
  EXPECT_NE(message([&] { attention(q, k, v, learned_mask); }).find("mask requires grad"),
            std::string::npos);
}

// The bridge's fallback for a plugin without attention_backward: its composite gives LibTorch's
// attention and gradients (float64), with the kernels' semantics: GQA, bool and additive masks,
// the bottom-right causal limit.
TEST(CompositeAttention, EqualsLibTorchsAttentionAndItsGradients) {
  at::manual_seed(13);
  const at::Tensor bool_mask = at::rand({7, 11}) > 0.2;
  const at::Tensor additive = at::randn({2, 1, 7, 11}).to(at::kDouble);
  for (const bool causal : {false, true}) {
    for (const int mask_kind : {0, 1, 2}) {
      SCOPED_TRACE(std::string(causal ? "causal" : "full") + " mask " + std::to_string(mask_kind));
      const at::Tensor q = leaf(at::randn({2, 4, 7, 16}).to(at::kDouble));
      const at::Tensor k = leaf(at::randn({2, 2, 11, 16}).to(at::kDouble));
      const at::Tensor v = leaf(at::randn({2, 2, 11, 16}).to(at::kDouble));
      const at::Tensor qr = leaf(q), kr = leaf(k), vr = leaf(v);
      std::optional<at::Tensor> mask;
      if (mask_kind == 1) mask = bool_mask;
      if (mask_kind == 2) mask = additive;
      const at::Tensor out =
          backplane::torch::detail::composite_attention(q, k, v, mask, causal, std::nullopt);
      at::Tensor bias = at::zeros({7, 11}, at::kDouble);
      if (mask_kind == 1) bias = at::zeros({7, 11}, at::kDouble).masked_fill(~bool_mask, -INFINITY);
      if (mask_kind == 2) bias = additive;
      if (causal) {
        const at::Tensor keep = at::ones({7, 11}, at::kBool).tril(11 - 7);
        bias = bias.masked_fill(~keep, -INFINITY);
      }
      const at::Tensor ref = at::scaled_dot_product_attention(qr, kr.repeat_interleave(2, 1),
                                                              vr.repeat_interleave(2, 1), bias);
      const at::Tensor g = at::randn(out.sizes(), at::kDouble);
      (out * g).sum().backward();
      (ref * g).sum().backward();
      EXPECT_LT(relative_error(out, ref), 1e-12);
      EXPECT_LT(relative_error(q.grad(), qr.grad()), 1e-12);
      EXPECT_LT(relative_error(k.grad(), kr.grad()), 1e-12);
      EXPECT_LT(relative_error(v.grad(), vr.grad()), 1e-12);
    }
  }
}

// One training step of the block, with use_kernels in training mode (the layers' backward
// kernels and backplane's attention backward) and without (LibTorch autograd): the same loss,
// the same gradients of every weight, and the same loss after an SGD step, within stated
// tolerances: float32 1e-4 relative, bfloat16 5e-2 (every intermediate is rounded, in
// different places on the two paths).
TEST_F(TorchLayersTest, DecoderBlockTrainingStepWithAndWithoutUseKernels) {
  backplane::bench::LlamaBlockConfig config;
  config.hidden = 128, config.heads = 4, config.kv_heads = 2, config.head_dim = 32;
  config.intermediate = 256;
  kernels->set_mode(KernelMode::training());
  const auto attention = std::make_shared<backplane::torch::Attention>(runtime, Device("cpu"));
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    SCOPED_TRACE(c10::toString(dtype));
    const double tol = dtype == at::kFloat ? 1e-4 : 5e-2;
    const backplane::bench::LlamaBlock with(config, dtype, 11, kernels, attention);
    const backplane::bench::LlamaBlock without(config, dtype, 11);
    for (const auto* block : {&with, &without}) {
      for (at::Tensor p : block->parameters()) p.requires_grad_(true);
    }
    at::manual_seed(5);
    const at::Tensor x = at::randn({2, 17, config.hidden}).to(dtype);
    const at::Tensor target = at::randn({2, 17, config.hidden}).to(dtype);
    const auto loss_of = [&](const backplane::bench::LlamaBlock& block) {
      return (block(x).to(at::kFloat) - target.to(at::kFloat)).pow(2).mean();
    };
    ::testing::internal::CaptureStderr();
    const at::Tensor loss_with = loss_of(with);
    loss_with.backward();
    const std::string told = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(told.find("composite"), std::string::npos) << "a layer fell back: " << told;
    const at::Tensor loss_without = loss_of(without);
    loss_without.backward();
    EXPECT_LT(relative_error(loss_with, loss_without), tol);
    const std::vector<at::Tensor> pw = with.parameters(), pr = without.parameters();
    for (size_t i = 0; i < pw.size(); ++i) {
      ASSERT_TRUE(pw[i].grad().defined()) << "parameter " << i;
      EXPECT_LT(relative_error(pw[i].grad(), pr[i].grad()), tol) << "parameter " << i;
    }
    {
      at::NoGradGuard no_grad;  // the optimizer step: SGD
      for (size_t i = 0; i < pw.size(); ++i) {
        pw[i].sub_(0.1 * pw[i].grad());
        pr[i].sub_(0.1 * pr[i].grad());
      }
    }
    const at::Tensor after_with = loss_of(with), after_without = loss_of(without);
    EXPECT_LT(after_with.item<double>(), loss_with.item<double>());  // the step helped
    EXPECT_LT(relative_error(after_with, after_without), tol);
  }
}

}  // namespace
