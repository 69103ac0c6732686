// A Llama-style decoder block in LibTorch C++ (pre-norm attention with rotary embeddings and
// grouped-query heads, then a SiLU-gated MLP), built from backplane::torch's layers so that the
// same block runs with use_kernels (the layers' Hub kernels and backplane's attention) or
// without (LibTorch composites and at::scaled_dot_product_attention). Shared by the end-to-end
// test (tests/torch_layers) and backplane-bench.
#pragma once

#include <backplane/torch/attention.hpp>
#include <backplane/torch/layers.hpp>

#include <ATen/ATen.h>

#include <cmath>
#include <memory>
#include <optional>
#include <vector>

namespace backplane::bench {

struct LlamaBlockConfig {
  int64_t hidden = 512;
  int64_t heads = 8;
  int64_t kv_heads = 2;
  int64_t head_dim = 64;
  int64_t intermediate = 1376;
  double eps = 1e-6;
};

class LlamaBlock {
 public:
  // Random weights from `seed` (the same block for the same seed). With `kernels`, the layers
  // use the kernels bound there and attention goes through `attention` (which must be set);
  // without, everything is LibTorch.
  LlamaBlock(const LlamaBlockConfig& config, at::ScalarType dtype, uint64_t seed,
             torch::SharedLayerKernels kernels = nullptr,
             std::shared_ptr<const torch::Attention> attention = nullptr)
      : config_(config), attention_(std::move(attention)) {
    at::manual_seed(seed);
    const auto weight = [&](int64_t out, int64_t in) {
      return (at::randn({out, in}) / std::sqrt(static_cast<double>(in))).to(dtype);
    };
    wq_ = weight(config.heads * config.head_dim, config.hidden);
    wk_ = weight(config.kv_heads * config.head_dim, config.hidden);
    wv_ = weight(config.kv_heads * config.head_dim, config.hidden);
    wo_ = weight(config.hidden, config.heads * config.head_dim);
    w_gate_up_ = weight(2 * config.intermediate, config.hidden);
    w_down_ = weight(config.hidden, config.intermediate);
    attn_norm_w_ = (1 + 0.1 * at::randn({config.hidden})).to(dtype);
    mlp_norm_w_ = (1 + 0.1 * at::randn({config.hidden})).to(dtype);
    attn_norm_.emplace(attn_norm_w_, config.eps, kernels);
    mlp_norm_.emplace(mlp_norm_w_, config.eps, kernels);
    act_.emplace(kernels);
    rope_.emplace(false, kernels);
  }

  // x [batch, seq, hidden] -> [batch, seq, hidden]; causal self-attention over the sequence.
  at::Tensor operator()(const at::Tensor& x) const {
    const int64_t b = x.size(0), s = x.size(1), hd = config_.head_dim;
    at::Tensor residual = x.clone();
    const at::Tensor h = (*attn_norm_)(x);
    at::Tensor q = at::linear(h, wq_).view({b, s, config_.heads, hd}).transpose(1, 2);
    at::Tensor k = at::linear(h, wk_).view({b, s, config_.kv_heads, hd}).transpose(1, 2);
    const at::Tensor v = at::linear(h, wv_).view({b, s, config_.kv_heads, hd}).transpose(1, 2);
    const auto [cos, sin] = torch::RotaryEmbedding::tables(s, hd);
    (*rope_)(q, k, cos, sin);
    at::Tensor attn;
    if (attention_) {
      torch::AttentionArgs args;
      args.causal = true;
      attn = (*attention_)(q, k, v, args);
    } else {
      attn = at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true, std::nullopt,
                                              /*enable_gqa=*/true);
    }
    const at::Tensor o = at::linear(attn.transpose(1, 2).reshape({b, s, config_.heads * hd}), wo_);
    const at::Tensor h2 = (*mlp_norm_)(o, residual);  // residual += o
    const at::Tensor mlp = at::linear((*act_)(at::linear(h2, w_gate_up_)), w_down_);
    return residual + mlp;
  }

  const LlamaBlockConfig& config() const { return config_; }

  // The trainable weights (the norms' included: the layers hold the same tensors), for a
  // training step: set requires_grad on them, read their .grad(), update them in place.
  std::vector<at::Tensor> parameters() const {
    return {wq_, wk_, wv_, wo_, w_gate_up_, w_down_, attn_norm_w_, mlp_norm_w_};
  }

 private:
  LlamaBlockConfig config_;
  std::shared_ptr<const torch::Attention> attention_;
  at::Tensor wq_, wk_, wv_, wo_, w_gate_up_, w_down_, attn_norm_w_, mlp_norm_w_;
  std::optional<torch::RMSNorm> attn_norm_, mlp_norm_;
  std::optional<torch::SiluAndMul> act_;
  std::optional<torch::RotaryEmbedding> rope_;
};

}  // namespace backplane::bench
