// config.json -> the module tree transformers 5.24 builds for it: which architecture the
// config names (model_type, architectures), its dtype, and the refusals that come before any
// architecture's own rules (a quantized checkpoint); the tree itself is the architecture's
// descriptor's (architecture_descriptor.hpp).
#include "config_loader.hpp"

#include "architecture_descriptor.hpp"
#include "json_input.hpp"
#include "quantization_reader.hpp"

#include <backplane/error.hpp>

#include <algorithm>
#include <string_view>

namespace backplane {
namespace model_detail {
namespace {

using Json = nlohmann::json;

constexpr uint64_t kMaxConfigBytes = 16u << 20;

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

 private:
  const Json& json_;
  const std::string& what_;
};

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

// Python's truth value of a config field, as the config classes test their flags.
bool truthy(const Json& object, const char* key) {
  const auto it = object.find(key);
  if (it == object.end() || it->is_null()) return false;
  if (it->is_boolean()) return it->get<bool>();
  if (it->is_number()) return it->get<double>() != 0;
  if (it->is_string()) return !it->get<std::string>().empty();
  return !it->empty();
}

// A quantized checkpoint's modules are not the ones above: transformers swaps its Linear
// layers for the quantizer's classes, with their own parameters (scales, packed weights).
bool quantized(const Json& config) {
  const auto it = config.find("quantization_config");
  return it != config.end() && !it->is_null();
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

const EmbeddedDescriptor& identify(const Config& config) {
  const Json* model_type = config.find("model_type");
  const std::optional<std::string> architecture = first_architecture(config);
  const EmbeddedDescriptor* from_class = nullptr;
  if (architecture) {
    from_class = descriptor_for_class(*architecture);
    if (from_class == nullptr)
      config.fail("architecture '" + *architecture + "' " + not_described(*architecture));
  }
  if (model_type == nullptr || model_type->is_null()) {
    if (from_class == nullptr) {
      config.fail(
          "names no `model_type` and no `architectures`; one of them says which "
          "architecture it is (such as \"model_type\": \"llama\")");
    }
    return *from_class;
  }
  if (!model_type->is_string()) config.fail("`model_type` must be a string");
  const std::string type = model_type->get<std::string>();
  const EmbeddedDescriptor* from_type = descriptor_for_model_type(type);
  if (from_type == nullptr) config.fail("model_type '" + type + "' " + not_described(type));
  // Several model_types may share a class (Llama's clones): the class names must agree.
  if (from_class != nullptr &&
      std::string_view(from_class->architecture) != from_type->architecture) {
    config.fail("`architectures` names " + *architecture + " but `model_type` is '" +
                from_type->model_type + "' (" + from_type->architecture + ")");
  }
  return *from_type;
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

}  // namespace

namespace {

// A quantization_config of a method the planner sizes (bitsandbytes, fp8): the model is described
// from its config, with the quantizer, as from_pretrained builds it.
bool planned_quantization(const Json& quantization) {
  if (!quantization.is_object()) return false;
  if (truthy(quantization, "load_in_4bit") || truthy(quantization, "load_in_8bit")) return true;
  const auto method = quantization.find("quant_method");
  return method != quantization.end() && method->is_string() &&
         (*method == "bitsandbytes" || *method == "fp8" || *method == "compressed-tensors" ||
          *method == "gptq" || *method == "awq" || *method == "mxfp4");
}

}  // namespace

bool names_supported_architecture(const Json& config) {
  if (!config.is_object()) return false;
  if (quantized(config) && !planned_quantization(config["quantization_config"])) return false;
  const auto model_type = config.find("model_type");
  if (model_type != config.end() && model_type->is_string()) {
    return descriptor_for_model_type(model_type->get<std::string>()) != nullptr;
  }
  const auto list = config.find("architectures");
  if (list != config.end() && list->is_array() && !list->empty() && (*list)[0].is_string()) {
    return descriptor_for_class((*list)[0].get<std::string>()) != nullptr;
  }
  return false;
}

std::optional<DType> config_dtype(const Json& json, const std::string& what) {
  if (!json.is_object()) throw InvalidArgument(what + ": must be a JSON object");
  return read_dtype(Config(json, what));
}

namespace {

// The quant_method names from_pretrained knows, in the order its messages list them
// (config_rules.json, written from transformers' AUTO_QUANTIZER_MAPPING).
const std::vector<std::string>& quantization_methods() {
  static const std::vector<std::string> methods =
      config_rules().at("quantization_methods").get<std::vector<std::string>>();
  return methods;
}

// ['awq', 'bitsandbytes_4bit', ...], as Python prints the list.
std::string python_list(const std::vector<std::string>& names) {
  std::string out = "[";
  for (const std::string& n : names) out += (out.size() > 1 ? ", '" : "'") + n + "'";
  return out + "]";
}

// What get_hf_quantizer makes of config.json's quantization_config: the method transformers
// would quantize with, or nullopt when it skips quantization (an unknown quant_method: a
// warning, and the model loads unquantized). Its refusals are transformers' own.
std::optional<std::string> quantization_method(const Config& config, const Json& quantization,
                                               std::vector<std::string>& warnings) {
  if (!quantization.is_object()) {
    config.fail("quantization_config must be a JSON object, found " + quantization.dump());
  }
  std::string method;
  // AutoQuantizationConfig.from_dict: the bitsandbytes flags choose the method.
  if (truthy(quantization, "load_in_4bit") || truthy(quantization, "load_in_8bit")) {
    method = truthy(quantization, "load_in_4bit") ? "bitsandbytes_4bit" : "bitsandbytes_8bit";
  } else if (quantization.contains("quant_method") && quantization["quant_method"].is_string()) {
    method = quantization["quant_method"].get<std::string>();
    if (method == "bitsandbytes") method = "bitsandbytes_4bit";  // neither flag: 4-bit
  } else {
    config.fail(
        "quantization_config: The model's quantization config from the arguments has no "
        "`quant_method` attribute. Make sure that the model has been correctly quantized");
  }
  const std::vector<std::string>& known = quantization_methods();
  if (std::find(known.begin(), known.end(), method) == known.end()) {
    warnings.push_back("quantization_config: Unknown quantization type, got " + method +
                       " - supported types are: " + python_list(known) +
                       ". Hence, we will skip the quantization. To remove the warning, you can "
                       "delete the quantization_config attribute in config.json");
    return std::nullopt;
  }
  if (truthy(quantization, "load_in_4bit") && truthy(quantization, "load_in_8bit")) {
    config.fail(  // BitsAndBytesConfig's own check
        "quantization_config: load_in_4bit and load_in_8bit are both True, but only one can be "
        "used at the same time");
  }
  return method;
}

}  // namespace

ModelDescription build_from_config(const Json& json, const std::string& what,
                                   std::optional<DType> dtype_override) {
  if (!json.is_object()) throw InvalidArgument(what + ": must be a JSON object");
  const Config config(json, what);
  const EmbeddedDescriptor& descriptor = identify(config);
  std::vector<std::string> warnings;
  std::optional<QuantizationConfig> quantization;
  if (quantized(json)) {
    const Json& given = json["quantization_config"];
    const std::optional<std::string> method = quantization_method(config, given, warnings);
    if (method) {
      quantization = read_quantization_config(given, *method, what);
      if (!quantization) {
        config.fail("has a quantization_config (quant_method \"" + *method +
                    "\"): its quantized modules are not described here (the methods planned here: "
                    "bitsandbytes_4bit, bitsandbytes_8bit, fp8, compressed-tensors, gptq, awq, "
                    "mxfp4); describe "
                    "the "
                    "checkpoint by its "
                    "weights (model_from_safetensors)");
      }
    }
  }
  ModelDescription model = build_from_descriptor(descriptor, json, what, dtype_override);
  model.warnings = std::move(warnings);
  model.quantization = quantization;
  return model;
}

}  // namespace model_detail

std::vector<std::string> supported_architectures() {
  std::vector<std::string> names;
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
  return model_detail::build_from_config(
      model_detail::parse_json(text, what, model_detail::kLastKeyWins), what, std::nullopt);
}

ModelDescription model_from_config(const std::filesystem::path& config_json) {
  const std::string what = "config.json '" + config_json.string() + "'";
  const std::string text =
      internal::read_bounded_file(config_json, model_detail::kMaxConfigBytes, what);
  return model_detail::build_from_config(
      model_detail::parse_json(text, what, model_detail::kLastKeyWins), what, std::nullopt);
}

}  // namespace backplane
