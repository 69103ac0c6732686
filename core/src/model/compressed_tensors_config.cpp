// A compressed-tensors checkpoint's quantization_config as CompressedTensorsConfig reads it
// (transformers 5.24, compressed-tensors 0.20.1: quant_config.py, quant_scheme.py,
// quant_args.py): its groups, presets and checks, refused in compressed-tensors' words.
#include <backplane/error.hpp>

#include <algorithm>
#include <cctype>

#include "quantization_reader.hpp"
#include "quantization_rules_data.hpp"  // generated: kQuantizationRulesJson

namespace backplane::model_detail {
namespace {

using Json = nlohmann::json;

const char* const kFormats[] = {
    "dense",           "sparse-bitmask",       "sparse-24-bitmask",    "int-quantized",
    "float-quantized", "naive-quantized",      "pack-quantized",       "marlin-24",
    "mixed-precision", "nvfp4-pack-quantized", "mxfp4-pack-quantized", "mxfp6-pack-quantized",
    "mxfp8-quantized"};

// Formats that parse but have no compressor in compressed-tensors 0.20 (preprocess_model's
// KeyError).
bool without_compressor(const std::string& format) {
  return format == "marlin-24" || format == "sparse-bitmask" || format == "sparse-24-bitmask";
}

class Fields {
 public:
  Fields(const Json& json, std::string where, const std::string& what)
      : json_(json), where_(std::move(where)), what_(what) {}

  [[noreturn]] void fail(const std::string& message) const {
    throw InvalidArgument(
        what_ + ": quantization_config: " + (where_.empty() ? "" : where_ + ": ") + message);
  }

  const Json* get(const char* key) const {
    const auto it = json_.find(key);
    return it == json_.end() || it->is_null() ? nullptr : &*it;
  }

  std::string lower_text(const char* key, const std::string& fallback) const {
    const Json* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_string()) fail(std::string(key) + ": Input should be a valid string");
    std::string text = v->get<std::string>();
    std::transform(text.begin(), text.end(), text.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return text;
  }

  bool flag(const char* key, bool fallback) const {
    const Json* v = get(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) fail(std::string(key) + ": Input should be a valid boolean");
    return v->get<bool>();
  }

  const std::string& where() const { return where_; }
  const std::string& what() const { return what_; }

