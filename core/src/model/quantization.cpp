// Quantization configs as transformers 5.24 reads them: BitsAndBytesConfig and
// FineGrainedFP8Config from a config.json's quantization_config (their post_init checks, in their
// words), the --quantize shorthands, and from_pretrained's merge of the two.
#include "quantization_reader.hpp"

#include <backplane/error.hpp>

#include <algorithm>
#include <cctype>

namespace backplane {

const char* to_string(QuantMethod method) {
  switch (method) {
    case QuantMethod::kBitsAndBytes4bit:
      return "bitsandbytes_4bit";
    case QuantMethod::kBitsAndBytes8bit:
      return "bitsandbytes_8bit";
    case QuantMethod::kFp8:
      return "fp8";
    case QuantMethod::kCompressedTensors:
      return "compressed-tensors";
    case QuantMethod::kGptq:
      return "gptq";
    case QuantMethod::kAwq:
      return "awq";
    case QuantMethod::kMxfp4:
      return "mxfp4";
  }
  return "?";
}

QuantizationConfig parse_quantize_option(std::string_view text, std::string_view source) {
  QuantizationConfig config;
  if (text == "bnb-4bit" || text == "bitsandbytes_4bit") {
    config.method = QuantMethod::kBitsAndBytes4bit;
  } else if (text == "bnb-8bit" || text == "bitsandbytes_8bit") {
    config.method = QuantMethod::kBitsAndBytes8bit;
  } else if (text == "fp8") {
    config.method = QuantMethod::kFp8;
  } else {
    throw InvalidArgument(std::string(source) + " " + std::string(text) +
                          ": expected bnb-4bit, bnb-8bit or fp8 (BitsAndBytesConfig(load_in_4bit="
                          "True), BitsAndBytesConfig(load_in_8bit=True), FineGrainedFP8Config())");
  }
  return config;
}

namespace model_detail {
namespace {

using Json = nlohmann::json;

class Reader {
 public:
  Reader(const Json& json, const std::string& what) : json_(json), what_(what) {}

  [[noreturn]] void fail(const std::string& message) const {
    throw InvalidArgument(what_ + ": quantization_config: " + message);
  }

  bool has(const char* key) const { return json_.contains(key); }

  const Json* get(const char* key) const {
    const auto it = json_.find(key);
    return it == json_.end() || it->is_null() ? nullptr : &*it;
  }

  // A bool field (absent or null: the default), refused with the config's TypeError otherwise.
  bool flag(const char* key, bool fallback) const {
    const Json* value = get(key);
    if (value == nullptr) return fallback;
    if (!value->is_boolean()) fail(std::string(key) + " must be a boolean");
    return value->get<bool>();
  }

  std::optional<std::vector<std::string>> names(const char* key, const char* message) const {
    const Json* value = get(key);
    if (value == nullptr) return std::nullopt;
    if (!value->is_array()) fail(message);
    std::vector<std::string> out;
    for (const Json& entry : *value) {
      if (!entry.is_string()) fail(message);
      out.push_back(entry.get<std::string>());
    }
    return out;
  }

  std::string text(const char* key, const std::string& fallback) const {
    const Json* value = get(key);
    if (value == nullptr) return fallback;
    if (!value->is_string()) fail(std::string(key) + " must be a string, found " + value->dump());
    return value->get<std::string>();
  }

