// Quantized placement: what from_pretrained does to a model's modules and budgets when it loads it
// with a quantizer (transformers 5.24; docs/quantized-placement-rules.md holds the reading notes
// and tests/python/quantized_plan_check.py the differential test against transformers itself).
//
// The flow, as from_pretrained runs it: the quantizer's environment check (which may refuse, or
// turn quantization into dequantization), then the module swap on the model (preprocess_model:
// nn.Linear -> Linear4bit / Linear8bitLt / FP8Linear, experts -> FP8Experts), then planning with
// the quantizer's element sizes and max_memory factor, then the check again on the map.
// plan_device_map runs all of it for a ModelDescription whose `quantization` is set.
#pragma once

#include <backplane/export.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane {

// The methods planned here, by transformers' quant_method names ("bitsandbytes_4bit",
// "bitsandbytes_8bit", "fp8", "compressed-tensors", "gptq", "awq", "mxfp4"). Others transformers
// knows (hqq, torchao, ...) are refused by name where a config carries them.
enum class QuantMethod {
  kBitsAndBytes4bit,
  kBitsAndBytes8bit,
  kFp8,
  kCompressedTensors,
  kGptq,
  kAwq,
  kMxfp4,
};

BACKPLANE_API const char* to_string(QuantMethod method);

// compressed-tensors' QuantizationArgs: how one of a module's weight, input or output is
// quantized (compressed-tensors 0.20's quant_args.py).
struct CompressedArgs {
  int num_bits = 8;
  bool is_float = false;  // type "float" (else "int")
  bool symmetric = true;
  std::string strategy;                    // tensor, channel, group, block, tensor_group, token
  int64_t group_size = 0;                  // group, tensor_group
  std::array<int64_t, 2> block{0, 0};      // block: rows, columns
  bool dynamic = false;                    // dynamic=True: nothing stored
  bool dynamic_local = false;              // dynamic="local": a global scale only
  std::optional<std::string> scale_dtype;  // as given ("float8_e4m3fn", "uint8")
  std::string zp_dtype;                    // resolved: int8, int16, int32, float8_e4m3fn
};

// One config group: which modules (targets) and how.
struct CompressedScheme {
  std::string name;
  std::vector<std::string> targets;
  std::optional<CompressedArgs> weights;
  std::optional<CompressedArgs> input_activations;
  std::optional<CompressedArgs> output_activations;
  std::optional<std::string> format;  // a per-group format; else inferred per module
};

// CompressedTensorsConfig: the groups, what they leave out, and whether the checkpoint holds the
// compressed tensors (quantization_status "compressed") or dense weights with their qparams.
struct CompressedTensors {
  std::vector<CompressedScheme> groups;  // in the config's order
  std::vector<std::string> ignore;
  bool compressed = false;        // quantization_status "compressed": the compressors' tensors
  bool force_zero_point = false;  // before compression: zero points even where symmetric
};

// GPTQConfig of a pre-quantized checkpoint: which layers optimum's convert_model replaces with
// GPT-QModel's QuantLinear, and their packing.
// (AwqConfig shares bits and group_size: its GEMM layout.)
struct Gptq {
  int bits = 4;
  int64_t group_size = 128;  // -1: one group per input column set (in_features)
  std::optional<std::string> block_name_to_quantize;
  std::optional<std::vector<std::string>> modules_in_block_to_quantize;  // flattened
};

// The part of a quantization_config (BitsAndBytesConfig, FineGrainedFP8Config,
// CompressedTensorsConfig, GPTQConfig) that changes where and how large modules are.
struct QuantizationConfig {
  QuantMethod method = QuantMethod::kBitsAndBytes4bit;
  // A checkpoint that is already quantized (its config.json carries the config), as opposed to
  // from_pretrained(quantization_config=...) on full-precision weights.
  bool pre_quantized = false;
  // llm_int8_skip_modules (bitsandbytes) / modules_to_not_convert (fp8, awq): given, they replace
  // the default skips (tied weights, the last parameter's module, the output embeddings); awq adds
  // them to the defaults.
  std::optional<std::vector<std::string>> modules_to_not_convert;
  // bitsandbytes' llm_int8_enable_fp32_cpu_offload: modules a given map puts on cpu or disk stay
  // unquantized, and a map with cpu or disk entries is accepted.
  bool fp32_cpu_offload = false;
  // fp8: the scales' block (rows, columns); nullopt = one scale per tensor.
  std::optional<std::array<int64_t, 2>> weight_block_size = std::array<int64_t, 2>{128, 128};
  bool static_activations = false;  // activation_scheme "static": an activation scale per layer
  bool ue8m0_scales = false;        // scale_fmt "ue8m0": scales in float8_e8m0fnu, 1 byte
  // fp8: load dequantized (no FP8 modules at all); set by the environment check where fp8 cannot
  // run (no GPU, compute capability under 8.9) for a pre-quantized checkpoint. compressed-tensors:
  // dequantize=True or run_compressed=False, the dense model.
  bool dequantize = false;
  std::optional<CompressedTensors> compressed_tensors;  // kCompressedTensors
  std::optional<Gptq> gptq;                             // kGptq
};

// hwprobe plan --quantize: "bnb-4bit", "bnb-8bit", "fp8" (also transformers' own names
// "bitsandbytes_4bit", "bitsandbytes_8bit"): the default BitsAndBytesConfig(load_in_4bit=True),
// BitsAndBytesConfig(load_in_8bit=True) or FineGrainedFP8Config() of
// from_pretrained(quantization_config=...). Throws InvalidArgument naming `source` and the
// accepted values.
BACKPLANE_API QuantizationConfig parse_quantize_option(std::string_view text,
                                                       std::string_view source = "--quantize");

}  // namespace backplane
