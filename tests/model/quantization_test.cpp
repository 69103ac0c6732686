// quantization_config as from_pretrained reads it (BitsAndBytesConfig, FineGrainedFP8Config), the
// --quantize shorthands, and from_pretrained's merge of a checkpoint's config with a passed one.
// Messages are transformers 5.24's own (utils/quantization_config.py, quantizers/auto.py).
#include <backplane/error.hpp>
#include <backplane/model/model.hpp>
#include <backplane/model/quantization.hpp>

#include <gtest/gtest.h>

#include <array>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace {

using backplane::QuantizationConfig;
using backplane::QuantMethod;

std::string llama_with(const std::string& quantization_config) {
  return R"({"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 64,
             "intermediate_size": 128, "num_attention_heads": 4, "vocab_size": 100,
             "quantization_config": )" +
         quantization_config + "}";
}

struct Read {
  std::string label;
  std::string quantization_config;
  QuantMethod method;
  bool fp32_cpu_offload;
  std::optional<std::vector<std::string>> skips;
  std::optional<std::array<int64_t, 2>> block;
  bool static_activations;
  bool ue8m0;
};

std::ostream& operator<<(std::ostream& os, const Read& r) {
  return os << r.label;
}

class ReadsQuantizationConfig : public ::testing::TestWithParam<Read> {};

TEST_P(ReadsQuantizationConfig, AsTheConfigClassDoes) {
  const Read& r = GetParam();
  const backplane::ModelDescription model =
      backplane::model_from_config_json(llama_with(r.quantization_config));
  ASSERT_TRUE(model.quantization.has_value());
  const QuantizationConfig& q = *model.quantization;
  EXPECT_EQ(q.method, r.method);
  EXPECT_TRUE(q.pre_quantized);
  EXPECT_EQ(q.fp32_cpu_offload, r.fp32_cpu_offload);
  EXPECT_EQ(q.modules_to_not_convert, r.skips);
  if (r.method == QuantMethod::kFp8) {
    EXPECT_EQ(q.weight_block_size, r.block);
    EXPECT_EQ(q.static_activations, r.static_activations);
    EXPECT_EQ(q.ue8m0_scales, r.ue8m0);
  }
}

using Names = std::vector<std::string>;
using Block = std::array<int64_t, 2>;

INSTANTIATE_TEST_SUITE_P(
    Methods, ReadsQuantizationConfig,
    ::testing::Values(
        Read{"bnb_4bit", R"({"quant_method": "bitsandbytes", "load_in_4bit": true,
                             "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": true,
                             "bnb_4bit_quant_storage": "uint8"})",
             QuantMethod::kBitsAndBytes4bit, false, std::nullopt, std::nullopt, false, false},
        // No quant_method: transformers derives it from the load_in_* flag.
        Read{"bnb_8bit_without_quant_method", R"({"load_in_8bit": true})",
             QuantMethod::kBitsAndBytes8bit, false, std::nullopt, std::nullopt, false, false},
        Read{"bnb_8bit_skips_and_offload",
             R"({"quant_method": "bitsandbytes", "load_in_8bit": true, "llm_int8_threshold": 6.0,
                 "llm_int8_skip_modules": ["lm_head", "mlp"],
                 "llm_int8_enable_fp32_cpu_offload": true})",
             QuantMethod::kBitsAndBytes8bit, true, Names{"lm_head", "mlp"}, std::nullopt, false,
             false},
        Read{"fp8_defaults", R"({"quant_method": "fp8"})", QuantMethod::kFp8, false, std::nullopt,
             Block{128, 128}, false, false},
        Read{"fp8_per_tensor_static", R"({"quant_method": "fp8", "weight_block_size": null,
                                          "activation_scheme": "STATIC"})",
             QuantMethod::kFp8, false, std::nullopt, std::nullopt, true, false},
        Read{"fp8_ue8m0_ignored_layers",
             R"({"quant_method": "fp8", "weight_block_size": [64, 32], "scale_fmt": "ue8m0",
                 "ignored_layers": ["lm_head"]})",
             QuantMethod::kFp8, false, Names{"lm_head"}, Block{64, 32}, false, true}),
    [](const ::testing::TestParamInfo<Read>& param) { return param.param.label; });

