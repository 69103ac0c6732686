#include "flash_attention.hpp"

#include <algorithm>

namespace backplane {
namespace detail {

const FlashAttentionVersion* find_flash_attention(std::string_view implementation) {
  static const std::vector<FlashAttentionVersion> versions = {
      {2, "flash_attention_2", {"cuda", "mlu", "musa", "npu", "xpu"}, {8, 0}},
      {3, "flash_attention_3", {"cuda"}, {8, 0}},
      {4, "flash_attention_4", {"cuda"}, {9, 0}},
  };
  for (const FlashAttentionVersion& v : versions) {
    if (v.implementation == implementation) return &v;
  }
  return nullptr;
}

const std::vector<std::string>* hub_kernel_device_types(std::string_view repo) {
  static const std::vector<std::pair<std::string, std::vector<std::string>>> devices = {
      {"kernels-community/flash-attn2", {"cuda", "xpu"}},
      {"kernels-community/flash-attn3", {"cuda"}},
      {"kernels-community/vllm-flash-attn3", {"cuda"}},
      {"kernels-community/aiter-flash-attn", {"rocm"}},
      {"kernels-community/flash-attn4", {"cuda"}},
      {"kernels-community/metal-flash-sdpa", {"mps"}},
  };
  for (const auto& [name, types] : devices) {
    if (name == repo) return &types;
  }
  return nullptr;
}

bool among_torch_devices(std::string_view device_type, const std::vector<std::string>& names) {
  const std::string_view torch_type = device_type == "rocm" ? "cuda" : device_type;
  return std::find(names.begin(), names.end(), torch_type) != names.end();
}

std::string flash_preface(int version) {
  return "FlashAttention" + std::to_string(version) +
         " has been toggled on, but it cannot be used due to the following error:";
}

std::string python_tuple(const std::vector<std::string>& names) {
  std::string text = "(";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) text += ", ";
    text += "'" + names[i] + "'";
  }
  return text + (names.size() == 1 ? ",)" : ")");
}

std::string capability_message(int version, const ComputeCapability& min,
                               const ComputeCapability& found) {
  const std::string wanted = min.minor == 0 ? std::to_string(min.major) : min.str();
  return "FlashAttention" + std::to_string(version) + " requires compute capability >= " + wanted +
         ", but found (" + std::to_string(found.major) + ", " + std::to_string(found.minor) +
         ") with compute capability " + std::to_string(found.major) + ".x";
}

std::string flash_dtype_warning(int version, const std::string& model_class,
                                const std::string& dtype) {
  const std::string n = std::to_string(version);
  return "Flash Attention " + n +
         " only supports torch.float16 and torch.bfloat16 dtypes, but the current dype in " +
         (model_class.empty() ? std::string("the model") : model_class) + " is torch." + dtype +
         ". You should run training or inference using Automatic Mixed-Precision via the `with "
         "torch.autocast(device_type='torch_device'):` decorator, or load the model with the "
         "`dtype` argument. Example: `model = "
         "AutoModel.from_pretrained(\"meta-llama/Llama-3.2-1B\", "
         "attn_implementation=\"flash_attention_" +
         n + "\", dtype=torch.float16)`";
}

}  // namespace detail

std::optional<HubKernelId> flash_attention_hub_fallback(std::string_view implementation,
                                                        std::string_view device_type) {
  const detail::FlashAttentionVersion* flash = detail::find_flash_attention(implementation);
  if (flash == nullptr) return std::nullopt;
  // transformers picks the ROCm repo for the whole process (torch.version.hip); backplane picks
  // it per device.
  const bool rocm = device_type == "rocm";
  HubKernelId id;
  switch (flash->version) {
    case 2:
      id.repo = rocm ? "kernels-community/aiter-flash-attn" : "kernels-community/flash-attn2";
      break;
    case 3:
      id.repo = rocm ? "kernels-community/aiter-flash-attn" : "kernels-community/vllm-flash-attn3";
      break;
    default:
      id.repo = "kernels-community/flash-attn4";
      break;
  }
  return id;
}

}  // namespace backplane
