// config.json -> the module tree transformers 5.24 builds for it. Sources (transformers 5.24.0):
// models/{llama,mistral,qwen2,qwen3}/configuration_*.py (defaults, base_model_tp_plan),
// models/{llama,mistral,qwen2,qwen3}/modeling_*.py (modules, definition order, biases, _tp_plan,
// _no_split_modules, _tied_weights_keys), configuration_utils.py (dtype / torch_dtype, strict
// type checks, layer_types), modeling_rope_utils.py (rope standardization, validation and the
// inv_freq sizes of each rope_type), distributed/mixin.py (the
// embedding_rowwise rule added to the base model's tp_plan).
#include "config_loader.hpp"

#include "activation.hpp"
#include "architecture_descriptor.hpp"
#include "json_input.hpp"

#include <backplane/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <set>
#include <string_view>

namespace backplane {
namespace model_detail {
namespace {

using Json = nlohmann::json;

constexpr uint64_t kMaxConfigBytes = 16u << 20;
constexpr int64_t kMaxVocab = int64_t{1} << 24;
constexpr int64_t kMaxHidden = int64_t{1} << 20;
constexpr int64_t kMaxIntermediate = int64_t{1} << 22;
constexpr int64_t kMaxHeads = int64_t{1} << 16;
constexpr int64_t kMaxHeadDim = int64_t{1} << 16;
constexpr int64_t kMaxAttentionWidth = int64_t{1} << 22;  // num_attention_heads x head_dim
constexpr int64_t kMaxLayers = 4096;

// How a config class declares a key: absent from the class (only read if config.json has
// it), `int | None` (null means "derive it"), or `int` (null is a type error).
enum class Field { kAbsent, kNullable, kRequired };

// The q/k/v projections' bias: from attention_bias, always (Qwen2), never (Mistral).
enum class QkvBias { kFromConfig, kAlways, kNever };

struct Architecture {
  std::string_view model_type;
  std::string_view architecture;  // the *ForCausalLM class
  std::string_view prefix;        // class-name prefix: "Llama" -> LlamaDecoderLayer
  int64_t vocab_size;
  int64_t hidden_size;
  int64_t intermediate_size;
  int64_t num_hidden_layers;
  int64_t num_attention_heads;
  Field kv_heads_field;
  int64_t kv_heads_default;  // 0: num_attention_heads
  Field head_dim_field;
  int64_t head_dim_default;  // 0: hidden_size / num_attention_heads
  QkvBias qkv_bias;
  bool o_proj_bias_from_config;     // else no bias
  bool mlp_bias_from_config;        // else no bias
  bool qk_norm;                     // Qwen3's per-head q_norm / k_norm
  bool refuses_indivisible_hidden;  // LlamaConfig.validate_architecture
  bool has_default_layer_types;     // Qwen2/Qwen3 compute layer_types when absent
};

constexpr Architecture kArchitectures[] = {
    {"llama", "LlamaForCausalLM", "Llama", 32000, 4096, 11008, 32, 32, Field::kNullable, 0,
     Field::kNullable, 0, QkvBias::kFromConfig, true, true, false, true, false},
    {"mistral", "MistralForCausalLM", "Mistral", 32000, 4096, 14336, 32, 32, Field::kRequired, 8,
     Field::kNullable, 0, QkvBias::kNever, false, false, false, false, false},
    {"qwen2", "Qwen2ForCausalLM", "Qwen2", 151936, 4096, 22016, 32, 32, Field::kNullable, 32,
     Field::kAbsent, 0, QkvBias::kAlways, false, false, false, false, true},
    {"qwen3", "Qwen3ForCausalLM", "Qwen3", 151936, 4096, 22016, 32, 32, Field::kNullable, 32,
     Field::kRequired, 128, QkvBias::kFromConfig, true, false, true, false, true},
};

// configuration_utils.ALLOWED_ATTN_LAYER_TYPES + ALLOWED_MLP_LAYER_TYPES, and the legacy names
// remap_legacy_layer_types renames before validation.
constexpr std::string_view kLayerTypes[] = {
    "full_attention",
    "sliding_attention",
    "chunked_attention",
    "window_attention",
    "indexed_attention",
    "compressed_sparse_attention",
    "heavily_compressed_attention",
    "minimax_m3_sparse",
    "conv",
    "moe",
    "hybrid",
    "hybrid_sliding",
    "reference_sliding_attention",
    "linear_attention",
    "sparse",
    "dense",
    "mamba",
    "attention",
    "deepseek_sparse_attention",
    "qwen_sparse_attention",
};

// Typed access to config.json keys, with the key named in every error.
class Config {
 public:
  Config(const Json& json, const std::string& what) : json_(json), what_(what) {}