 private:
  const Json& json_;
  std::string where_;
  const std::string& what_;
};

std::string zp_dtype_for(const CompressedArgs& a, const Fields& f) {
  if (a.is_float) {
    if (a.num_bits != 4 && a.num_bits != 6 && a.num_bits != 8) {
      f.fail("Only num_bits in (8) are supported");
    }
    return "float8_e4m3fn";
  }
  return a.num_bits <= 8 ? "int8" : a.num_bits <= 16 ? "int16" : "int32";
}

const char* const kDynamicStrategies =
    "One of (<QuantizationStrategy.TOKEN: 'token'>, <QuantizationStrategy.TENSOR: 'tensor'>, "
    "<QuantizationStrategy.TENSOR_GROUP: 'tensor_group'>, <QuantizationStrategy.GROUP: "
    "'group'>) must be used for dynamic quant.";

CompressedArgs read_args(const Json& json, const std::string& where, const std::string& what,
                         bool activation) {
  const Fields f(json, where, what);
  if (!json.is_object()) f.fail("Input should be a valid dictionary");
  CompressedArgs a;
  if (const Json* bits = f.get("num_bits")) {
    if (!bits->is_number_integer()) f.fail("num_bits: Input should be a valid integer");
    a.num_bits = bits->get<int>();
  }
  const std::string type = f.lower_text("type", "int");
  if (type != "int" && type != "float") {
    f.fail("type: Value error, '" + type + "' is not a valid QuantizationType");
  }
  a.is_float = type == "float";
  a.symmetric = f.flag("symmetric", true);
  std::optional<int64_t> group;
  if (const Json* g = f.get("group_size")) {
    if (!g->is_number_integer()) f.fail("group_size: Input should be a valid integer");
    group = g->get<int64_t>();
    if (*group < -1) {
      f.fail("group_size: Value error, Invalid group size " + std::to_string(*group) +
             ". Use group_size > 0 for strategy='group' and group_size = -1 for 'channel'");
    }
  }
  static const char* const kStrategies[] = {"tensor", "channel",      "group",    "block",
                                            "token",  "tensor_group", "attn_head"};
  a.strategy = f.lower_text("strategy", "");
  if (!a.strategy.empty() && std::find(std::begin(kStrategies), std::end(kStrategies),
                                       a.strategy) == std::end(kStrategies)) {
    f.fail("strategy: Value error, '" + a.strategy + "' is not a valid QuantizationStrategy");
  }
  if (a.strategy.empty()) {
    a.strategy = !group ? "tensor" : *group > 0 ? "group" : "channel";
  }
  const bool grouped = a.strategy == "group" || a.strategy == "tensor_group";
  if (grouped && (!group || *group <= 0)) {
    f.fail("Value error, strategy " + a.strategy +
           " requires group_size to be set to a positive value");
  }
  if (!grouped && group && *group > 0) {
    f.fail("Value error, group_size requires strategy to be set to 'group'");
  }
  a.group_size = grouped ? *group : 0;
  const Json* block = f.get("block_structure");
  if (a.strategy == "block" && block == nullptr) {
    f.fail("Value error, Block strategy requires block structure");
  }
  if (a.strategy != "block" && block != nullptr) {
    f.fail("Value error, Block structure requires block strategy");
  }
  if (block != nullptr) {
    std::vector<int64_t> dims;
    if (block->is_string()) {  // "128x128"
      const std::string text = block->get<std::string>();
      const size_t x = text.find('x');
      try {
        if (x != std::string::npos)
          dims = {std::stoll(text.substr(0, x)), std::stoll(text.substr(x + 1))};
      } catch (const std::exception&) {
        dims.clear();
      }
    } else if (block->is_array()) {
      for (const Json& d : *block) {
        if (d.is_number_integer()) dims.push_back(d.get<int64_t>());
      }
      if (dims.size() != block->size()) dims.clear();
    }
    if (dims.size() != 2 || dims[0] <= 0 || dims[1] <= 0) {
      f.fail("Value error, Invalid block_structure '" + block->dump() +
             "'. Must be a list of positive ints [rows, cols].");
    }
    a.block = {dims[0], dims[1]};
  }
  if (const Json* dynamic = f.get("dynamic")) {
    if (dynamic->is_string() && dynamic->get<std::string>() == "local") {
      a.dynamic_local = true;
    } else if (dynamic->is_boolean()) {
      a.dynamic = dynamic->get<bool>();
    } else {
      f.fail("dynamic: Input should be a valid boolean or 'local'");
    }
  }
  if (a.strategy == "token" && !a.dynamic) {
    f.fail("Value error, Cannot perform static token quantization, please use `dynamic=True`");
  }
  if (a.dynamic && a.strategy != "token" && a.strategy != "tensor" && !grouped) {
    f.fail(std::string("Value error, ") + kDynamicStrategies);
  }
  if (a.dynamic_local && a.strategy != "tensor_group") {
    f.fail("Value error, local is only supported for strategy tensor_group");
  }
  if (activation && a.strategy != "token" && a.strategy != "tensor" && !grouped &&
      a.strategy != "attn_head") {
    f.fail("Using " + a.strategy + " strategy is not supported for activation quantization");
  }
  if (const Json* s = f.get("scale_dtype")) {
    if (!s->is_string()) f.fail("scale_dtype: Input should be an instance of dtype");
    a.scale_dtype = s->get<std::string>();
    if (a.scale_dtype->rfind("torch.", 0) == 0) a.scale_dtype = a.scale_dtype->substr(6);
  }
  if (const Json* z = f.get("zp_dtype")) {
    if (!z->is_string()) f.fail("zp_dtype: Input should be an instance of dtype");
    a.zp_dtype = z->get<std::string>();
    if (a.zp_dtype.rfind("torch.", 0) == 0) a.zp_dtype = a.zp_dtype.substr(6);
  } else {
    a.zp_dtype = zp_dtype_for(a, f);
  }
  return a;
}

const nlohmann::ordered_json& presets() {
  return quantization_rules().at("compressed_tensors_presets");
}

std::optional<CompressedArgs> optional_args(const Json* json, const std::string& where,
                                            const std::string& what, bool activation) {
  if (json == nullptr || json->is_null()) return std::nullopt;
  return read_args(*json, where, what, activation);
}

CompressedScheme read_scheme(const std::string& name, const Json& value, const std::string& what) {
  CompressedScheme scheme;
  scheme.name = name;
  const std::string where = "config_groups." + name;
  if (value.is_array()) {  // a preset's name with its targets
    std::string upper = name;
    std::transform(upper.begin(), upper.end(), upper.begin(),
                   [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
    if (!presets().contains(upper)) {
      std::string names;
      for (const auto& [preset, _] : presets().items())
        names += (names.empty() ? "'" : ", '") + preset + "'";
      throw InvalidArgument(what + ": quantization_config: Unknown preset scheme name " + upper +
                            ", available names: [" + names + "]");
    }
    for (const Json& t : value) {
      if (!t.is_string())
        Fields(value, where, what).fail("Input should be a valid list of strings");
      scheme.targets.push_back(t.get<std::string>());
    }
    const Json preset = Json::parse(presets().at(upper).dump());
    scheme.weights = optional_args(&preset.at("weights"), where + ".weights", what, false);
    scheme.input_activations =
        optional_args(&preset.at("input_activations"), where + ".input_activations", what, true);
    scheme.output_activations =
        optional_args(&preset.at("output_activations"), where + ".output_activations", what, true);
    return scheme;
  }
  const Fields f(value, where, what);
  if (!value.is_object()) f.fail("Input should be a valid dictionary or a list of targets");
  const Json* targets = f.get("targets");
  if (targets == nullptr) f.fail("targets: Field required");
  if (!targets->is_array()) f.fail("targets: Input should be a valid list");
  for (const Json& t : *targets) {
    if (!t.is_string()) f.fail("targets: Input should be a valid string");
    scheme.targets.push_back(t.get<std::string>());
  }
  scheme.weights = optional_args(f.get("weights"), where + ".weights", what, false);
  scheme.input_activations =
      optional_args(f.get("input_activations"), where + ".input_activations", what, true);
  scheme.output_activations =
      optional_args(f.get("output_activations"), where + ".output_activations", what, true);
  if (const Json* format = f.get("format")) {
    const std::string text = format->is_string() ? format->get<std::string>() : format->dump();
    if (text == "mixed-precision") {
      f.fail("Value error, mixed-precision cannot be set as a format for a QuantizationScheme");
    }
    if (std::find(std::begin(kFormats), std::end(kFormats), text) == std::end(kFormats)) {
      std::string accepted;
      for (size_t i = 0; i < std::size(kFormats); ++i) {
        accepted += (i == 0                         ? "'"
                     : i + 1 == std::size(kFormats) ? " or '"
                                                    : ", '") +
                    std::string(kFormats[i]) + "'";
      }
      f.fail("format: Input should be " + accepted);
    }
    if (without_compressor(text)) {
      f.fail("Unable to find " + text +
             " registered under type <class 'compressed_tensors.compressors.base.BaseCompressor'> "
             "(compressed-tensors 0.20 has no compressor for it)");
    }
    scheme.format = text;
  }
  return scheme;
}

}  // namespace

// Ordered: compressed-tensors' messages list its presets in its own order.
const nlohmann::ordered_json& quantization_rules() {
  static const nlohmann::ordered_json rules = nlohmann::ordered_json::parse(kQuantizationRulesJson);
  return rules;
}

QuantizationConfig read_compressed_tensors(const nlohmann::json& quantization,
                                           const std::string& what) {
  QuantizationConfig config;
  config.method = QuantMethod::kCompressedTensors;
  config.pre_quantized = true;
  config.weight_block_size.reset();
  CompressedTensors ct;
  const Fields top(quantization, "", what);
  const Json* groups = top.get("config_groups");
  if (groups == nullptr && top.get("kv_cache_scheme") != nullptr) {
    top.fail("config_groups: Input should be a valid dictionary");
  }
  if (groups != nullptr) {
    if (!groups->is_object()) top.fail("config_groups: Input should be a valid dictionary");
    for (const auto& [name, value] : groups->items())
      ct.groups.push_back(read_scheme(name, value, what));
  }
  if (const Json* ignore = top.get("ignore")) {
    if (!ignore->is_array()) top.fail("ignore: Input should be a valid list");
    for (const Json& i : *ignore) {
      if (!i.is_string()) top.fail("ignore: Input should be a valid string");
      ct.ignore.push_back(i.get<std::string>());
    }
  }
  const std::string status = top.lower_text("quantization_status", "initialized");
  static const char* const kStatuses[] = {"initialized", "calibration", "frozen", "compressed",
                                          "decompressed"};
  if (std::find(std::begin(kStatuses), std::end(kStatuses), status) == std::end(kStatuses)) {
    top.fail(
        "quantization_status: Input should be 'initialized', 'calibration', 'frozen', "
        "'compressed' or 'decompressed'");
  }
  ct.compressed = status == "compressed";
  // initialize_qparams registers zero points even for symmetric schemes before compression.
  ct.force_zero_point = status != "compressed" && status != "decompressed";
  config.dequantize = top.flag("dequantize", false) || !top.flag("run_compressed", true);
  if (top.flag("use_optimized_inference", false) && !config.dequantize) {
    top.fail(
        "use_optimized_inference=True (CompressedTensorsFP8Linear on an fp8 GPU) is not "
        "planned here; plan it without, or with dequantize=True");
  }
  config.compressed_tensors = std::move(ct);
  return config;
}

}  // namespace backplane::model_detail
