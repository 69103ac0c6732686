// A model as the planner sees it: the module tree transformers builds, with each module's own
// parameters and buffers (shapes and dtypes, never data). Built from a Hugging Face config.json
// or from safetensors headers; consumed by device_map planning and tensor-parallel plans.
#pragma once

#include <backplane/export.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane {

// Element types, named as torch names them without the "torch." prefix.
enum class DType {
  kFloat32,
  kFloat16,
  kBFloat16,
  kFloat64,
  kFloat8E4M3,
  kFloat8E5M2,
  kInt64,
  kInt32,
  kInt16,
  kInt8,
  kUInt8,
  kBool,
};

// "float32", "bfloat16", ...; also torch's aliases ("float", "half", "torch.bfloat16") and
// safetensors' codes ("F32", "BF16", "F8_E4M3", "I64", "BOOL"). Throws InvalidArgument naming
// the value and the accepted names.
BACKPLANE_API DType parse_dtype(std::string_view text);
BACKPLANE_API const char* to_string(DType dtype);  // "bfloat16"
// Bits per element (bool: 8, as torch stores it).
BACKPLANE_API int dtype_bits(DType dtype);
BACKPLANE_API bool is_floating_point(DType dtype);

struct TensorInfo {
  std::string name;  // local to its module: "weight", "bias", "inv_freq"
  std::vector<int64_t> shape;
  DType dtype = DType::kFloat32;
  bool buffer = false;      // a buffer, not a parameter
  bool persistent = true;   // false for non-persistent buffers (not in the state dict)
  int64_t numel() const;
};

struct Module {
  std::string name;        // local name: "q_proj", "0", "layers"; "" for the root
  std::string class_name;  // "Linear", "LlamaDecoderLayer", "ModuleList", "LlamaRMSNorm"
  std::vector<TensorInfo> tensors;  // its own parameters and buffers, in registration order
  std::vector<Module> children;     // in definition order
};

struct ModelDescription {
  std::string architecture;  // "LlamaForCausalLM"
  std::string model_type;    // "llama"
  Module root;
  DType dtype = DType::kFloat32;  // config's torch_dtype / dtype, or the weights' dtype
  // Classes whose modules are never split across devices (the decoder layer).
  std::vector<std::string> no_split_module_classes;
  // Groups of fully qualified parameter names that share storage
  // ({"lm_head.weight", "model.embed_tokens.weight"} with tie_word_embeddings).
  std::vector<std::vector<std::string>> tied_parameters;
  // Hyperparameters the rules read (num_attention_heads, num_key_value_heads, head_dim,
  // hidden_size, intermediate_size, vocab_size, num_hidden_layers).
  std::map<std::string, int64_t> hyperparameters;
  // False when the tree was rebuilt from weights: definition order and non-persistent buffers
  // are then reconstructed, not known (see model_from_safetensors).
  bool from_config = true;
};

}  // namespace backplane