struct Refused {
  std::string quantization_config;
  std::string message;
};

std::ostream& operator<<(std::ostream& os, const Refused& r) {
  return os << r.quantization_config;
}

class RefusesQuantizationConfig : public ::testing::TestWithParam<Refused> {};

TEST_P(RefusesQuantizationConfig, InTransformersWords) {
  try {
    backplane::model_from_config_json(llama_with(GetParam().quantization_config));
    FAIL() << "accepted";
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(GetParam().message), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    PostInit, RefusesQuantizationConfig,
    ::testing::Values(
        Refused{R"({"quant_method": "bitsandbytes", "load_in_4bit": "yes"})",
                "quantization_config: load_in_4bit must be a boolean"},
        Refused{
            R"({"quant_method": "bitsandbytes", "load_in_8bit": true, "llm_int8_threshold": 6})",
            "llm_int8_threshold must be a float"},
        Refused{R"({"quant_method": "bitsandbytes", "load_in_8bit": true,
                    "llm_int8_skip_modules": "lm_head"})",
                "llm_int8_skip_modules must be a list of strings"},
        Refused{R"({"quant_method": "bitsandbytes", "load_in_4bit": true,
                    "bnb_4bit_quant_storage": "int4"})",
                "`bnb_4bit_quant_storage` must be a valid string (one of 'float16', 'float32', "
                "'int8', 'uint8', 'float64', 'bfloat16')"},
        Refused{R"({"quant_method": "fp8", "activation_scheme": "per_token"})",
                "Activation scheme per_token not supported"},
        Refused{R"({"quant_method": "fp8", "weight_block_size": [128]})",
                "weight_block_size must be a tuple of two integers"},
        Refused{R"({"quant_method": "fp8", "weight_block_size": [128, 0]})",
                "weight_block_size must be a tuple of two positive integers"},
        Refused{R"({"quant_method": "fp8", "scale_fmt": "e4m3"})",
                "scale_fmt must be 'float' or 'ue8m0'; got 'e4m3'"},
        Refused{R"({"quant_method": "fp8", "expert_dtype": "int4"})",
                "expert_dtype must be 'fp8' or 'fp4'; got 'int4'"},
        // What transformers can load and this planner cannot size yet says so, by name.
        Refused{R"({"quant_method": "fp8", "expert_dtype": "fp4"})",
                "expert_dtype 'fp4' (FP4-packed experts) is not planned here"},
        Refused{R"({"quant_method": "fp8", "modules_to_convert": ["model.embed_tokens"]})",
                "modules_to_convert (fp8 embeddings) is not planned here"}));