 private:
  const Json& json_;
  const std::string& what_;
};

// Python's str.lower(), as the config classes normalize their names.
std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// Python's repr of a str: 'x'.
std::string repr(const std::string& text) {
  return "'" + text + "'";
}

QuantizationConfig read_bitsandbytes(const Reader& r, QuantMethod method) {
  QuantizationConfig config;
  config.method = method;
  r.flag("load_in_4bit", false);
  r.flag("load_in_8bit", false);
  if (const Json* threshold = r.get("llm_int8_threshold");
      threshold != nullptr && !threshold->is_number_float()) {
    r.fail("llm_int8_threshold must be a float");
  }
  config.modules_to_not_convert =
      r.names("llm_int8_skip_modules", "llm_int8_skip_modules must be a list of strings");
  config.fp32_cpu_offload = r.flag("llm_int8_enable_fp32_cpu_offload", false);
  r.flag("llm_int8_has_fp16_weight", false);
  r.flag("bnb_4bit_use_double_quant", false);
  if (const Json* type = r.get("bnb_4bit_quant_type"); type != nullptr && !type->is_string()) {
    r.fail("bnb_4bit_quant_type must be a string");
  }
  if (const Json* storage = r.get("bnb_4bit_quant_storage"); storage != nullptr) {
    static const char* const kStorage[] = {"float16", "float32", "int8",
                                           "uint8",   "float64", "bfloat16"};
    const bool known = storage->is_string() &&
                       std::any_of(std::begin(kStorage), std::end(kStorage),
                                   [&](const char* s) { return storage->get<std::string>() == s; });
    if (!known) {
      r.fail(
          "`bnb_4bit_quant_storage` must be a valid string (one of 'float16', 'float32', 'int8', "
          "'uint8', 'float64', 'bfloat16') ");
    }
  }
  return config;
}

QuantizationConfig read_fp8(const Reader& r) {
  QuantizationConfig config;
  config.method = QuantMethod::kFp8;
  const std::string scheme = lower(r.text("activation_scheme", "dynamic"));
  if (scheme != "dynamic" && scheme != "static")
    r.fail("Activation scheme " + scheme + " not supported");
  config.static_activations = scheme == "static";
  const Json* block = r.get("weight_block_size");
  if (!r.has("weight_block_size")) {
    config.weight_block_size = std::array<int64_t, 2>{128, 128};
  } else if (block == nullptr) {
    config.weight_block_size.reset();
  } else {
    if (!block->is_array() || block->size() != 2)
      r.fail("weight_block_size must be a tuple of two integers");
    for (const Json& d : *block) {
      if (!d.is_number_integer()) r.fail("weight_block_size must be a tuple of two integers");
    }
    const int64_t rows = (*block)[0].get<int64_t>();
    const int64_t cols = (*block)[1].get<int64_t>();
    if (rows <= 0 || cols <= 0)
      r.fail("weight_block_size must be a tuple of two positive integers");
    config.weight_block_size = std::array<int64_t, 2>{rows, cols};
  }
  const std::string scale_fmt = r.text("scale_fmt", "float");
  if (scale_fmt != "float" && scale_fmt != "ue8m0") {
    r.fail("scale_fmt must be 'float' or 'ue8m0'; got " + repr(scale_fmt));
  }
  config.ue8m0_scales = scale_fmt == "ue8m0";
  const std::string expert_dtype = r.text("expert_dtype", "fp8");
  if (expert_dtype != "fp8" && expert_dtype != "fp4") {
    r.fail("expert_dtype must be 'fp8' or 'fp4'; got " + repr(expert_dtype));
  }
  if (expert_dtype == "fp4") {
    r.fail("expert_dtype 'fp4' (FP4-packed experts) is not planned here; planned: fp8 experts");
  }
  config.modules_to_not_convert =
      r.names("modules_to_not_convert", "modules_to_not_convert must be a list of strings");
  if (!config.modules_to_not_convert) {
    config.modules_to_not_convert =
        r.names("ignored_layers", "ignored_layers must be a list of strings");
  }
  if (r.get("modules_to_convert") != nullptr) {
    r.fail(
        "modules_to_convert (fp8 embeddings) is not planned here; planned: fp8 Linear layers and "
        "experts");
  }
  config.dequantize = r.flag("dequantize", false);
  return config;
}

// GPTQConfig.post_init's checks, and the GPT-QModel formats whose layout is the one sized here.
QuantizationConfig read_gptq(const Reader& r) {
  QuantizationConfig config;
  config.method = QuantMethod::kGptq;
  config.weight_block_size.reset();
  Gptq g;
  const Json* bits = r.get("bits");
  if (bits == nullptr)
    r.fail("GPTQConfig.__init__() missing 1 required positional argument: 'bits'");
  if (!bits->is_number_integer() || (bits->get<int>() != 2 && bits->get<int>() != 3 &&
                                     bits->get<int>() != 4 && bits->get<int>() != 8)) {
    r.fail("Only support quantization to [2,3,4,8] bits but found " + bits->dump());
  }
  g.bits = bits->get<int>();
  if (const Json* group = r.get("group_size")) {
    if (!group->is_number_integer() ||
        (group->get<int64_t>() <= 0 && group->get<int64_t>() != -1)) {
      r.fail("group_size must be greater than 0 or equal to -1");
    }
    g.group_size = group->get<int64_t>();
  }
  if (const Json* damp = r.get("damp_percent")) {
    if (!damp->is_number() || damp->get<double>() <= 0 || damp->get<double>() >= 1) {
      r.fail("damp_percent must between 0 and 1.");
    }
  }
  const std::string format = lower(r.text("checkpoint_format", r.text("format", "gptq")));
  if (format != "gptq" && format != "gptq_v2") {
    r.fail("format '" + format +
           "' is not planned here (GPT-QModel's other layouts); planned: gptq, gptq_v2");
  }
  if (const Json* block = r.get("block_name_to_quantize")) {
    if (!block->is_string()) r.fail("block_name_to_quantize must be a string");
    g.block_name_to_quantize = block->get<std::string>();
  }
  if (const Json* inner = r.get("modules_in_block_to_quantize")) {
    const char* message = "modules_in_block_to_quantize must be a list of lists of module names";
    if (!inner->is_array()) r.fail(message);
    std::vector<std::string> names;
    for (const Json& list : *inner) {
      if (!list.is_array()) r.fail(message);
      for (const Json& name : list) {
        if (!name.is_string()) r.fail(message);
        names.push_back(name.get<std::string>());
      }
    }
    g.modules_in_block_to_quantize = std::move(names);
  }
  config.gptq = g;
  return config;
}

// AwqConfig.post_init: the format (the legacy `version` key wins) and backend; bits and
// group_size are not checked there. The GEMM layout is the one sized here.
QuantizationConfig read_awq(const Reader& r) {
  QuantizationConfig config;
  config.method = QuantMethod::kAwq;
  config.weight_block_size.reset();
  Gptq g;
  if (const Json* bits = r.get("bits")) {
    if (!bits->is_number_integer()) r.fail("bits must be an integer");
    g.bits = bits->get<int>();
  }
  if (const Json* group = r.get("group_size")) {
    if (!group->is_number_integer()) r.fail("group_size must be an integer");
    g.group_size = group->get<int64_t>();
  }
  const std::string format = lower(r.text("version", r.text("format", "gemm")));
  if (format != "gemm" && format != "gemv" && format != "gemv_fast" && format != "llm-awq") {
    r.fail("Invalid format '" + format +
           "'. Must be one of: ['gemm', 'gemv', 'gemv_fast', 'llm-awq']");
  }
  if (format != "gemm") {
    r.fail("format '" + format +
           "' (GPT-QModel's GEMV layouts) is not planned here; planned: gemm");
  }
  static const char* const kBackends[] = {
      "autoawq",    "auto",       "auto_trainable", "machete",     "marlin",
      "exllama_v2", "exllama_v1", "gemm",           "gemm_triton", "gemv",
      "gemv_fast",  "torch_awq",  "torch_fused_awq"};
  const std::string backend = lower(r.text("backend", "auto"));
  if (std::find(std::begin(kBackends), std::end(kBackends), backend) == std::end(kBackends)) {
    r.fail("Invalid backend '" + backend +
           "'. Must be one of: ['autoawq', 'auto', 'auto_trainable', 'machete', 'marlin', "
           "'exllama_v2', 'exllama_v1', 'gemm', 'gemm_triton', 'gemv', 'gemv_fast', 'torch_awq', "
           "'torch_fused_awq']");
  }
  if (g.bits < 1 || g.bits > 8 || (g.group_size <= 0 && g.group_size != -1)) {
    r.fail("bits " + std::to_string(g.bits) + " with group_size " + std::to_string(g.group_size) +
           ": GPT-QModel's AWQ kernels take 1 to 8 bits and a positive group_size or -1");
  }
  config.modules_to_not_convert =
      r.names("modules_to_not_convert", "modules_to_not_convert must be a list of strings");
  config.gptq = g;
  return config;
}

// Mxfp4Config: a skip list and dequantize, nothing checked.
QuantizationConfig read_mxfp4(const Reader& r) {
  QuantizationConfig config;
  config.method = QuantMethod::kMxfp4;
  config.weight_block_size.reset();
  config.modules_to_not_convert =
      r.names("modules_to_not_convert", "modules_to_not_convert must be a list of strings");
  config.dequantize = r.flag("dequantize", false);
  return config;
}

}  // namespace

std::optional<QuantizationConfig> read_quantization_config(const Json& quantization,
                                                           const std::string& method,
                                                           const std::string& what) {
  const Reader r(quantization, what);
  std::optional<QuantizationConfig> config;
  if (method == "bitsandbytes_4bit") config = read_bitsandbytes(r, QuantMethod::kBitsAndBytes4bit);
  if (method == "bitsandbytes_8bit") config = read_bitsandbytes(r, QuantMethod::kBitsAndBytes8bit);
  if (method == "fp8") config = read_fp8(r);
  if (method == "compressed-tensors") config = read_compressed_tensors(quantization, what);
  if (method == "gptq") config = read_gptq(r);
  if (method == "awq") config = read_awq(r);
  if (method == "mxfp4") config = read_mxfp4(r);
  if (config) config->pre_quantized = true;
  return config;
}

}  // namespace model_detail

void quantize_on_load(ModelDescription& model, const QuantizationConfig& from_args,
                      std::vector<std::string>& warnings) {
  if (!model.quantization) {
    model.quantization = from_args;
    return;
  }
  auto class_of = [](QuantMethod m) {
    switch (m) {
      case QuantMethod::kFp8:
        return "FineGrainedFP8Config";
      case QuantMethod::kCompressedTensors:
        return "CompressedTensorsConfig";
      case QuantMethod::kGptq:
        return "GPTQConfig";
      case QuantMethod::kAwq:
        return "AwqConfig";
      case QuantMethod::kMxfp4:
        return "Mxfp4Config";
      default:
        return "BitsAndBytesConfig";
    }
  };
  QuantizationConfig& own = *model.quantization;
  if (std::string(class_of(own.method)) != class_of(from_args.method)) {
    throw InvalidArgument(std::string("The model is quantized with ") + class_of(own.method) +
                          " but you are passing a " + class_of(from_args.method) +
                          " config. Please make sure to pass the same quantization config class "
                          "to `from_pretrained` with different loading attributes.");
  }
  if (own.method == QuantMethod::kFp8) {
    // FineGrainedFP8Config's loading attributes come from the arguments, without a warning.
    own.dequantize = from_args.dequantize;
    own.modules_to_not_convert = from_args.modules_to_not_convert;
    return;
  }
  warnings.push_back(
      "You passed `quantization_config` or equivalent parameters to `from_pretrained` but the "
      "model you're loading already has a `quantization_config` attribute. The "
      "`quantization_config` from the model will be used.");
}

}  // namespace backplane
