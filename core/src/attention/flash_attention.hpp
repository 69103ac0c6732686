// transformers' flash-attention tables (modeling_flash_attention_utils.py:
// FLASH_ATTENTION_COMPATIBILITY_MATRIX, FLASH_ATTN_KERNEL_FALLBACK, FLASH_ATTN_KERNEL_DEVICES)
// and the messages of modeling_utils.py _flash_attn_import_error, in backplane's device types.
#pragma once

#include <backplane/rules/attention.hpp>
#include <backplane/runtime/device_info.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::detail {

struct FlashAttentionVersion {
  int version = 0;
  std::string implementation;  // "flash_attention_2"
  // transformers' supported_devices names, in its order ("cuda" also covers rocm: PyTorch's
  // ROCm builds answer to "cuda").
  std::vector<std::string> supported_devices;
  // The least compute capability on cuda: transformers' cuda_min_major_version (FA3 8, FA4 9),
  // and docs/device-rules.md §6's Ampere for FA2, which transformers leaves to the package.
  ComputeCapability cuda_min;
};

// The entry for "flash_attention_N"; nullptr for other names.
const FlashAttentionVersion* find_flash_attention(std::string_view implementation);

// FLASH_ATTN_KERNEL_DEVICES: the device types a Hub flash kernel ships builds for; nullptr for a
// repo it does not list (assumed to run everywhere, as transformers does).
const std::vector<std::string>* hub_kernel_device_types(std::string_view repo);

// Whether `device_type` is one of `names` as transformers sees it (rocm counts as cuda).
bool among_torch_devices(std::string_view device_type, const std::vector<std::string>& names);

// "FlashAttention2 has been toggled on, but it cannot be used due to the following error:"
std::string flash_preface(int version);
// Python's repr of a tuple of strings: ('cuda',) or ('cuda', 'xpu').
std::string python_tuple(const std::vector<std::string>& names);
// transformers' capability message, e.g. "FlashAttention4 requires compute capability >= 9,
// but found (8, 0) with compute capability 8.x" (major only when the minor is 0).
std::string capability_message(int version, const ComputeCapability& min,
                               const ComputeCapability& found);
// The warning of _flash_attn_can_dispatch for a dtype other than float16/bfloat16.
std::string flash_dtype_warning(int version, const std::string& model_class,
                                const std::string& dtype);

}  // namespace backplane::detail