// compressed-tensors' own refusals (pydantic's Value errors, its presets, its compressors).
INSTANTIATE_TEST_SUITE_P(
    CompressedTensors, RefusesQuantizationConfig,
    ::testing::Values(
        Refused{R"({"quant_method": "compressed-tensors", "config_groups": {"g": {
                    "targets": ["Linear"], "weights": {"num_bits": 4, "strategy": "group"}}}})",
                "strategy group requires group_size to be set to a positive value"},
        Refused{R"({"quant_method": "compressed-tensors", "config_groups": {"g": {
                    "targets": ["Linear"], "weights": {"num_bits": 4, "strategy": "rows"}}}})",
                "'rows' is not a valid QuantizationStrategy"},
        Refused{R"({"quant_method": "compressed-tensors", "config_groups": {"g": {
                    "targets": ["Linear"], "weights": {"num_bits": 3, "type": "float"}}}})",
                "Only num_bits in (8) are supported"},
        Refused{R"({"quant_method": "compressed-tensors", "config_groups": {"g": {
                    "targets": ["Linear"], "weights": {"num_bits": 8, "strategy": "token"}}}})",
                "Cannot perform static token quantization, please use `dynamic=True`"},
        Refused{R"({"quant_method": "compressed-tensors", "config_groups": {"g": {
                    "targets": ["Linear"], "weights": {"num_bits": 8, "strategy": "block"}}}})",
                "Block strategy requires block structure"},
        Refused{R"({"quant_method": "compressed-tensors", "config_groups": {"W4A17": ["Linear"]}})",
                "Unknown preset scheme name W4A17, available names: ['UNQUANTIZED'"},
        Refused{R"({"quant_method": "compressed-tensors", "config_groups": {"g": {
                    "weights": {"num_bits": 4}}}})",
                "config_groups.g: targets: Field required"},
        Refused{R"({"quant_method": "compressed-tensors", "config_groups": {"g": {
                    "targets": ["Linear"], "format": "marlin-24"}}})",
                "Unable to find marlin-24 registered"},
        Refused{R"({"quant_method": "compressed-tensors", "config_groups": {"g": {
                    "targets": ["Linear"], "format": "mixed-precision"}}})",
                "mixed-precision cannot be set as a format for a QuantizationScheme"},
        Refused{R"({"quant_method": "compressed-tensors", "quantization_status": "done",
                    "config_groups": {}})",
                "quantization_status: Input should be 'initialized', 'calibration', 'frozen', "
                "'compressed' or 'decompressed'"}));

// GPTQConfig.post_init's refusals, and the layouts not sized here.
INSTANTIATE_TEST_SUITE_P(
    Gptq, RefusesQuantizationConfig,
    ::testing::Values(
        Refused{R"({"quant_method": "gptq", "bits": 5})",
                "Only support quantization to [2,3,4,8] bits but found 5"},
        Refused{R"({"quant_method": "gptq"})", "missing 1 required positional argument: 'bits'"},
        Refused{R"({"quant_method": "gptq", "bits": 4, "group_size": 0})",
                "group_size must be greater than 0 or equal to -1"},
        Refused{R"({"quant_method": "gptq", "bits": 4, "damp_percent": 1.0})",
                "damp_percent must between 0 and 1."},
        Refused{R"({"quant_method": "gptq", "bits": 4, "checkpoint_format": "marlin"})",
                "format 'marlin' is not planned here"}));

// A preset group reads as its scheme; the status decides compression and forced zero points.
TEST(CompressedTensorsConfig, PresetsAndStatus) {
  const backplane::ModelDescription model = backplane::model_from_config_json(llama_with(
      R"({"quant_method": "compressed-tensors", "quantization_status": "frozen",
          "config_groups": {"w4a16": ["Linear"]}, "ignore": ["lm_head"]})"));
  ASSERT_TRUE(model.quantization.has_value());
  EXPECT_EQ(model.quantization->method, QuantMethod::kCompressedTensors);
  const backplane::CompressedTensors& ct = *model.quantization->compressed_tensors;
  EXPECT_FALSE(ct.compressed);
  EXPECT_TRUE(ct.force_zero_point);
  EXPECT_EQ(ct.ignore, Names{"lm_head"});
  ASSERT_EQ(ct.groups.size(), 1u);
  const backplane::CompressedScheme& g = ct.groups[0];
  EXPECT_EQ(g.targets, Names{"Linear"});
  ASSERT_TRUE(g.weights.has_value());
  EXPECT_EQ(g.weights->num_bits, 4);
  EXPECT_EQ(g.weights->strategy, "group");
  EXPECT_EQ(g.weights->group_size, 128);
  EXPECT_FALSE(g.input_activations.has_value());
}

struct Option {
  std::string text;
  QuantMethod method;
};

