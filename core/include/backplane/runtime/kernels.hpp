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
};

// An attention_forward kernel ready to call. Keeps the plugin loaded while it lives.
class BACKPLANE_API AttentionKernel {
 public:
  AttentionKernel(KernelInfo info, bp_attention_forward_fn function, void* context,
                  std::shared_ptr<const void> owner);
  const KernelInfo& info() const { return info_; }
  // Runs the kernel; throws InvalidArgument with the kernel's message when it refuses the call.
  void operator()(const AttentionArguments& arguments) const;
  // The same with the ABI's struct as the caller filled it (struct_size = sizeof args; the
  // kernel refuses one below ABI 1.3's, naming the size to set).
  void operator()(const bp_attention_args& args) const;

 private:
  KernelInfo info_;
  bp_attention_forward_fn function_;
  void* context_;
  std::shared_ptr<const void> owner_;  // the runtime's snapshot, which owns the library
};

}  // namespace backplane