  const Json* find(const char* key) const {
    const auto it = json_.find(key);
    return it == json_.end() ? nullptr : &*it;
  }

  [[noreturn]] void fail(const std::string& message) const {
    throw InvalidArgument(what_ + ": " + message);
  }

  int64_t integer(const char* key, const Json& value, int64_t min, int64_t max) const {
    if (!value.is_number_integer()) {
      fail("`" + std::string(key) + "` must be an integer, got " + value.dump());
    }
    if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(max)) {
      fail("`" + std::string(key) + "` = " + value.dump() +
           " is out of range; accepted: " + std::to_string(min) + " to " + std::to_string(max));
    }
    const auto number = value.get<int64_t>();
    if (number < min || number > max) {
      fail("`" + std::string(key) + "` = " + value.dump() +
           " is out of range; accepted: " + std::to_string(min) + " to " + std::to_string(max));
    }
    return number;
  }

  // A size with a default; null is refused (the config classes type these `int`).
  int64_t size(const char* key, int64_t fallback, int64_t max) const {
    const Json* value = find(key);
    if (value == nullptr) return fallback;
    return integer(key, *value, 1, max);
  }

  // A size typed `int | None`: absent -> `absent`, null -> nullopt.
  std::optional<int64_t> nullable_size(const char* key, std::optional<int64_t> absent,
                                       int64_t max) const {
    const Json* value = find(key);
    if (value == nullptr) return absent;
    if (value->is_null()) return std::nullopt;
    return integer(key, *value, 1, max);
  }

  bool flag(const char* key, bool fallback) const {
    const Json* value = find(key);
    if (value == nullptr) return fallback;
    if (!value->is_boolean()) {
      fail("`" + std::string(key) + "` must be true or false, got " + value->dump());
    }
    return value->get<bool>();
  }

  std::string text(const char* key, const char* fallback) const {
    const Json* value = find(key);
    if (value == nullptr) return fallback;
    if (!value->is_string())
      fail("`" + std::string(key) + "` must be a string, got " + value->dump());
    return value->get<std::string>();
  }

