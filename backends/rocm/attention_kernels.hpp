// The HIP build of the GPU attention kernels (kernels/attention/cuda, compiled by hipcc) as
// plugin kernels for AMD GPUs: flash_attention_2, sdpa and eager. The kernels live in
// libbackplane-rocm-attention.so next to this plugin, opened on the first call, so the plugin
// itself never links the HIP runtime.
#pragma once

#include <backplane/internal/dynamic_library.hpp>
#include <backplane/plugin_sdk.hpp>

#include <mutex>
#include <string>
#include <vector>

namespace backplane::rocm {

class AttentionKernels {
 public:
  // `archs`: what the module has code for ("gfx90a"); `device_archs`: each registered
  // device's arch, by index.
  AttentionKernels(sdk::Host host, std::vector<std::string> archs,
                   std::vector<std::string> device_archs);
  AttentionKernels(const AttentionKernels&) = delete;
  AttentionKernels& operator=(const AttentionKernels&) = delete;

  // Registers the kernels for each of `device_types` (types this plugin registered).
  void register_all(sdk::Registrar& registrar, const std::vector<std::string>& device_types);

  // kernel: 0 flash, 1 eager, 2 sdpa (flash for bfloat16 and float16, eager otherwise).
  bp_status* forward(int kernel, const bp_attention_args* args);
  bp_status* out_of_memory() noexcept;

 private:
  // The module's entry point, or null with load_error_ set.
  using ForwardFn = int (*)(int, const bp_attention_args*, char*, size_t);
  ForwardFn entry();

  sdk::Host host_;
  std::vector<std::string> archs_;
  std::vector<std::string> device_archs_;
  std::once_flag once_;
  internal::DynamicLibrary module_;
  ForwardFn forward_ = nullptr;
  std::string load_error_;
};

}  // namespace backplane::rocm
