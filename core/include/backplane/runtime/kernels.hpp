// Kernels registered by plugins (ABI 1.3): what each needs, and a handle that calls one
// directly, resolved once and called many times with no lookup or allocation.
#pragma once

#include <backplane/plugin.h>
#include <backplane/export.hpp>
#include <backplane/runtime/device_info.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace backplane {

inline constexpr const char* kAttentionForward = "attention_forward";
inline constexpr const char* kAttentionBackward = "attention_backward";  // ABI 1.6

struct KernelInfo {
  std::string op;              // "attention_forward"
  std::string implementation;  // "sdpa", "eager", "flash_attention_2"
  std::string device_type;
  std::string plugin;
  std::optional<ComputeCapability> min_compute_capability;
  std::vector<std::string> dtypes;  // empty: any
  int max_head_dim = 0;             // 0: no limit
};

// Why `kernel` cannot run on `device` ("requires compute capability >= 8.0, but cuda:0 has
// 7.5"); empty when it can.
BACKPLANE_API std::string kernel_mismatch(const KernelInfo& kernel, const DeviceInfo& device);

// One attention_forward call in C++ terms: softmax(q k^T * scale [+ mask]) v into `output`.
// Tensors are DLPack, borrowed for the call (LibTorch: at::toDLPack; the bridge's
// backplane::torch::Attention does this for at::Tensor). AttentionKernel fills the ABI's
// bp_attention_args from it, struct_size included.
struct AttentionArguments {
  const DLTensor* query = nullptr;   // [batch, heads, seq_q, head_dim]
  const DLTensor* key = nullptr;     // [batch, kv_heads, seq_k, head_dim]
  const DLTensor* value = nullptr;   // [batch, kv_heads, seq_k, head_dim]
  const DLTensor* output = nullptr;  // the shape of query
  const DLTensor* mask = nullptr;    // none; or bool (true: attend) / additive, broadcastable
  bool causal = false;               // bottom-right aligned, as transformers' sdpa
  std::optional<double> scale;       // default 1 / sqrt(head_dim)
  void* stream = nullptr;            // the device's stream; nullptr: the default one
  // For training (ABI 1.6): float32 [batch, heads, seq_q], written with each row's logsumexp
  // for the backward. Only a kernel with a backward (has_backward()) takes one.
  const DLTensor* logsumexp = nullptr;
};

// One attention_backward call: the forward's tensors as they were (output and logsumexp
// included), the output's gradient, and the gradients written (grad_key and grad_value summed
// over each group's query heads).
struct AttentionBackwardArguments {
  const DLTensor* query = nullptr;
  const DLTensor* key = nullptr;
  const DLTensor* value = nullptr;
  const DLTensor* mask = nullptr;
  const DLTensor* output = nullptr;
  const DLTensor* logsumexp = nullptr;
  const DLTensor* grad_output = nullptr;
  const DLTensor* grad_query = nullptr;
  const DLTensor* grad_key = nullptr;
  const DLTensor* grad_value = nullptr;
  bool causal = false;
  std::optional<double> scale;
  void* stream = nullptr;
};

// An attention_forward kernel ready to call, with the attention_backward its plugin registered
// for the same implementation, if any. Keeps the plugin loaded while it lives.
class BACKPLANE_API AttentionKernel {
 public:
  AttentionKernel(KernelInfo info, bp_attention_forward_fn function, void* context,
                  std::shared_ptr<const void> owner, bp_attention_backward_fn backward = nullptr,
                  void* backward_context = nullptr);
  const KernelInfo& info() const { return info_; }
  // Whether the plugin registered the implementation's backward (its forward then writes the
  // logsumexp).
  bool has_backward() const { return backward_ != nullptr; }
  // Runs the backward; throws Unavailable when there is none, InvalidArgument with the
  // kernel's message when it refuses the call.
  void backward(const AttentionBackwardArguments& arguments) const;
  // Runs the kernel; throws InvalidArgument with the kernel's message when it refuses the call.
  void operator()(const AttentionArguments& arguments) const;
  // The same with the ABI's struct as the caller filled it (struct_size = sizeof args; the
  // kernel refuses one below ABI 1.3's, naming the size to set).
  void operator()(const bp_attention_args& args) const;

 private:
  KernelInfo info_;
  bp_attention_forward_fn function_;
  void* context_;
  bp_attention_backward_fn backward_;
  void* backward_context_;
  std::shared_ptr<const void> owner_;  // the runtime's snapshot, which owns the library
};

}  // namespace backplane
