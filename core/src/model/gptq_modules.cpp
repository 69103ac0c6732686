// GPTQ on the meta model, as optimum 2.3's GPTQQuantizer.convert_model replaces layers for a
// pre-quantized checkpoint (gptq/utils.py get_layers, get_block_name_with_pattern) and GPT-QModel
// 7.7's QuantLinear registers its tensors. Every class GPT-QModel may pick (Torch, TorchAten,
// Marlin, Machete, ...) holds the same bytes; this is the layout of its torch kernel.
#include <backplane/error.hpp>

#include <algorithm>

#include "quantized_modules.hpp"

namespace backplane::quantization {
namespace {

// optimum's BLOCK_PATTERNS, in its order.
const char* const kBlockPatterns[] = {"transformer.h",
                                      "model.decoder.layers",
                                      "gpt_neox.layers",
                                      "model.layers",
                                      "model.language_model.layers",
                                      "h",
                                      "decoder.layers",
                                      "layers"};

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.compare(0, prefix.size(), prefix) == 0;
}

struct Replacer {
  const Gptq& config;
  const std::string& prefix;
  int64_t replaced = 0;

  // get_layers: an exact nn.Linear or a Conv1D under the prefix is taken whole; other modules
  // are walked into.
  void visit(Module& module, const std::string& name) {
    const bool layer = module.class_name == "Linear" || module.class_name == "Conv1D";
    if (layer && starts_with(name, prefix)) {
      if (!config.modules_in_block_to_quantize ||
          std::any_of(config.modules_in_block_to_quantize->begin(),
                      config.modules_in_block_to_quantize->end(),
                      [&](const std::string& kept) { return ends_with(name, kept); })) {
        replace(module, name);
      }
      return;
    }
    if (module.class_name == "Conv2d" && starts_with(name, prefix)) {
      throw InvalidArgument("gptq: " + name +
                            " is an nn.Conv2d, whose QuantLinear is not planned here");
    }
    for (Module& child : module.children) {
      visit(child, name.empty() ? child.name : name + "." + child.name);
    }
  }

  void replace(Module& module, const std::string& name) {
    const TensorInfo* weight = nullptr;
    bool bias = false;
    for (const TensorInfo& t : module.tensors) {
      if (t.name == "weight" && t.shape.size() == 2) weight = &t;
      if (t.name == "bias") bias = true;
    }
    if (weight == nullptr) {
      throw InvalidArgument("gptq: " + name + " (" + module.class_name +
                            ") has no 2-dimensional weight to size its QuantLinear from");
    }
    // Conv1D stores its weight (in, out).
    const bool conv1d = module.class_name == "Conv1D";
    const int64_t out = conv1d ? weight->shape[1] : weight->shape[0];
    const int64_t in = conv1d ? weight->shape[0] : weight->shape[1];
    const int64_t group = config.group_size == -1 ? in : config.group_size;
    const int64_t b = config.bits;
    std::vector<TensorInfo> tensors = {
        own_dtype_tensor("qweight", {ceil_div(in * b, 32), out}, DType::kInt32),
        own_dtype_tensor("qzeros", {ceil_div(in, group), ceil_div(out * b, 32)}, DType::kInt32),
        own_dtype_tensor("scales", {ceil_div(in, group), out}, DType::kFloat16),
        own_dtype_tensor("g_idx", {in}, DType::kInt32),
    };
    if (bias) tensors.push_back(own_dtype_tensor("bias", {out}, DType::kFloat16));
    module.tensors = std::move(tensors);
    module.class_name = "QuantLinear";
    ++replaced;
  }
};

}  // namespace

int64_t apply_gptq(ModelDescription& model, const Gptq& config) {
  std::string prefix;
  if (config.block_name_to_quantize) {
    prefix = *config.block_name_to_quantize;
  } else {
    const std::vector<NamedModule> modules = named_modules(model.root);
    for (const char* pattern : kBlockPatterns) {
      const bool found = std::any_of(modules.begin(), modules.end(), [&](const NamedModule& m) {
        return starts_with(m.name, pattern);
      });
      if (found) {
        prefix = pattern;
        break;
      }
    }
    if (prefix.empty()) {
      throw InvalidArgument(
          "gptq: Block pattern could not be match. Pass `block_name_to_quantize` argument in "
          "`quantize_model`");
    }
  }
  Replacer replacer{config, prefix};
  replacer.visit(model.root, "");
  return replacer.replaced;
}

}  // namespace backplane::quantization
