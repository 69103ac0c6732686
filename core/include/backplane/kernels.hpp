// Kernels registered by plugins (ABI 1.3): what each needs, and a handle that calls one
// directly, resolved once and called many times with no lookup or allocation.
#pragma once

#include <backplane/plugin.h>
#include <backplane/device_info.hpp>
#include <backplane/export.hpp>

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

// An attention_forward kernel ready to call. Keeps the plugin loaded while it lives.
class BACKPLANE_API AttentionKernel {
 public:
  AttentionKernel(KernelInfo info, bp_attention_forward_fn function, void* context,
                  std::shared_ptr<const void> owner);
  const KernelInfo& info() const { return info_; }
  // Runs the kernel; throws InvalidArgument with the kernel's message when it refuses the call.
  void operator()(const bp_attention_args& args) const;

 private:
  KernelInfo info_;
  bp_attention_forward_fn function_;
  void* context_;
  std::shared_ptr<const void> owner_;  // the runtime's snapshot, which owns the library
};

}  // namespace backplane
