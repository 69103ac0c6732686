// Attention on torch::Tensors through the kernels backplane's plugins register.
//
//   backplane::torch::Attention attn(runtime, q.device());   // resolves once
//   at::Tensor out = attn(q, k, v, {mask, /*causal=*/true});  // calls the kernel, no lookup
//   at::Tensor once = backplane::torch::attention(q, k, v);   // resolves, then calls
//
// Shapes and semantics are the kernels' (plugin.h, op attention_forward): q [batch, heads_q,
// seq_q, head_dim], k and v [batch, heads_kv, seq_k, head_dim(_v)], heads_q a multiple of
// heads_kv (grouped-query), mask broadcastable to [batch, heads_q, seq_q, seq_k] (bool: true
// keeps; or additive), causal aligned bottom-right (PyTorch's is_causal is top-left), scale
// default 1 / sqrt(head_dim). Strided tensors are passed as they are, without copies.
#pragma once

#include <backplane/rules/attention.hpp>
#include <backplane/runtime/kernels.hpp>
#include <backplane/runtime/runtime.hpp>
#include <backplane/warnings.hpp>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace backplane::torch {

// What one call passes besides q, k and v.
struct AttentionArgs {
  std::optional<at::Tensor> mask;
  bool causal = false;
  std::optional<double> scale;  // default 1 / sqrt(head_dim)
  std::optional<at::Tensor>
      out;  // default: at::empty([batch, heads_q, seq_q, head_dim_v], q's options)
};

// The arguments of the one-shot attention(): a call's, and which implementation.
struct AttentionOptions : AttentionArgs {
  // transformers' attn_implementation ("sdpa", "eager", "flash_attention_2", ...). Unset: the
  // default, sdpa, falling back to eager silently when sdpa cannot run on the device, as
  // transformers does; an explicit name that cannot run is an error.
  std::optional<std::string> attn_implementation;
};

// Receives each warning of a resolution. Unset: each distinct warning is written once per
// process to stderr ("backplane: warn: ..."), like transformers' warning_once (warnings.hpp).
using WarningHandler = backplane::WarningHandler;

// An attention kernel resolved once for one device, called many times.
class Attention {
 public:
  // Resolves `attn_implementation` (nullopt: the default) for `device` once, with
  // Runtime::resolve_attention (transformers' rules, attention.hpp); `query` adds what the rules
  // may check (the model's dtype and head_dim, the Hub kernels the local store has). Each warning
  // of the resolution goes to `on_warning` before the kernel is looked up, so that it is seen
  // even when the kernel then cannot load. Throws what resolution throws: NotFound for an
  // unknown device, InvalidArgument for a name transformers rejects, Unavailable when the
  // implementation cannot run there (transformers' message) or only a Hub kernel would serve it.
  Attention(const Runtime& runtime, const Device& device,
            std::optional<std::string> attn_implementation = std::nullopt,
            const WarningHandler& on_warning = {}, const AttentionQuery& query = {});
  Attention(const Runtime& runtime, const c10::Device& device,
            std::optional<std::string> attn_implementation = std::nullopt,
            const WarningHandler& on_warning = {}, const AttentionQuery& query = {});

  // out = softmax(q k^T * scale + mask) v, written into args.out or a new tensor, returned.
  // Gradients: when q, k or v requires grad (and grad mode is on), the result is
  // differentiable: the plugin's attention_backward (ABI 1.6) runs from the forward's saved
  // logsumexp; a kernel without one says so once and a composite of LibTorch ops (softmax of
  // the masked scores) runs instead. Such calls refuse args.out and a mask that requires grad.
  // Throws InvalidArgument naming the argument for a tensor this kernel cannot take (rank,
  // dtype, device, shape), with the kernel's own message for what only it checks.
  at::Tensor operator()(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                        const AttentionArgs& args = {}) const;

  const Device& device() const { return device_; }  // with its index: "cpu:0", "cuda:1"
  const std::string& implementation() const { return kernel_.info().implementation; }
  const KernelInfo& kernel_info() const { return kernel_.info(); }
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  Attention(const Runtime& runtime, const AttentionResolution& resolution,
            const WarningHandler& on_warning);
  // A call autograd records (operator()'s checks done).
  at::Tensor with_grad(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                       const AttentionArgs& args) const;

  Device device_;
  c10::Device torch_device_;
  std::vector<std::string> warnings_;  // told before kernel_ is looked up
  AttentionKernel kernel_;
};

// The runtime of the one-shot attention(): Runtime::open() with the environment's options
// (BACKPLANE_PLUGIN_PATH, ...), opened on first use and kept for the process.
const Runtime& default_runtime();

// Resolves options.attn_implementation for q's device (with q's dtype and head_dim as the
// AttentionQuery), then calls it once.
at::Tensor attention(const Runtime& runtime, const at::Tensor& query, const at::Tensor& key,
                     const at::Tensor& value, const AttentionOptions& options = {});
at::Tensor attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                     const AttentionOptions& options = {});

}  // namespace backplane::torch
