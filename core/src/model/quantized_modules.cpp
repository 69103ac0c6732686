// The quantizers' module swap on the meta model, as transformers 5.24 does it before planning.
#include "quantized_modules.hpp"

#include <backplane/error.hpp>

#include <algorithm>
#include <regex>
#include <set>
#include <unordered_set>

namespace backplane::quantization {
namespace {

std::string join(const std::string& parent, const std::string& local) {
  return parent.empty() ? local : parent + "." + local;
}

std::string strip_weight(const std::string& name) {
  return ends_with(name, ".weight") ? name.substr(0, name.size() - 7) : name;
}

// The last name named_parameters() yields on the model from_pretrained builds (weights not tied:
// a tied target is a parameter of its own module there).
std::string last_parameter(const ModelDescription& model) {
  std::unordered_set<std::string> tied;
  for (const auto& group : model.tied_parameters) tied.insert(group.begin(), group.end());
  std::string last;
  for (const NamedModule& m : named_modules(model.root)) {
    std::unordered_set<std::string> listed;
    for (const TensorInfo& t : m.module->tensors) {
      listed.insert(t.name);
      if (!t.buffer) last = join(m.name, t.name);
    }
    for (const auto& group : model.tied_parameters) {
      for (const std::string& name : group) {
        const size_t dot = name.rfind('.');
        const std::string parent = dot == std::string::npos ? "" : name.substr(0, dot);
        if (parent == m.name && listed.count(name.substr(dot + 1)) == 0) last = name;
      }
    }
  }
  return last;
}

// get_output_embeddings(): the causal-LM head, under the names transformers' models give it.
std::vector<std::string> output_embeddings(const ModelDescription& model) {
  for (const char* name : {"lm_head", "embed_out", "output"}) {
    if (const Module* m = find_module(model.root, name);
        m != nullptr && m->class_name == "Linear") {
      return {name};
    }
  }
  return {};
}

void retype(Module& module, DType dtype) {
  for (TensorInfo& t : module.tensors) {
    if (!t.buffer && !t.explicit_dtype && is_floating_point(t.dtype)) t.dtype = dtype;
  }
  for (Module& child : module.children) retype(child, dtype);
}

const TensorInfo* find_tensor(const Module& module, const std::string& name) {
  for (const TensorInfo& t : module.tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// bitsandbytes: exactly nn.Linear, or Conv1D (whose weight is (in, out)), becomes Linear4bit or
// Linear8bitLt with an (out, in) weight in the main dtype; the planner counts it at 4 or 8 bits.
bool swap_bnb(Module& module, int bits, bool& odd) {
  const bool conv1d = module.class_name == "Conv1D";
  if (module.class_name != "Linear" && !conv1d) return false;
  for (TensorInfo& t : module.tensors) {
    if (t.name != "weight") continue;
    if (conv1d && t.shape.size() == 2) std::swap(t.shape[0], t.shape[1]);
    t.quantized_bits = bits;
    odd = odd || (bits == 4 && t.numel() % 2 != 0);
  }
  module.class_name = bits == 4 ? "Linear4bit" : "Linear8bitLt";
  return true;
}

// FP8Linear's tensors: weight (out, in) float8_e4m3fn, weight_scale_inv (one per block, or a
// scalar) float32, activation_scale with static activations, then the bias in the main dtype.
// On the fly, every one but the bias counts one byte an element.
void add_fp8_tensor(std::vector<TensorInfo>& out, TensorInfo t, bool on_the_fly) {
  if (on_the_fly) t.quantized_bits = 8;
  out.push_back(std::move(t));
}

// weight_scale_inv: float32, or one byte a block with ue8m0 scales (float8_e8m0fnu); a scalar
// (no block size) stays float32.
DType scale_dtype(const QuantizationConfig& config) {
  return config.ue8m0_scales && config.weight_block_size ? DType::kFloat8E8M0 : DType::kFloat32;
}

std::vector<int64_t> scale_shape(const QuantizationConfig& config, int64_t rows, int64_t cols) {
  if (!config.weight_block_size) return {};
  return {ceil_div(rows, (*config.weight_block_size)[0]),
          ceil_div(cols, (*config.weight_block_size)[1])};
}

bool swap_fp8_linear(Module& module, const QuantizationConfig& config) {
  if (module.class_name != "Linear") return false;
  const TensorInfo* weight = find_tensor(module, "weight");
  if (weight == nullptr || weight->shape.size() != 2) return false;
  const int64_t rows = weight->shape[0];
  const int64_t cols = weight->shape[1];
  const TensorInfo* bias = find_tensor(module, "bias");
  const bool on_the_fly = !config.pre_quantized;
  std::vector<TensorInfo> tensors;
  add_fp8_tensor(tensors, own_dtype_tensor("weight", {rows, cols}, DType::kFloat8E4M3), on_the_fly);
  add_fp8_tensor(
      tensors,
      own_dtype_tensor("weight_scale_inv", scale_shape(config, rows, cols), scale_dtype(config)),
      on_the_fly);
  if (config.static_activations) {
    add_fp8_tensor(tensors, own_dtype_tensor("activation_scale", {}, DType::kFloat32), on_the_fly);
  }
  if (bias != nullptr) {
    TensorInfo b = *bias;
    tensors.push_back(std::move(b));
  }
  module.tensors = std::move(tensors);
  module.class_name = "FP8Linear";
  return true;
}

// FP8Experts (a module named *.experts, whatever its class): gate_up_proj (E, 2I, H) or up_proj
// (E, I, H), then down_proj (E, H, I), each with a float32 scale per block (the fused gate_up
// keeps at least 2 scale rows); experts' biases are dropped. E, I and H come from the module's
// own projections and hidden_size, whichever way round the architecture stores them.
bool swap_fp8_experts(Module& module, const QuantizationConfig& config, const ModelDescription& m) {
  const TensorInfo* down = find_tensor(module, "down_proj");
  const auto hidden = m.hyperparameters.find("hidden_size");
  if (down == nullptr || down->shape.size() != 3 || hidden == m.hyperparameters.end()) {
    throw InvalidArgument("fp8: the experts module of class " + module.class_name +
                          " has no 3-dimensional down_proj (or the model no hidden_size): its "
                          "FP8Experts replacement cannot be sized");
  }
  const int64_t experts = down->shape[0];
  const int64_t h = hidden->second;
  const int64_t i = down->shape[1] == h ? down->shape[2] : down->shape[1];
  const bool gate = find_tensor(module, "gate_up_proj") != nullptr;
  const bool on_the_fly = !config.pre_quantized;
  auto scale = [&](int64_t out, int64_t in, int64_t min_out) -> std::vector<int64_t> {
    const int64_t rows =
        config.weight_block_size ? ceil_div(out, (*config.weight_block_size)[0]) : 1;
    const int64_t cols =
        config.weight_block_size ? ceil_div(in, (*config.weight_block_size)[1]) : 1;
    return {experts, std::max(rows, min_out), cols};
  };
  std::vector<TensorInfo> tensors;
  const std::string first = gate ? "gate_up_proj" : "up_proj";
  const int64_t first_out = gate ? 2 * i : i;
  add_fp8_tensor(tensors, own_dtype_tensor(first, {experts, first_out, h}, DType::kFloat8E4M3),
                 on_the_fly);
  add_fp8_tensor(tensors,
                 own_dtype_tensor(first + "_scale_inv", scale(first_out, h, gate ? 2 : 1),
                                  scale_dtype(config)),
                 on_the_fly);
  add_fp8_tensor(tensors, own_dtype_tensor("down_proj", {experts, h, i}, DType::kFloat8E4M3),
                 on_the_fly);
  add_fp8_tensor(tensors,
                 own_dtype_tensor("down_proj_scale_inv", scale(h, i, 1), scale_dtype(config)),
                 on_the_fly);
  if (config.static_activations) {
    add_fp8_tensor(tensors,
                   own_dtype_tensor("gate_up_proj_activation_scale", {experts}, DType::kFloat32),
                   on_the_fly);
    add_fp8_tensor(tensors,
                   own_dtype_tensor("down_proj_activation_scale", {experts}, DType::kFloat32),
                   on_the_fly);
  }
  module.tensors = std::move(tensors);
  module.children.clear();
  module.class_name = "FP8Experts";
  return true;
}

// Mxfp4GptOssExperts: the experts of a GptOssMLP as packed FP4 bytes (two a byte) and float32
// biases; the checkpoint's scales have no tensor on the meta model.
bool swap_mxfp4_experts(Module& mlp) {
  if (mlp.class_name != "GptOssMLP") return false;
  for (Module& child : mlp.children) {
    if (child.name != "experts") continue;
    // The dense GptOssExperts: gate_up_proj (E, H, 2I), down_proj (E, I, H).
    const TensorInfo* gate_up = find_tensor(child, "gate_up_proj");
    const TensorInfo* down = find_tensor(child, "down_proj");
    if (gate_up == nullptr || down == nullptr || gate_up->shape.size() != 3 ||
        down->shape.size() != 3) {
      throw InvalidArgument("mxfp4: the experts of class " + child.class_name +
                            " have no 3-dimensional gate_up_proj and down_proj to size "
                            "Mxfp4GptOssExperts from");
    }
    const int64_t e = gate_up->shape[0];
    const int64_t h = gate_up->shape[1];
    const int64_t i = down->shape[1];
    child.tensors = {own_dtype_tensor("gate_up_proj", {e, 2 * i, h / 2}, DType::kUInt8),
                     own_dtype_tensor("gate_up_proj_bias", {e, 2 * i}, DType::kFloat32),
                     own_dtype_tensor("down_proj", {e, h, i / 2}, DType::kUInt8),
                     own_dtype_tensor("down_proj_bias", {e, h}, DType::kFloat32)};
    child.children.clear();
    child.class_name = "Mxfp4GptOssExperts";
    mlp.class_name = "Mxfp4GptOssMLP";
    return true;
  }
  return false;
}

struct Swapper {
  const ModelDescription& model;
  const QuantizationConfig& config;
  const std::vector<std::string>& skip;
  SwappedModel& out;

  void visit(Module& module, const std::string& name) {
    // MXFP4 asks about "<mlp>.experts" and swaps the whole MLP.
    const std::string asked = config.method == QuantMethod::kMxfp4 ? name + ".experts" : name;
    if (!name.empty() && should_convert_module(asked, skip) && swap(module, name)) ++out.replaced;
    for (Module& child : module.children) visit(child, join(name, child.name));
  }

  bool swap(Module& module, const std::string& name) {
    switch (config.method) {
      case QuantMethod::kBitsAndBytes4bit:
        return swap_bnb(module, 4, out.half_bytes_rounded);
      case QuantMethod::kBitsAndBytes8bit:
        return swap_bnb(module, 8, out.half_bytes_rounded);
      case QuantMethod::kFp8:
        if (ends_with(name, ".experts")) return swap_fp8_experts(module, config, model);
        return swap_fp8_linear(module, config);
      case QuantMethod::kAwq:
        return swap_awq(module, *config.gptq);
      case QuantMethod::kMxfp4:
        return swap_mxfp4_experts(module);
      case QuantMethod::kCompressedTensors:
      case QuantMethod::kGptq:
        return false;  // apply_compressed_tensors, apply_gptq: on the whole model
    }
    return false;
  }
};

}  // namespace

bool should_convert_module(const std::string& name, const std::vector<std::string>& patterns) {
  for (const std::string& pattern : patterns) {
    if (ends_with(name, pattern)) return false;
    std::regex re;
    try {
      re = std::regex(pattern, std::regex::ECMAScript);
    } catch (const std::regex_error&) {
      throw InvalidArgument("modules_to_not_convert: '" + pattern +
                            "' is not a regular expression this planner can read; give module "
                            "names or simple patterns (layers.*.mlp)");
    }
    // Python's re.match(f"(?:{key})(?:(?<=\\.)|(?=\\.|$))"): some prefix the pattern matches whole
    // ends at the end of the name, before a dot, or with a dot.
    for (size_t end = 0; end <= name.size(); ++end) {
      const bool boundary =
          end == name.size() || name[end] == '.' || (end > 0 && name[end - 1] == '.');
      if (boundary && std::regex_match(name.begin(), name.begin() + static_cast<long>(end), re)) {
        return false;
      }
    }
  }
  return true;
}

std::vector<std::string> default_skips(const ModelDescription& model) {
  std::set<std::string> out;
  for (const auto& [target, source] : model.tied_weights_keys) {
    out.insert(strip_weight(target));
    out.insert(strip_weight(source));
  }
  if (model.tied_weights_keys.empty()) {
    for (const auto& group : model.tied_parameters) {
      for (const std::string& name : group) out.insert(strip_weight(name));
    }
  }
  const std::string last = last_parameter(model);
  if (!last.empty()) out.insert(strip_weight(last));
  for (const std::string& name : output_embeddings(model)) out.insert(name);
  return {out.begin(), out.end()};
}

std::vector<std::string> modules_to_not_convert(const ModelDescription& model,
                                                const QuantizationConfig& config,
                                                const std::vector<std::string>& offloaded) {
  std::set<std::string> out;
  // AWQ adds the defaults whatever it is given (add_default_skips=True).
  if (!config.modules_to_not_convert || config.method == QuantMethod::kAwq) {
    for (const std::string& name : default_skips(model)) out.insert(name);
  }
  if (config.modules_to_not_convert) {
    out.insert(config.modules_to_not_convert->begin(), config.modules_to_not_convert->end());
  }
  out.insert(model.keep_in_fp32_modules.begin(), model.keep_in_fp32_modules.end());
  out.insert(offloaded.begin(), offloaded.end());
  return {out.begin(), out.end()};
}

SwappedModel swap_quantized_modules(const ModelDescription& model, const QuantizationConfig& config,
                                    DType dtype, const std::vector<std::string>& offloaded) {
  SwappedModel out;
  out.model = model;
  out.model.dtype = dtype;
  retype(out.model.root, dtype);
  if (config.method == QuantMethod::kCompressedTensors) {
    // Its own targets and ignore list decide; transformers' skip list is not used.
    out.replaced_with = "compressed-tensors";
    if (!config.dequantize && config.compressed_tensors) {
      out.replaced = apply_compressed_tensors(out.model, *config.compressed_tensors, dtype);
    }
    return out;
  }
  if (config.method == QuantMethod::kGptq) {
    // optimum's block prefix decides; there is no skip list.
    out.replaced_with = "QuantLinear";
    out.replaced = apply_gptq(out.model, *config.gptq);
    return out;
  }
  out.not_converted = modules_to_not_convert(model, config, offloaded);
  switch (config.method) {
    case QuantMethod::kBitsAndBytes4bit:
      out.replaced_with = "Linear4bit";
      break;
    case QuantMethod::kBitsAndBytes8bit:
      out.replaced_with = "Linear8bitLt";
      break;
    case QuantMethod::kFp8:
      out.replaced_with = "FP8Linear";
      break;
    case QuantMethod::kAwq:
      out.replaced_with = "AwqQuantLinear";
      break;
    case QuantMethod::kMxfp4:
      out.replaced_with = "Mxfp4GptOssMLP";
      break;
    case QuantMethod::kCompressedTensors:
    case QuantMethod::kGptq:
      break;
  }
  if ((config.method == QuantMethod::kFp8 || config.method == QuantMethod::kMxfp4) &&
      config.dequantize) {
    return out;
  }
  Swapper{model, config, out.not_converted, out}.visit(out.model.root, "");
  if (config.method == QuantMethod::kAwq) {
    if (out.replaced == 0) {  // replace_with_awq_linear's own failure
      throw InvalidArgument(
          "awq: cannot access local variable 'has_been_replaced' where it is not associated with "
          "a value (transformers' UnboundLocalError: the model has no nn.Linear to quantize)");
    }
    add_awq_activation_scales(out.model, dtype);
  }
  return out;
}

}  // namespace backplane::quantization
