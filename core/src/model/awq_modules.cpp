// AWQ on the meta model, as transformers 5.24's replace_with_awq_linear and
// replace_quantization_scales leave it: every nn.Linear (subclasses too) outside the skip list
// becomes GPT-QModel 7.7's AWQ QuantLinear in its GEMM layout (the bytes of every class it may
// pick for format "gemm"), and the activations of a few architectures get their scales.
#include <backplane/error.hpp>

#include "quantization_reader.hpp"
#include "quantized_modules.hpp"

namespace backplane::quantization {
namespace {

bool linear_class(const std::string& class_name) {
  for (const auto& c : model_detail::quantization_rules().at("linear_classes")) {
    if (c.get<std::string>() == class_name) return true;
  }
  return false;
}

// AWQ_SCALES_MAPPINGS: the activation a ScaledActivation wraps, and the layer whose out_features
// sizes its scales.
struct ScaledAct {
  const char* model_type;
  const char* act;
  const char* layer_before_act;
};
constexpr ScaledAct kScaledActivations[] = {
    {"starcoder2", "act", "c_fc"},      {"RefinedWebModel", "act", "dense_h_to_4h"},
    {"falcon", "act", "dense_h_to_4h"}, {"mpt", "act", "up_proj"},
    {"gptj", "act", "fc_in"},           {"gpt_neox", "act", "dense_h_to_4h"},
    {"gpt_bigcode", "act", "c_fc"},     {"bloom", "gelu_impl", "dense_h_to_4h"},
};

int64_t out_features(const Module& layer) {
  for (const TensorInfo& t : layer.tensors) {
    if (t.name == "weight" && t.shape.size() == 2) return t.shape[0];
  }
  // Already an AWQ QuantLinear: scales are (groups, out).
  for (const TensorInfo& t : layer.tensors) {
    if (t.name == "scales" && t.shape.size() == 2) return t.shape[1];
  }
  return 0;
}

void scale_activations(Module& module, const ScaledAct& mapping, DType dtype) {
  const Module* before = nullptr;
  for (const Module& child : module.children) {
    if (child.name == mapping.layer_before_act) before = &child;
  }
  for (Module& child : module.children) {
    if (before != nullptr && child.name == mapping.act) {
      child.tensors.push_back(own_dtype_tensor("scales", {out_features(*before)}, dtype));
      child.class_name = "ScaledActivation";
    }
    scale_activations(child, mapping, dtype);
  }
}

}  // namespace

bool swap_awq(Module& module, const Gptq& config) {
  if (!linear_class(module.class_name)) return false;
  const TensorInfo* weight = nullptr;
  bool bias = false;
  for (const TensorInfo& t : module.tensors) {
    if (t.name == "weight" && t.shape.size() == 2) weight = &t;
    if (t.name == "bias") bias = true;
  }
  if (weight == nullptr) return false;
  const int64_t out = weight->shape[0];
  const int64_t in = weight->shape[1];
  const int64_t group = config.group_size == -1 ? in : config.group_size;
  const int64_t packed = ceil_div(out * config.bits, 32);
  std::vector<TensorInfo> tensors = {
      own_dtype_tensor("qweight", {in, packed}, DType::kInt32),
      own_dtype_tensor("qzeros", {ceil_div(in, group), packed}, DType::kInt32),
      own_dtype_tensor("scales", {ceil_div(in, group), out}, DType::kFloat16),
  };
  if (bias) tensors.push_back(own_dtype_tensor("bias", {out}, DType::kFloat16));
  module.tensors = std::move(tensors);
  module.class_name = "AwqQuantLinear";
  return true;
}

void add_awq_activation_scales(ModelDescription& model, DType dtype) {
  for (const ScaledAct& mapping : kScaledActivations) {
    if (model.model_type == mapping.model_type) scale_activations(model.root, mapping, dtype);
  }
}

}  // namespace backplane::quantization