 private:
  const Json& json_;
  const std::string& what_;
};

const Architecture* find_by_model_type(std::string_view model_type) {
  for (const Architecture& arch : kArchitectures) {
    if (arch.model_type == model_type) return &arch;
  }
  return nullptr;
}

const Architecture* find_by_class(std::string_view architecture) {
  for (const Architecture& arch : kArchitectures) {
    if (arch.architecture == architecture) return &arch;
  }
  return nullptr;
}

// architectures[0] if the config has a non-empty list; throws if it is not a list of strings.
std::optional<std::string> first_architecture(const Config& config) {
  const Json* list = config.find("architectures");
  if (list == nullptr || list->is_null()) return std::nullopt;
  if (!list->is_array()) config.fail("`architectures` must be a list of class names");
  for (const Json& entry : *list) {
    if (!entry.is_string()) config.fail("`architectures` must be a list of class names");
  }
  if (list->empty()) return std::nullopt;
  return (*list)[0].get<std::string>();
}

// A quantized checkpoint's modules are not the ones above: transformers swaps its Linear
// layers for the quantizer's classes, with their own parameters (scales, packed weights).
bool quantized(const Json& config) {
  const auto it = config.find("quantization_config");
  return it != config.end() && !it->is_null();
}

// The architecture a config names: a hand-written entry above, else a descriptor
// (architecture_descriptor.hpp). Exactly one of the two is set.
struct Identified {
  const Architecture* table = nullptr;
  const EmbeddedDescriptor* descriptor = nullptr;
  std::string_view model_type() const {
    return table ? table->model_type : std::string_view(descriptor->model_type);
  }
  std::string_view architecture() const {
    return table ? table->architecture : std::string_view(descriptor->architecture);
  }
};

// The table first; a descriptor only for what the table does not have.
Identified by_model_type(std::string_view model_type) {
  if (const Architecture* table = find_by_model_type(model_type)) return {table, nullptr};
  return {nullptr, descriptor_for_model_type(model_type)};
}

Identified by_class(std::string_view architecture) {
  if (const Architecture* table = find_by_class(architecture)) return {table, nullptr};
  return {nullptr, descriptor_for_class(architecture)};
}

bool found(const Identified& identified) {
  return identified.table != nullptr || identified.descriptor != nullptr;
}

// "is not described here; nearest: ...; ..." for a name no architecture has.
std::string not_described(std::string_view name) {
  std::string nearest;
  for (const std::string& candidate : nearest_described(name, 3)) {
    nearest += (nearest.empty() ? "" : ", ") + candidate;
  }
  return "is not described here (" + std::to_string(supported_architectures().size()) +
         " architecture classes are; nearest: " + nearest +
         "); for any architecture transformers builds, tools/export-module-tree writes its "
         "module tree for `hwprobe plan --tree`";
}

Identified identify(const Config& config) {
  const Json* model_type = config.find("model_type");
  const std::optional<std::string> architecture = first_architecture(config);
  Identified from_class;
  if (architecture) {
    from_class = by_class(*architecture);
    if (!found(from_class))
      config.fail("architecture '" + *architecture + "' " + not_described(*architecture));
  }
  if (model_type == nullptr || model_type->is_null()) {
    if (!found(from_class)) {
      config.fail(
          "names no `model_type` and no `architectures`; one of them says which "
          "architecture it is (such as \"model_type\": \"llama\")");
    }
    return from_class;
  }
  if (!model_type->is_string()) config.fail("`model_type` must be a string");
  const std::string type = model_type->get<std::string>();
  const Identified from_type = by_model_type(type);
  if (!found(from_type)) config.fail("model_type '" + type + "' " + not_described(type));
  // Several model_types may share a class (Llama's clones): the class names must agree.
  if (found(from_class) && from_class.architecture() != from_type.architecture()) {
    config.fail("`architectures` names " + *architecture + " but `model_type` is '" +
                std::string(from_type.model_type()) + "' (" +
                std::string(from_type.architecture()) + ")");
  }
  return from_type;
}

// A torch dtype attribute name, as PreTrainedConfig resolves `getattr(torch, dtype)`; only the
// floating types torch can build a model in (torch.set_default_dtype).
std::optional<DType> read_dtype(const Config& config) {
  const char* key = "dtype";
  const Json* value = config.find("dtype");
  if (value == nullptr || value->is_null()) {
    key = "torch_dtype";
    value = config.find("torch_dtype");
  }
  if (value == nullptr || value->is_null()) return std::nullopt;
  static constexpr std::pair<std::string_view, DType> kNames[] = {
      {"float32", DType::kFloat32}, {"float", DType::kFloat32},     {"float16", DType::kFloat16},
      {"half", DType::kFloat16},    {"bfloat16", DType::kBFloat16}, {"float64", DType::kFloat64},
      {"double", DType::kFloat64},
  };
  if (value->is_string()) {
    for (const auto& [name, dtype] : kNames) {
      if (name == value->get<std::string>()) return dtype;
    }
  }
  config.fail("`" + std::string(key) + "` = " + value->dump() +
              " is not a dtype a model can be built in; accepted: float32, float, float16, half, "
              "bfloat16, float64, double");
}

struct Rope {
  int64_t inv_freq_size = 0;
};

// repr() of a Python float: the shortest text that reads back as the same double.
std::string python_float(double value) {
  char text[32];
  for (int precision = 1; precision <= 17; ++precision) {
    std::snprintf(text, sizeof text, "%.*g", precision, value);
    if (std::strtod(text, nullptr) == value) break;
  }
  std::string result = text;
  if (result.find_first_of(".en") == std::string::npos) result += ".0";
  return result;
}

// Python's int(x) on a float: truncation toward zero.
int64_t truncate(double x) {
  return static_cast<int64_t>(std::trunc(x));
}

// Torch broadcasting of two 1-D lengths, as the yarn and longrope formulas combine them.
int64_t broadcast(const Config& config, const std::string& rope_type, int64_t a, int64_t b) {
  if (a == b || b == 1) return a;
  if (a == 1) return b;
  config.fail("rope_type '" + rope_type + "' combines inverse frequencies of sizes " +
              std::to_string(a) + " and " + std::to_string(b) +
              ", which torch cannot broadcast (check head_dim and partial_rotary_factor)");
}

double number(const Config& config, const std::string& key, const Json& value) {
  if (!value.is_number()) config.fail("`" + key + "` must be a number, got " + value.dump());
  return value.get<double>();
}

std::set<std::string> layer_type_labels(const Config& config, const Architecture& arch,
                                        int64_t num_hidden_layers) {
  std::set<std::string> labels;
  const Json* layer_types = config.find("layer_types");
  if (layer_types != nullptr && !layer_types->is_null()) {
    if (!layer_types->is_array()) config.fail("`layer_types` must be a list of strings");
    for (const Json& entry : *layer_types) {
      if (!entry.is_string()) config.fail("`layer_types` must be a list of strings");
      bool known = false;
      for (std::string_view allowed : kLayerTypes)
        known = known || allowed == entry.get<std::string>();
      if (!known) {
        config.fail("`layer_types` entry '" + entry.get<std::string>() +
                    "' is not a layer type transformers knows (full_attention, sliding_attention, "
                    "chunked_attention, ...)");
      }
      labels.insert(entry.get<std::string>());
    }
    if (static_cast<int64_t>(layer_types->size()) != num_hidden_layers) {
      config.fail("`num_hidden_layers` (" + std::to_string(num_hidden_layers) +
                  ") must be equal to the number of `layer_types` (" +
                  std::to_string(layer_types->size()) + ")");
    }
    return labels;
  }
  if (arch.has_default_layer_types) {
    // Qwen2Config.__post_init__: layer i slides when a sliding window is in use (both
    // use_sliding_window and a non-null sliding_window) and i >= max_window_layers.
    const Json* window = config.find("sliding_window");
    const bool sliding =
        config.flag("use_sliding_window", false) && (window == nullptr || !window->is_null());
    const Json* max_window = config.find("max_window_layers");
    const int64_t first_sliding =
        max_window == nullptr
            ? 28
            : config.integer("max_window_layers", *max_window, std::numeric_limits<int64_t>::min(),
                             std::numeric_limits<int64_t>::max());
    if (!sliding || first_sliding > 0) labels.insert("full_attention");
    if (sliding && first_sliding < num_hidden_layers) labels.insert("sliding_attention");
  }
  return labels;
}

// RotaryEmbeddingConfigMixin (convert_rope_params_to_dict, standardize_rope_params,
// validate_rope) and the ROPE_INIT_FUNCTIONS' output sizes.
// default_rotates_partial: the default rope type rotates int(head_dim * partial_rotary_factor)
// of the head (Phi's rotary embedding), not the whole head (Llama's).
Rope read_rope(const Config& config, const std::set<std::string>& layer_labels, int64_t head_dim,
               bool head_dim_is_attribute, bool default_rotates_partial = false) {
  Json parameters = Json::object();
  const Json* scaling = config.find("rope_scaling");
  const Json* explicit_parameters = config.find("rope_parameters");
  // `rope_scaling or rope_parameters`: an empty or null rope_scaling does not count.
  if (scaling != nullptr && !scaling->is_null() && !(scaling->is_object() && scaling->empty())) {
    if (!scaling->is_object()) config.fail("`rope_scaling` must be an object");
    parameters = *scaling;
  } else if (explicit_parameters != nullptr && !explicit_parameters->is_null()) {
    if (!explicit_parameters->is_object()) config.fail("`rope_parameters` must be an object");
    parameters = *explicit_parameters;
  }
  for (const auto& [key, value] : parameters.items()) {
    if (layer_labels.count(key) > 0) {
      config.fail("rope parameters given per layer type ('" + key +
                  "') are not supported by this architecture's rotary embedding");
    }
  }
  if (!parameters.contains("partial_rotary_factor")) {
    if (const Json* factor = config.find("partial_rotary_factor");
        factor != nullptr && !factor->is_null()) {
      parameters["partial_rotary_factor"] = *factor;
    }
  }
  std::string rope_type = "default";
  if (const auto it = parameters.find("rope_type"); it != parameters.end()) {
    if (!it->is_string()) config.fail("`rope_type` must be a string, got " + it->dump());
    rope_type = it->get<std::string>();
  } else if (const auto legacy = parameters.find("type"); legacy != parameters.end()) {
    if (!legacy->is_string()) config.fail("rope `type` must be a string, got " + legacy->dump());
    rope_type = legacy->get<std::string>();
  }
  struct RopeType {
    std::string_view name;
    std::vector<const char*> required;  // beyond what standardization fills in
  };
  static const RopeType kRopeTypes[] = {
      {"default", {}},
      {"linear", {"factor"}},
      {"dynamic", {"factor"}},
      {"yarn", {"factor"}},
      {"longrope", {"short_factor", "long_factor"}},
      {"llama3", {"factor", "low_freq_factor", "high_freq_factor"}},
      {"proportional", {}},
  };
  const RopeType* known = nullptr;
  for (const RopeType& type : kRopeTypes) {
    if (type.name == rope_type) known = &type;
  }
  if (known == nullptr) {
    config.fail("rope_type '" + rope_type +
                "' is not supported; accepted: default, linear, dynamic, yarn, longrope, llama3, "
                "proportional");
  }
  for (const char* key : known->required) {
    if (!parameters.contains(key)) {
      config.fail("rope parameters of rope_type '" + rope_type + "' lack the required key '" + key +
                  "'");
    }
  }
  double partial = 1.0;
  if (const auto it = parameters.find("partial_rotary_factor"); it != parameters.end()) {
    if (it->is_boolean()) {
      partial = it->get<bool>() ? 1.0 : 0.0;
    } else {
      partial = number(config, "partial_rotary_factor", *it);
    }
    if (!(partial >= 0.0 && partial <= 1.0)) {
      config.fail("`partial_rotary_factor` = " + it->dump() + " is out of range; accepted: 0 to 1");
    }
  }
  // validate_rope: a fully rotated odd head cannot be split in halves (head_dim <= 4 allowed).
  if (head_dim_is_attribute && head_dim > 4 && head_dim % 2 == 1 &&
      truncate(static_cast<double>(head_dim) * partial) == head_dim) {
    const std::string factor_text = python_float(partial);
    config.fail(
        "RoPE requires an even rotary dimension, but got `head_dim`=" + std::to_string(head_dim) +
        " with `partial_rotary_factor`=" + factor_text + " for `full_attention`.");
  }
  Rope rope;
  const int64_t dim = truncate(static_cast<double>(head_dim) * partial);
  const int64_t halves = std::max<int64_t>(0, (dim + 1) / 2);  // torch.arange(0, dim, 2)
  if (rope_type == "default") {
    rope.inv_freq_size = default_rotates_partial ? halves : (head_dim + 1) / 2;
  } else if (rope_type == "linear" || rope_type == "llama3") {
    rope.inv_freq_size = halves;
  } else if (rope_type == "dynamic") {
    if (dim == 2) {
      config.fail("rope_type 'dynamic' divides by (rotary dimension - 2), which is 0 here");
    }
    rope.inv_freq_size = halves;
  } else if (rope_type == "yarn") {
    rope.inv_freq_size = broadcast(config, rope_type, halves, std::max<int64_t>(0, dim / 2));
  } else if (rope_type == "longrope") {
    const Json& short_factor = parameters["short_factor"];
    if (!short_factor.is_array()) config.fail("`short_factor` must be a list of numbers");
    for (const Json& entry : short_factor) number(config, "short_factor", entry);
    rope.inv_freq_size =
        broadcast(config, rope_type, static_cast<int64_t>(short_factor.size()), halves);
  } else {  // proportional: rotated angles, then zeros up to head_dim // 2
    const auto rotated =
        static_cast<int64_t>(std::floor(partial * static_cast<double>(head_dim) / 2));
    rope.inv_freq_size = std::max(rotated, head_dim / 2);
  }
  return rope;
}

TensorInfo parameter(const char* name, std::vector<int64_t> shape, DType dtype) {
  TensorInfo tensor;
  tensor.name = name;
  tensor.shape = std::move(shape);
  tensor.dtype = dtype;
  return tensor;
}

TensorInfo buffer(const char* name, std::vector<int64_t> shape, DType dtype, bool persistent) {
  TensorInfo tensor = parameter(name, std::move(shape), dtype);
  tensor.buffer = true;
  tensor.persistent = persistent;
  return tensor;
}

Module module(std::string name, std::string class_name) {
  Module result;
  result.name = std::move(name);
  result.class_name = std::move(class_name);
  return result;
}

Module linear(const char* name, int64_t in_features, int64_t out_features, bool bias, DType dtype) {
  Module result = module(name, "Linear");
  result.tensors.push_back(parameter("weight", {out_features, in_features}, dtype));
  if (bias) result.tensors.push_back(parameter("bias", {out_features}, dtype));
  return result;
}

Module rms_norm(const char* name, const std::string& prefix, int64_t size, DType dtype) {
  Module result = module(name, prefix + "RMSNorm");
  result.tensors.push_back(parameter("weight", {size}, dtype));
  return result;
}

Module activation(const Config& config, const std::string& hidden_act, DType dtype) {
  std::optional<Module> result = activation_module(hidden_act, "act_fn", dtype);
  if (!result) {
    config.fail("`hidden_act` '" + hidden_act +
                "' is not an activation transformers knows; accepted: " + activation_names());
  }
  return std::move(*result);
}

}  // namespace

bool names_supported_architecture(const Json& config) {
  if (!config.is_object() || quantized(config)) return false;
  const auto model_type = config.find("model_type");
  if (model_type != config.end() && model_type->is_string()) {
    return found(by_model_type(model_type->get<std::string>()));
  }
  const auto list = config.find("architectures");
  if (list != config.end() && list->is_array() && !list->empty() && (*list)[0].is_string()) {
    return found(by_class((*list)[0].get<std::string>()));
  }
  return false;
}

int64_t rope_inv_freq_length(const Json& config, const std::string& what, int64_t head_dim,
                             bool default_rotates_partial) {
  return read_rope(Config(config, what), {}, head_dim, true, default_rotates_partial).inv_freq_size;
}

std::optional<DType> config_dtype(const Json& json, const std::string& what) {
  if (!json.is_object()) throw InvalidArgument(what + ": must be a JSON object");
  return read_dtype(Config(json, what));
}

ModelDescription build_from_config(const Json& json, const std::string& what,
                                   std::optional<DType> dtype_override) {
  if (!json.is_object()) throw InvalidArgument(what + ": must be a JSON object");
  const Config config(json, what);
  const Identified identified = identify(config);
  if (quantized(json)) {
    const Json& quantization = json["quantization_config"];
    const auto method =
        quantization.is_object() ? quantization.find("quant_method") : quantization.end();
    config.fail(
        "has a quantization_config" +
        (method != quantization.end() ? " (quant_method " + method->dump() + ")" : std::string()) +
        ": quantized modules are not described; describe the checkpoint by its weights "
        "(model_from_safetensors)");
  }
  if (identified.descriptor != nullptr) {
    return build_from_descriptor(*identified.descriptor, json, what, dtype_override);
  }
  const Architecture& arch = *identified.table;
  const std::string prefix(arch.prefix);

  const int64_t vocab_size = config.size("vocab_size", arch.vocab_size, kMaxVocab);
  const int64_t hidden_size = config.size("hidden_size", arch.hidden_size, kMaxHidden);
  const int64_t intermediate_size =
      config.size("intermediate_size", arch.intermediate_size, kMaxIntermediate);
  const int64_t num_hidden_layers =
      config.size("num_hidden_layers", arch.num_hidden_layers, kMaxLayers);
  const int64_t num_attention_heads =
      config.size("num_attention_heads", arch.num_attention_heads, kMaxHeads);

  const std::optional<int64_t> kv_default =
      arch.kv_heads_default > 0 ? std::optional<int64_t>(arch.kv_heads_default) : std::nullopt;
  const int64_t num_key_value_heads =
      arch.kv_heads_field == Field::kRequired
          ? config.size("num_key_value_heads", arch.kv_heads_default, kMaxHeads)
          : config.nullable_size("num_key_value_heads", kv_default, kMaxHeads)
                .value_or(num_attention_heads);

  // head_dim: Qwen3 types it `int` (default 128); Llama and Mistral `int | None` (None: derived);
  // Qwen2 has no such field, but the modeling code reads one that config.json sets.
  std::optional<int64_t> explicit_head_dim;
  if (arch.head_dim_field == Field::kRequired) {
    explicit_head_dim = config.size("head_dim", arch.head_dim_default, kMaxHeadDim);
  } else if (arch.head_dim_field == Field::kNullable) {
    explicit_head_dim = config.nullable_size("head_dim", std::nullopt, kMaxHeadDim);
  } else if (const Json* value = config.find("head_dim"); value != nullptr) {
    if (value->is_null()) {
      config.fail("`head_dim` is null; " + std::string(arch.architecture) +
                  " reads it as a number: give an integer or leave the key out");
    }
    explicit_head_dim = config.integer("head_dim", *value, 1, kMaxHeadDim);
  }
  if (arch.refuses_indivisible_hidden && hidden_size % num_attention_heads != 0) {
    config.fail("The hidden size (" + std::to_string(hidden_size) +
                ") is not a multiple of the number of attention heads (" +
                std::to_string(num_attention_heads) + ").");
  }
  if (!explicit_head_dim && hidden_size % num_attention_heads != 0) {
    config.fail("`hidden_size` (" + std::to_string(hidden_size) +
                ") is not a multiple of `num_attention_heads` (" +
                std::to_string(num_attention_heads) +
                ") and no `head_dim` is given to say how wide a head is");
  }
  const int64_t head_dim = explicit_head_dim.value_or(hidden_size / num_attention_heads);
  if (num_attention_heads * head_dim > kMaxAttentionWidth) {
    config.fail(
        "`num_attention_heads` x `head_dim` = " + std::to_string(num_attention_heads * head_dim) +
        " is out of range; at most " + std::to_string(kMaxAttentionWidth) + " are accepted");
  }
  if (num_key_value_heads > num_attention_heads || num_attention_heads % num_key_value_heads != 0) {
    config.fail("`num_attention_heads` (" + std::to_string(num_attention_heads) +
                ") is not a multiple of `num_key_value_heads` (" +
                std::to_string(num_key_value_heads) +
                "); grouped-query attention shares each key/value head among a whole number of "
                "query heads");
  }

  const bool tie_word_embeddings = config.flag("tie_word_embeddings", false);
  const bool attention_bias =
      arch.qkv_bias == QkvBias::kFromConfig ? config.flag("attention_bias", false) : false;
  const bool qkv_bias = arch.qkv_bias == QkvBias::kAlways || attention_bias;
  const bool o_proj_bias = arch.o_proj_bias_from_config && attention_bias;
  const bool mlp_bias = arch.mlp_bias_from_config && config.flag("mlp_bias", false);
  const std::string hidden_act = config.text("hidden_act", "silu");

  if (const Json* pad = config.find("pad_token_id"); pad != nullptr && !pad->is_null()) {
    const int64_t pad_token_id =
        config.integer("pad_token_id", *pad, std::numeric_limits<int64_t>::min(),
                       std::numeric_limits<int64_t>::max());
    if (pad_token_id < -vocab_size || pad_token_id >= vocab_size) {
      config.fail("`pad_token_id` (" + std::to_string(pad_token_id) +
                  ") must be within the vocabulary: from " + std::to_string(-vocab_size) + " to " +
                  std::to_string(vocab_size - 1) + " (nn.Embedding's padding_idx)");
    }
  }

  const std::set<std::string> labels = layer_type_labels(config, arch, num_hidden_layers);
  const Rope rope =
      read_rope(config, labels, head_dim,
                arch.head_dim_field != Field::kAbsent || explicit_head_dim.has_value());

  const std::optional<DType> config_dtype_value = read_dtype(config);
  const DType dtype = dtype_override.value_or(config_dtype_value.value_or(DType::kFloat32));

  ModelDescription description;
  description.architecture = std::string(arch.architecture);
  description.model_type = std::string(arch.model_type);
  description.dtype = dtype;
  description.from_config = true;
  description.no_split_module_classes = {prefix + "DecoderLayer"};
  description.hyperparameters = {
      {"vocab_size", vocab_size},
      {"hidden_size", hidden_size},
      {"intermediate_size", intermediate_size},
      {"num_hidden_layers", num_hidden_layers},
      {"num_attention_heads", num_attention_heads},
      {"num_key_value_heads", num_key_value_heads},
      {"head_dim", head_dim},
  };

  Module root = module("", description.architecture);
  Module model = module("model", prefix + "Model");

  Module embed_tokens = module("embed_tokens", "Embedding");
  embed_tokens.tensors.push_back(parameter("weight", {vocab_size, hidden_size}, dtype));
  model.children.push_back(std::move(embed_tokens));

  Module layers = module("layers", "ModuleList");
  layers.children.reserve(static_cast<size_t>(num_hidden_layers));
  const int64_t q_width = num_attention_heads * head_dim;
  const int64_t kv_width = num_key_value_heads * head_dim;
  for (int64_t i = 0; i < num_hidden_layers; ++i) {
    Module layer = module(std::to_string(i), prefix + "DecoderLayer");
    Module attention = module("self_attn", prefix + "Attention");
    attention.children.push_back(linear("q_proj", hidden_size, q_width, qkv_bias, dtype));
    attention.children.push_back(linear("k_proj", hidden_size, kv_width, qkv_bias, dtype));
    attention.children.push_back(linear("v_proj", hidden_size, kv_width, qkv_bias, dtype));
    attention.children.push_back(linear("o_proj", q_width, hidden_size, o_proj_bias, dtype));
    if (arch.qk_norm) {
      attention.children.push_back(rms_norm("q_norm", prefix, head_dim, dtype));
      attention.children.push_back(rms_norm("k_norm", prefix, head_dim, dtype));
    }
    Module mlp = module("mlp", prefix + "MLP");
    mlp.children.push_back(linear("gate_proj", hidden_size, intermediate_size, mlp_bias, dtype));
    mlp.children.push_back(linear("up_proj", hidden_size, intermediate_size, mlp_bias, dtype));
    mlp.children.push_back(linear("down_proj", intermediate_size, hidden_size, mlp_bias, dtype));
    mlp.children.push_back(activation(config, hidden_act, dtype));
    layer.children.push_back(std::move(attention));
    layer.children.push_back(std::move(mlp));
    layer.children.push_back(rms_norm("input_layernorm", prefix, hidden_size, dtype));
    layer.children.push_back(rms_norm("post_attention_layernorm", prefix, hidden_size, dtype));
    layers.children.push_back(std::move(layer));
  }
  model.children.push_back(std::move(layers));
  model.children.push_back(rms_norm("norm", prefix, hidden_size, dtype));

  Module rotary = module("rotary_emb", prefix + "RotaryEmbedding");
  rotary.tensors.push_back(buffer("inv_freq", {rope.inv_freq_size}, DType::kFloat32, false));
  rotary.tensors.push_back(
      buffer("original_inv_freq", {rope.inv_freq_size}, DType::kFloat32, false));
  model.children.push_back(std::move(rotary));
  root.children.push_back(std::move(model));

  // lm_head.weight is embed_tokens.weight when tied: named_parameters() lists it once, there.
  Module lm_head = module("lm_head", "Linear");
  if (!tie_word_embeddings) {
    lm_head.tensors.push_back(parameter("weight", {vocab_size, hidden_size}, dtype));
  } else {
    description.tied_parameters = {{"lm_head.weight", "model.embed_tokens.weight"}};
    description.tied_weights_keys = {{"lm_head.weight", "model.embed_tokens.weight"}};
  }
  root.children.push_back(std::move(lm_head));
  description.root = std::move(root);

  // model.tp_plan: the CausalLM's _tp_plan, then the base model's (embedding_rowwise first,
  // added by DistributedMixin.init_parallel_plans, then the config's base_model_tp_plan).
  description.tp_plan = {
      {"lm_head", "colwise_gather_output"},
      {"model.embed_tokens", "embedding_rowwise"},
      {"model.layers.*.self_attn.q_proj", "colwise"},
      {"model.layers.*.self_attn.k_proj", "colwise"},
      {"model.layers.*.self_attn.v_proj", "colwise"},
  };
  if (arch.qk_norm) {
    description.tp_plan.emplace_back("model.layers.*.self_attn.q_norm",
                                     "replicated_with_grad_allreduce");
    description.tp_plan.emplace_back("model.layers.*.self_attn.k_norm",
                                     "replicated_with_grad_allreduce");
  }
  description.tp_plan.emplace_back("model.layers.*.self_attn.o_proj", "rowwise");
  description.tp_plan.emplace_back("model.layers.*.mlp.gate_proj", "colwise");
  description.tp_plan.emplace_back("model.layers.*.mlp.up_proj", "colwise");
  description.tp_plan.emplace_back("model.layers.*.mlp.down_proj", "rowwise");
  return description;
}

}  // namespace model_detail

std::vector<std::string> supported_architectures() {
  std::vector<std::string> names;
  for (const model_detail::Architecture& arch : model_detail::kArchitectures) {
    names.emplace_back(arch.architecture);
  }
  for (std::string& name : model_detail::described_architectures()) {
    if (std::find(names.begin(), names.end(), name) == names.end())
      names.push_back(std::move(name));
  }
  return names;
}

ModelDescription model_from_config_json(std::string_view text) {
  const std::string what = "config.json";
  if (text.size() > model_detail::kMaxConfigBytes) {
    throw InvalidArgument(what + " text is " + std::to_string(text.size()) + " bytes; at most " +
                          std::to_string(model_detail::kMaxConfigBytes) + " are accepted");
  }
  return model_detail::build_from_config(model_detail::parse_json(text, what, {}), what,
                                         std::nullopt);
}

ModelDescription model_from_config(const std::filesystem::path& config_json) {
  const std::string what = "config.json '" + config_json.string() + "'";
  const std::string text =
      model_detail::read_small_file(config_json, model_detail::kMaxConfigBytes, what);
  return model_detail::build_from_config(model_detail::parse_json(text, what, {}), what,
                                         std::nullopt);
}

}  // namespace backplane
