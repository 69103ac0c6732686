// The module swap a quantizer's preprocess_model does on the meta model before planning
// (transformers 5.24: integrations/bitsandbytes.py replace_with_bnb_linear,
// integrations/finegrained_fp8.py replace_with_fp8_linear), and the skip list it swaps around
// (quantizers/base.py get_modules_to_not_convert). Owned by the planner, which sizes the result.
#pragma once

#include <backplane/model/model.hpp>

#include <string>
#include <vector>

namespace backplane::quantization {

// A quantizer's tensor: its dtype is its own, whatever the model's dtype.
inline TensorInfo own_dtype_tensor(std::string name, std::vector<int64_t> shape, DType dtype) {
  TensorInfo t;
  t.name = std::move(name);
  t.shape = std::move(shape);
  t.dtype = dtype;
  t.explicit_dtype = true;
  return t;
}

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

inline bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() >= suffix.size() &&
         text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// should_convert_module: false when a pattern, as a regex from the start, matches up to a module
// boundary ("layers.1" skips "layers.1.mlp", not "layers.11.mlp"), or the name ends with it.
// Throws InvalidArgument naming a pattern that is not a valid regular expression.
bool should_convert_module(const std::string& name, const std::vector<std::string>& patterns);

// get_keys_to_not_convert: the tied weights (both names), the last parameter's name and the
// output embeddings (lm_head), with ".weight" stripped.
std::vector<std::string> default_skips(const ModelDescription& model);

// The quantizer's modules_to_not_convert: the defaults unless the config gives a list, then that
// list, the class's _keep_in_fp32_modules and `offloaded` (bitsandbytes with fp32 cpu offload:
// the modules a given map puts on cpu or disk). Sorted, without repeats.
std::vector<std::string> modules_to_not_convert(const ModelDescription& model,
                                                const QuantizationConfig& config,
                                                const std::vector<std::string>& offloaded);

// compressed-tensors' apply_quantization_config and compress_model on `model` (parameters already
// in `dtype`): the qparams and compressed tensors of every targeted Linear or Embedding. Returns
// how many modules it quantized; throws InvalidArgument where compressed-tensors raises, or where
// this planner does not model what it does (a tied weight, Llama 4's experts).
int64_t apply_compressed_tensors(ModelDescription& model, const CompressedTensors& ct, DType dtype);

// GPTQ's convert_model on `model`: every exact nn.Linear or Conv1D under the block prefix (or
// block_name_to_quantize), filtered by modules_in_block_to_quantize, becomes a QuantLinear with
// GPT-QModel's packed tensors. Returns how many; throws InvalidArgument where optimum raises.
int64_t apply_gptq(ModelDescription& model, const Gptq& config);

// AWQ: `module` (an nn.Linear or subclass) as GPT-QModel's AWQ QuantLinear in the GEMM layout;
// false for other modules.
bool swap_awq(Module& module, const Gptq& config);
// replace_quantization_scales: the ScaledActivation scales of the architectures that have them.
void add_awq_activation_scales(ModelDescription& model, DType dtype);

struct SwappedModel {
  ModelDescription model;     // the quantized meta model, parameters in the main dtype
  int64_t replaced = 0;       // modules swapped
  std::string replaced_with;  // "Linear4bit", "Linear8bitLt", "FP8Linear"
  std::vector<std::string> not_converted;
  bool half_bytes_rounded = false;  // a 4-bit weight of odd numel: its size rounded up
};

// `model` with its modules swapped as preprocess_model swaps them for `config` (a dequantizing
// fp8 config swaps none), parameters retyped to `dtype` as from_pretrained builds them.
SwappedModel swap_quantized_modules(const ModelDescription& model, const QuantizationConfig& config,
                                    DType dtype, const std::vector<std::string>& offloaded);

}  // namespace backplane::quantization