TEST(QuantizeOption, ShorthandsAndTransformersNames) {
  const Option options[] = {{"bnb-4bit", QuantMethod::kBitsAndBytes4bit},
                            {"bitsandbytes_4bit", QuantMethod::kBitsAndBytes4bit},
                            {"bnb-8bit", QuantMethod::kBitsAndBytes8bit},
                            {"bitsandbytes_8bit", QuantMethod::kBitsAndBytes8bit},
                            {"fp8", QuantMethod::kFp8}};
  for (const Option& o : options) {
    const QuantizationConfig q = backplane::parse_quantize_option(o.text);
    EXPECT_EQ(q.method, o.method) << o.text;
    EXPECT_FALSE(q.pre_quantized) << o.text;
    EXPECT_FALSE(q.modules_to_not_convert.has_value()) << o.text;
  }
  // FineGrainedFP8Config()'s defaults: 128x128 blocks, dynamic activations, float scales.
  const QuantizationConfig fp8 = backplane::parse_quantize_option("fp8");
  EXPECT_EQ(fp8.weight_block_size, (Block{128, 128}));
  EXPECT_FALSE(fp8.static_activations);
  EXPECT_FALSE(fp8.ue8m0_scales);
}

TEST(QuantizeOption, RefusesOthersNamingTheAccepted) {
  for (const char* text : {"", "int4", "bnb", "FP8", "gptq", "bnb-4bits"}) {
    try {
      backplane::parse_quantize_option(text, "--quantize");
      FAIL() << text;
    } catch (const backplane::InvalidArgument& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(std::string("--quantize ") + text + ":"), std::string::npos)
          << message;
      EXPECT_NE(message.find("bnb-4bit, bnb-8bit or fp8"), std::string::npos) << message;
    }
  }
}

TEST(QuantizeOnLoad, AnUnquantizedModelTakesThePassedConfig) {
  backplane::ModelDescription model =
      backplane::model_from_config_json(R"({"model_type": "llama", "num_hidden_layers": 1})");
  std::vector<std::string> warnings;
  backplane::quantize_on_load(model, backplane::parse_quantize_option("bnb-8bit"), warnings);
  ASSERT_TRUE(model.quantization.has_value());
  EXPECT_EQ(model.quantization->method, QuantMethod::kBitsAndBytes8bit);
  EXPECT_FALSE(model.quantization->pre_quantized);
  EXPECT_TRUE(warnings.empty());
}

// merge_quantization_configs: the checkpoint's config wins; bitsandbytes warns, fp8 takes the
// passed config's loading attributes (dequantize, modules_to_not_convert) silently; another
// config class is refused.
TEST(QuantizeOnLoad, TheCheckpointsConfigWins) {
  backplane::ModelDescription bnb = backplane::model_from_config_json(llama_with(
      R"({"quant_method": "bitsandbytes", "load_in_8bit": true, "llm_int8_skip_modules": ["mlp"]})"));
  std::vector<std::string> warnings;
  backplane::quantize_on_load(bnb, backplane::parse_quantize_option("bnb-4bit"), warnings);
  EXPECT_EQ(bnb.quantization->method, QuantMethod::kBitsAndBytes8bit);
  EXPECT_EQ(bnb.quantization->modules_to_not_convert, Names{"mlp"});
  EXPECT_TRUE(bnb.quantization->pre_quantized);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("The `quantization_config` from the model will be used."),
            std::string::npos);

  backplane::ModelDescription fp8 = backplane::model_from_config_json(llama_with(
      R"({"quant_method": "fp8", "activation_scheme": "static", "modules_to_not_convert": ["mlp"]})"));
  warnings.clear();
  backplane::quantize_on_load(fp8, backplane::parse_quantize_option("fp8"), warnings);
  EXPECT_TRUE(warnings.empty());
  EXPECT_TRUE(fp8.quantization->static_activations);                   // the checkpoint's
  EXPECT_FALSE(fp8.quantization->modules_to_not_convert.has_value());  // the passed default

  try {
    backplane::quantize_on_load(fp8, backplane::parse_quantize_option("bnb-4bit"), warnings);
    FAIL() << "another config class accepted";
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("The model is quantized with FineGrainedFP8Config but you "
                                         "are passing a BitsAndBytesConfig config."),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
