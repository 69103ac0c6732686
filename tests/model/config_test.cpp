// model_from_config: a tiny Llama derived by hand, the config classes' defaults, and refused
// configs. Every fact here was read in transformers 5.24's source (configuration_*.py,
// modeling_*.py); the differential test checks many more configs against transformers itself.
#include <backplane/error.hpp>
#include <backplane/model/model.hpp>

#include "temp_folder.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace {

using backplane::DType;
using backplane::ModelDescription;

constexpr const char* kTinyLlama = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "vocab_size": 1000, "hidden_size": 64, "intermediate_size": 176, "num_hidden_layers": 2,
  "num_attention_heads": 8, "num_key_value_heads": 2, "torch_dtype": "bfloat16",
  "tie_word_embeddings": false, "rms_norm_eps": 1e-5, "rope_theta": 10000.0
})";

struct Tensor {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype;
  bool buffer;
};

std::vector<Tensor> tensors(const ModelDescription& description) {
  std::vector<Tensor> out;
  for (const backplane::NamedModule& named : backplane::named_modules(description.root)) {
    for (const backplane::TensorInfo& t : named.module->tensors) {
      out.push_back({named.name + "." + t.name, t.shape, t.dtype, t.buffer});
    }
  }
  return out;
}

TEST(ModelFromConfig, TinyLlamaModulesInDefinitionOrder) {
  const ModelDescription d = backplane::model_from_config_json(kTinyLlama);
  std::vector<std::pair<std::string, std::string>> expected = {{"", "LlamaForCausalLM"},
                                                               {"model", "LlamaModel"},
                                                               {"model.embed_tokens", "Embedding"},
                                                               {"model.layers", "ModuleList"}};
  for (const char* layer : {"0", "1"}) {
    const std::string p = std::string("model.layers.") + layer;
    expected.insert(expected.end(), {{p, "LlamaDecoderLayer"},
                                     {p + ".self_attn", "LlamaAttention"},
                                     {p + ".self_attn.q_proj", "Linear"},
                                     {p + ".self_attn.k_proj", "Linear"},
                                     {p + ".self_attn.v_proj", "Linear"},
                                     {p + ".self_attn.o_proj", "Linear"},
                                     {p + ".mlp", "LlamaMLP"},
                                     {p + ".mlp.gate_proj", "Linear"},
                                     {p + ".mlp.up_proj", "Linear"},
                                     {p + ".mlp.down_proj", "Linear"},
                                     {p + ".mlp.act_fn", "SiLUActivation"},
                                     {p + ".input_layernorm", "LlamaRMSNorm"},
                                     {p + ".post_attention_layernorm", "LlamaRMSNorm"}});
  }
  expected.insert(expected.end(), {{"model.norm", "LlamaRMSNorm"},
                                   {"model.rotary_emb", "LlamaRotaryEmbedding"},
                                   {"lm_head", "Linear"}});
  std::vector<std::pair<std::string, std::string>> actual;
  for (const backplane::NamedModule& named : backplane::named_modules(d.root)) {
    actual.emplace_back(named.name, named.module->class_name);
  }
  EXPECT_EQ(actual, expected);
  EXPECT_EQ(d.architecture, "LlamaForCausalLM");
  EXPECT_EQ(d.model_type, "llama");
  EXPECT_EQ(d.dtype, DType::kBFloat16);
  EXPECT_TRUE(d.from_config);
  EXPECT_EQ(d.no_split_module_classes, std::vector<std::string>{"LlamaDecoderLayer"});
  EXPECT_TRUE(d.tied_parameters.empty());
}

TEST(ModelFromConfig, TinyLlamaShapesAndSizes) {
  const ModelDescription d = backplane::model_from_config_json(kTinyLlama);
  // head_dim = 64 / 8 = 8; k/v: 2 heads x 8 = 16 rows; rotary: 8 / 2 = 4 frequencies.
  const backplane::Module* q = backplane::find_module(d.root, "model.layers.1.self_attn.q_proj");
  ASSERT_NE(q, nullptr);
  ASSERT_EQ(q->tensors.size(), 1u);  // attention_bias defaults to false
  EXPECT_EQ(q->tensors[0].shape, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(backplane::find_module(d.root, "model.layers.0.self_attn.k_proj")->tensors[0].shape,
            (std::vector<int64_t>{16, 64}));
  EXPECT_EQ(backplane::find_module(d.root, "model.layers.0.mlp.down_proj")->tensors[0].shape,
            (std::vector<int64_t>{64, 176}));
  const backplane::Module* rotary = backplane::find_module(d.root, "model.rotary_emb");
  ASSERT_NE(rotary, nullptr);
  ASSERT_EQ(rotary->tensors.size(), 2u);
  for (const backplane::TensorInfo& buffer : rotary->tensors) {
    EXPECT_TRUE(buffer.buffer);
    EXPECT_FALSE(buffer.persistent);
    EXPECT_EQ(buffer.dtype, DType::kFloat32);  // computed in float32 whatever the model dtype
    EXPECT_EQ(buffer.shape, std::vector<int64_t>{4});
  }
  EXPECT_EQ(rotary->tensors[0].name, "inv_freq");
  EXPECT_EQ(rotary->tensors[1].name, "original_inv_freq");

  // Per layer: attention 64*64 + 16*64 + 16*64 + 64*64 = 10240, MLP 3 * 176*64 = 33792,
  // norms 128; embeddings and lm_head 1000*64 each; final norm 64.
  int64_t parameters = 0;
  int64_t bytes = 0;
  for (const Tensor& t : tensors(d)) {
    if (t.buffer) continue;
    int64_t numel = 1;
    for (int64_t dim : t.shape) numel *= dim;
    parameters += numel;
    EXPECT_EQ(t.dtype, DType::kBFloat16) << t.name;
  }
  for (const backplane::NamedModule& named : backplane::named_modules(d.root)) {
    for (const backplane::TensorInfo& t : named.module->tensors) {
      if (!t.buffer) bytes += t.nbytes();
    }
  }
  EXPECT_EQ(parameters, 2 * (10240 + 33792 + 128) + 2 * 64000 + 64);
  EXPECT_EQ(bytes, 2 * parameters);
  const std::map<std::string, int64_t> hyperparameters = {
      {"vocab_size", 1000},     {"hidden_size", 64},        {"intermediate_size", 176},
      {"num_hidden_layers", 2}, {"num_attention_heads", 8}, {"num_key_value_heads", 2},
      {"head_dim", 8}};
  EXPECT_EQ(d.hyperparameters, hyperparameters);
}

TEST(ModelFromConfig, TiedEmbeddingsListTheSharedWeightOnce) {
  const std::string untied = "\"tie_word_embeddings\": false";
  std::string config = kTinyLlama;
  config.replace(config.find(untied), untied.size(), "\"tie_word_embeddings\": true");
  const ModelDescription d = backplane::model_from_config_json(config);
  const backplane::Module* lm_head = backplane::find_module(d.root, "lm_head");
  ASSERT_NE(lm_head, nullptr);
  EXPECT_TRUE(lm_head->tensors.empty());  // named_parameters() reports it under embed_tokens
  EXPECT_EQ(
      d.tied_parameters,
      (std::vector<std::vector<std::string>>{{"lm_head.weight", "model.embed_tokens.weight"}}));
}

TEST(ModelFromConfig, DefaultsOfTheConfigClasses) {
  struct Row {
    const char* config;
    std::map<std::string, int64_t> expected;
  };
  const Row rows[] = {
      {R"({"model_type": "llama"})",
       {{"vocab_size", 32000},
        {"hidden_size", 4096},
        {"intermediate_size", 11008},
        {"num_hidden_layers", 32},
        {"num_attention_heads", 32},
        {"num_key_value_heads", 32},
        {"head_dim", 128}}},
      {R"({"model_type": "mistral"})",
       {{"vocab_size", 32000},
        {"hidden_size", 4096},
        {"intermediate_size", 14336},
        {"num_hidden_layers", 32},
        {"num_attention_heads", 32},
        {"num_key_value_heads", 8},
        {"head_dim", 128}}},
      // Qwen2Config's num_key_value_heads defaults to 32, whatever num_attention_heads is.
      {R"({"model_type": "qwen2", "num_attention_heads": 64, "hidden_size": 8192})",
       {{"vocab_size", 151936},
        {"hidden_size", 8192},
        {"intermediate_size", 22016},
        {"num_hidden_layers", 32},
        {"num_attention_heads", 64},
        {"num_key_value_heads", 32},
        {"head_dim", 128}}},
      // ... and null means "as many as the attention heads".
      {R"({"model_type": "qwen2", "num_attention_heads": 4, "hidden_size": 64,
           "num_key_value_heads": null})",
       {{"vocab_size", 151936},
        {"hidden_size", 64},
        {"intermediate_size", 22016},
        {"num_hidden_layers", 32},
        {"num_attention_heads", 4},
        {"num_key_value_heads", 4},
        {"head_dim", 16}}},
      // Qwen3's head_dim is 128 by default, not hidden_size / num_attention_heads.
      {R"({"architectures": ["Qwen3ForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
           "num_key_value_heads": 2})",
       {{"vocab_size", 151936},
        {"hidden_size", 64},
        {"intermediate_size", 22016},
        {"num_hidden_layers", 32},
        {"num_attention_heads", 4},
        {"num_key_value_heads", 2},
        {"head_dim", 128}}},
  };
  for (const Row& row : rows) {
    const ModelDescription d = backplane::model_from_config_json(row.config);
    EXPECT_EQ(d.hyperparameters, row.expected) << row.config;
    EXPECT_EQ(d.dtype, DType::kFloat32) << row.config;  // no dtype: what from_config builds
  }
}

TEST(ModelFromConfig, ArchitectureSpecificModules) {
  // Qwen2: q/k/v always carry a bias, o_proj never; Qwen3: q_norm and k_norm of head_dim.
  const ModelDescription qwen2 = backplane::model_from_config_json(
      R"({"model_type": "qwen2", "hidden_size": 32, "num_attention_heads": 2,
          "num_key_value_heads": 1, "num_hidden_layers": 1, "vocab_size": 10,
          "intermediate_size": 8, "attention_bias": false})");
  EXPECT_EQ(backplane::find_module(qwen2.root, "model.layers.0.self_attn.k_proj")->tensors.size(),
            2u);
  EXPECT_EQ(backplane::find_module(qwen2.root, "model.layers.0.self_attn.o_proj")->tensors.size(),
            1u);
  const ModelDescription qwen3 = backplane::model_from_config_json(
      R"({"model_type": "qwen3", "hidden_size": 32, "num_attention_heads": 2, "head_dim": 24,
          "num_key_value_heads": 1, "num_hidden_layers": 1, "vocab_size": 10,
          "intermediate_size": 8, "attention_bias": true, "dtype": "float16"})");
  const backplane::Module* attention =
      backplane::find_module(qwen3.root, "model.layers.0.self_attn");
  ASSERT_NE(attention, nullptr);
  ASSERT_EQ(attention->children.size(), 6u);
  EXPECT_EQ(attention->children[4].name, "q_norm");
  EXPECT_EQ(attention->children[4].class_name, "Qwen3RMSNorm");
  EXPECT_EQ(attention->children[5].tensors[0].shape, std::vector<int64_t>{24});
  EXPECT_EQ(attention->children[3].tensors.size(), 2u);  // o_proj bias from attention_bias
  EXPECT_EQ(attention->children[0].tensors[0].shape, (std::vector<int64_t>{48, 32}));
  EXPECT_EQ(qwen3.dtype, DType::kFloat16);
}

struct Refused {
  const char* config;
  const char* message;  // a part of the error
};

// The test name's parameter, readable in ctest and GoogleTest output.
inline void PrintTo(const Refused& x, std::ostream* os) {
  *os << x.config;
}

class RefusedConfig : public ::testing::TestWithParam<Refused> {};

TEST_P(RefusedConfig, NamesTheProblem) {
  try {
    backplane::model_from_config_json(GetParam().config);
    FAIL() << GetParam().config;
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(GetParam().message), std::string::npos)
        << "message: " << e.what() << "\nconfig: " << GetParam().config;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, RefusedConfig,
    ::testing::Values(
        Refused{"", "not valid JSON"}, Refused{"[1, 2]", "must be a JSON object"},
        Refused{"{\"model_type\": \"llama\",}", "not valid JSON"},
        // A name no descriptor has: the nearest ones, and the tool for any architecture.
        Refused{R"({"model_type": "lama"})", "model_type 'lama' is not described here ("},
        Refused{R"({"model_type": "lama"})", "nearest: llama"},
        Refused{R"({"model_type": "lama"})",
                "tools/export-module-tree writes its module tree for `hwprobe plan --tree`"},
        Refused{R"({"architectures": ["GPT2LMHeadModl"]})",
                "architecture 'GPT2LMHeadModl' is not described here"},
        Refused{R"({"architectures": ["GPT2LMHeadModl"]})", "nearest: GPT2LMHeadModel"},
        Refused{R"({"architectures": ["LlamaForCausalLM"], "model_type": "qwen2"})",
                "`architectures` names LlamaForCausalLM but `model_type` is 'qwen2'"},
        Refused{R"({"vocab_size": 10})", "names no `model_type` and no `architectures`"},
        // Sizes no tensor can have, named with the expression that makes them.
        Refused{R"({"model_type": "llama", "hidden_size": -64})",
                "the shape of model.embed_tokens.weight = hidden_size is -64; expected an integer "
                "from 0 to 1099511627776"},
        Refused{R"({"model_type": "llama", "num_hidden_layers": -1})",
                "the number of model.layers = num_hidden_layers is -1"},
        Refused{R"({"model_type": "llama", "vocab_size": 2000000000000})",
                "vocab_size is 2000000000000; expected an integer from 0 to 1099511627776"},
        Refused{R"({"model_type": "llama", "vocab_size": 18446744073709551615})",
                "vocab_size is 18446744073709551615; expected an integer"},
        // Types as the strict config class checks them.
        Refused{R"({"model_type": "llama", "hidden_size": 4096.0})",
                "`hidden_size` must be an integer (LlamaForCausalLM's config types it int), got "
                "4096.0"},
        Refused{R"({"model_type": "llama", "hidden_size": true})",
                "`hidden_size` must be an integer (LlamaForCausalLM's config types it int), got "
                "true"},
        Refused{R"({"model_type": "llama", "hidden_size": null})",
                "`hidden_size` is null; LlamaForCausalLM's config types it int"},
        Refused{R"({"model_type": "llama", "tie_word_embeddings": 1})",
                "`tie_word_embeddings` must be true or false"},
        // The config class's own validators, in transformers' words and naming them.
        Refused{R"({"model_type": "llama", "hidden_size": 100, "num_attention_heads": 3,
                    "head_dim": 32})",
                "The hidden size (100) is not a multiple of the number of attention heads (3). "
                "(LlamaConfig.validate_architecture)"},
        Refused{R"({"model_type": "mistral", "hidden_size": 99, "num_attention_heads": 3,
                    "num_key_value_heads": 1})",
                "(MistralForCausalLM): RoPE requires an even rotary dimension, but got "
                "`head_dim`=33 with `partial_rotary_factor`=1.0 for `full_attention`."},
        Refused{R"({"model_type": "t5", "feed_forward_proj": "relu-gelu"})",
                "`feed_forward_proj`: relu-gelu is not a valid activation function of the dense "
                "layer. Please make sure `feed_forward_proj` is of the format `gated-{ACT_FN}` or "
                "`{ACT_FN}`, e.g. 'gated-gelu' or 'relu' (T5Config.validate_architecture)"},
        Refused{R"({"model_type": "jamba", "attn_layer_offset": 8})",
                "attention layer offset (8) must be smaller than attention layer period (8)"},
        // A validator whose own condition fails on the values (None * 2) refuses as well.
        Refused{R"({"model_type": "falcon_h1", "mamba_d_head": null})",
                "the config's values fail its check"},
        Refused{R"({"model_type": "qwen3", "head_dim": null})",
                "`head_dim` is null; Qwen3ForCausalLM's config types it int"},
        Refused{R"({"model_type": "llama", "num_attention_heads": 2097152, "head_dim": 2097152,
                    "hidden_size": 2097152})",
                "the shape of model.layers.0.self_attn.q_proj.weight = _head * "
                "num_attention_heads is 4398046511104"},
        Refused{R"({"model_type": "llama", "torch_dtype": "int8"})",
                "`torch_dtype` = \"int8\" is not a dtype a model can be built in"},
        Refused{R"({"model_type": "llama", "dtype": "torch.float16"})",
                "`dtype` = \"torch.float16\" is not a dtype"},
        // T5's feed-forward activation comes from feed_forward_proj's tail, which must be one.
        Refused{R"({"model_type": "t5", "feed_forward_proj": "gated-swiglu"})",
                "the activation of encoder.block.0.layer.1.DenseReluDense.act (dense_act_fn) is "
                "\"swiglu\", not an activation transformers knows"},
        Refused{R"({"model_type": "t5", "feed_forward_proj": "gated-swiglu"})",
                "tools/export-module-tree writes its module tree for `hwprobe plan --tree`"},
        Refused{R"({"model_type": "llama", "hidden_act": "swiglu"})",
                "the activation of model.layers.0.mlp.act_fn (hidden_act) is \"swiglu\", not an "
                "activation transformers knows; accepted: gelu"},
        // A composite config's sub-config is checked field by field, named as config.json
        // nests it.
        Refused{R"({"model_type": "gemma3", "text_config": {"hidden_size": "big"}})",
                "`text_config.hidden_size` must be an integer (Gemma3ForConditionalGeneration's "
                "config types it int), got \"big\""},
        Refused{R"({"model_type": "gpt2", "activation_function": "swiglu"})",
                "the activation of transformer.h.0.mlp.act (activation_function) is \"swiglu\", "
                "not an activation transformers knows; accepted: gelu"},
        // Rope parameters per layer type (Mellum's full and sliding attention): each entry is
        // checked, and entries that size the rotary buffers apart are not guessed between.
        Refused{R"({"model_type": "mellum", "rope_parameters": {
                    "full_attention": {"rope_type": "linear"},
                    "sliding_attention": {"rope_type": "default"}}})",
                "rope_parameters[\"full_attention\"]: rope parameters of rope_type 'linear' lack "
                "the required key 'factor'"},
        Refused{R"({"model_type": "mellum", "rope_parameters": {
                    "full_attention": {"rope_type": "linear", "factor": 2.0,
                                       "partial_rotary_factor": 0.5},
                    "sliding_attention": {"rope_type": "default"}}})",
                "the rope parameters of 'full_attention' and 'sliding_attention' give rotary "
                "embeddings of 32 and 64 frequencies"},
        Refused{R"({"model_type": "llama", "rope_parameters": {"rope_type": "linear"}})",
                "rope_type 'linear' lack the required key 'factor'"},
        Refused{R"({"model_type": "llama", "rope_scaling": {"type": "su", "factor": 2.0}})",
                "rope_type 'su' is not supported; accepted: default, linear"},
        Refused{R"({"model_type": "llama", "partial_rotary_factor": 1.5})",
                "`partial_rotary_factor` = 1.5 is out of range"},
        Refused{R"({"model_type": "llama", "num_hidden_layers": 2,
                    "layer_types": ["full_attention"]})",
                "`num_hidden_layers` (2) must be equal to the number of `layer_types` (1) "
                "(PreTrainedConfig.validate_layer_type)"},
        Refused{R"({"model_type": "llama", "num_hidden_layers": 1, "layer_types": ["nope"]})",
                "The `layer_types` entries must be in ('full_attention', 'sliding_attention', "},
        Refused{R"({"model_type": "llama", "num_hidden_layers": 1, "layer_types": ["nope"]})",
                "'linear_attention') but got ['nope']"},
        Refused{R"({"model_type": "qwen3", "quantization_config": {"quant_method": "hqq"}})",
                "has a quantization_config (quant_method \"hqq\"): its quantized modules are "
                "not described here"},
        // transformers' own refusals of a quantization_config (AutoQuantizationConfig.from_dict,
        // BitsAndBytesConfig).
        Refused{R"({"model_type": "llama", "quantization_config": {"quant_method": "bitsandbytes",
                    "load_in_4bit": true, "load_in_8bit": true}})",
                "quantization_config: load_in_4bit and load_in_8bit are both True, but only one "
                "can be used at the same time"},
        Refused{R"({"model_type": "llama", "quantization_config": {"bits": 4}})",
                "has no `quant_method` attribute. Make sure that the model has been correctly "
                "quantized"},
        Refused{R"({"model_type": "llama", "quantization_config": [1]})",
                "quantization_config must be a JSON object, found [1]"},
        // nn.Embedding's own refusal when the model is built: padding_idx outside it.
        Refused{R"({"model_type": "llama", "vocab_size": 100, "pad_token_id": 100})",
                "Padding_idx must be within num_embeddings (nn.Embedding of model.embed_tokens)"},
        Refused{R"({"model_type": "llama", "vocab_size": 100, "pad_token_id": -101})",
                "Padding_idx must be within num_embeddings"}));

// A quant_method transformers does not know: from_pretrained warns, naming the ones it knows,
// and loads the model unquantized.
TEST(ModelFromConfig, AnUnknownQuantMethodIsDescribedUnquantizedWithTransformersWarning) {
  const backplane::ModelDescription quantized = backplane::model_from_config_json(
      R"({"model_type": "llama", "num_hidden_layers": 1, "quantization_config":
          {"quant_method": "mystery", "bits": 3}})");
  const backplane::ModelDescription dense =
      backplane::model_from_config_json(R"({"model_type": "llama", "num_hidden_layers": 1})");
  EXPECT_EQ(backplane::named_modules(quantized.root).size(),
            backplane::named_modules(dense.root).size());
  ASSERT_EQ(quantized.warnings.size(), 1u);
  EXPECT_NE(quantized.warnings[0].find("Unknown quantization type, got mystery - supported types "
                                       "are: ['awq', 'bitsandbytes_4bit', 'bitsandbytes_8bit', "),
            std::string::npos)
      << quantized.warnings[0];
  EXPECT_NE(quantized.warnings[0].find("'mxfp4'"), std::string::npos);
  EXPECT_NE(quantized.warnings[0].find("Hence, we will skip the quantization."), std::string::npos);
  EXPECT_TRUE(dense.warnings.empty());
}

// What transformers builds although it looks wrong, described as it builds it (a plan equal to
// from_pretrained's; the attention of the first would fail when it runs).
TEST(ModelFromConfig, AcceptsWhatTransformersBuilds) {
  const char* accepted[] = {
      R"({"model_type": "mistral", "num_attention_heads": 32, "num_key_value_heads": 5,
          "num_hidden_layers": 1})",
      // Qwen2 keeps head_dim None (no field of its config): the odd width 33 is not checked.
      R"({"model_type": "qwen2", "hidden_size": 100, "num_attention_heads": 3,
          "num_hidden_layers": 1})",
      R"({"model_type": "llama", "num_hidden_layers": 0})",
      R"({"model_type": "llama", "vocab_size": 100, "pad_token_id": -100,
          "num_hidden_layers": 1})",
      // Legacy layer type names, renamed as PreTrainedConfig.__post_init__ renames them.
      R"({"model_type": "llama", "num_hidden_layers": 2,
          "layer_types": ["attention", "full_attention"]})",
  };
  for (const char* config : accepted) {
    EXPECT_NO_THROW(backplane::model_from_config_json(config)) << config;
  }
  const ModelDescription qwen2 = backplane::model_from_config_json(accepted[1]);
  EXPECT_EQ(qwen2.hyperparameters.at("head_dim"), 33);
  EXPECT_TRUE(qwen2.unchecked.empty());
  // Phi-3's rope validator reads rope_parameters as its class standardizes them, which the
  // descriptor does not: it says so.
  const ModelDescription phi3 =
      backplane::model_from_config_json(R"({"model_type": "phi3", "num_hidden_layers": 1})");
  EXPECT_EQ(phi3.unchecked, std::vector<std::string>{"transformers' Phi3Config.validate_rope"});
}

// T5Config.__post_init__ fills in dense_act_fn and is_gated_act from feed_forward_proj (T5 v1.1
// and FLAN-T5: "gated-gelu", gelu_new in a gated block); keys config.json gives itself win.
struct T5FeedForward {
  const char* config;
  const char* block_class;
  const char* first_linear;
  const char* activation_class;
};

class T5FeedForwardOf : public ::testing::TestWithParam<T5FeedForward> {};

TEST_P(T5FeedForwardOf, IsWhatT5ConfigMakesOfIt) {
  const T5FeedForward& expected = GetParam();
  const ModelDescription model = backplane::model_from_config_json(expected.config);
  const std::string block = "decoder.block.1.layer.2.DenseReluDense";
  const backplane::Module* feed_forward = backplane::find_module(model.root, block);
  ASSERT_NE(feed_forward, nullptr) << expected.config;
  EXPECT_EQ(feed_forward->class_name, expected.block_class) << expected.config;
  EXPECT_NE(backplane::find_module(model.root, block + "." + expected.first_linear), nullptr)
      << expected.config;
  const backplane::Module* act = backplane::find_module(model.root, block + ".act");
  ASSERT_NE(act, nullptr);
  EXPECT_EQ(act->class_name, expected.activation_class) << expected.config;
}

INSTANTIATE_TEST_SUITE_P(
    Table, T5FeedForwardOf,
    ::testing::Values(
        T5FeedForward{R"({"model_type": "t5", "num_layers": 2})", "T5DenseActDense", "wi", "ReLU"},
        T5FeedForward{R"({"model_type": "t5", "num_layers": 2, "feed_forward_proj": "gated-gelu"})",
                      "T5DenseGatedActDense", "wi_1", "NewGELUActivation"},
        T5FeedForward{R"({"model_type": "t5", "num_layers": 2, "feed_forward_proj": "gated-silu"})",
                      "T5DenseGatedActDense", "wi_0", "SiLUActivation"},
        T5FeedForward{R"({"model_type": "t5", "num_layers": 2, "feed_forward_proj": "gelu"})",
                      "T5DenseActDense", "wi", "GELUActivation"},
        // FLAN-T5's config.json names both itself; a contradicting one is read as written.
        T5FeedForward{R"({"model_type": "t5", "num_layers": 2, "feed_forward_proj": "gated-gelu",
                         "dense_act_fn": "gelu_new", "is_gated_act": true})",
                      "T5DenseGatedActDense", "wi_1", "NewGELUActivation"},
        T5FeedForward{R"({"model_type": "t5", "num_layers": 2, "feed_forward_proj": "gated-gelu",
                         "dense_act_fn": "relu", "is_gated_act": false})",
                      "T5DenseActDense", "wi", "ReLU"}));

// Which classes use_kernels gives a Hub kernel (the layer names transformers' decorators give
// them; kernel_layers_check.py holds them against the kernels library's own marks).
struct Kernelized {
  const char* config;
  std::map<std::string, std::string> layers;
  std::map<std::string, std::vector<std::string>> functions;
};

class KernelLayersOf : public ::testing::TestWithParam<Kernelized> {};

TEST_P(KernelLayersOf, AreTheDecoratedClassesOfTheModel) {
  const ModelDescription model = backplane::model_from_config_json(GetParam().config);
  ASSERT_TRUE(model.kernel_layers.has_value());
  EXPECT_EQ(model.kernel_layers->layers, GetParam().layers) << GetParam().config;
  EXPECT_EQ(model.kernel_layers->functions, GetParam().functions) << GetParam().config;
}

INSTANTIATE_TEST_SUITE_P(
    Table, KernelLayersOf,
    ::testing::Values(
        Kernelized{R"({"model_type": "llama", "num_hidden_layers": 1})",
                   {{"LlamaRMSNorm", "RMSNorm"}, {"SiLUActivation", "SiLU"}},
                   {{"LlamaAttention", {"rotary_pos_emb"}}}},
        // The activation follows the config: another class, another layer name, or none.
        Kernelized{R"({"model_type": "llama", "num_hidden_layers": 1, "hidden_act": "gelu"})",
                   {{"GELUActivation", "GeLU"}, {"LlamaRMSNorm", "RMSNorm"}},
                   {{"LlamaAttention", {"rotary_pos_emb"}}}},
        Kernelized{R"({"model_type": "llama", "num_hidden_layers": 1, "hidden_act": "relu"})",
                   {{"LlamaRMSNorm", "RMSNorm"}},
                   {{"LlamaAttention", {"rotary_pos_emb"}}}},
        // Gemma's RMSNorm (1 + weight) is not decorated: its own forward stays.
        Kernelized{R"({"model_type": "gemma", "num_hidden_layers": 1})",
                   {{"GELUTanh", "GeluTanh"}},
                   {{"GemmaAttention", {"rotary_pos_emb"}}}},
        Kernelized{R"({"model_type": "gpt_oss", "num_hidden_layers": 1})",
                   {{"GptOssMLP", "MegaBlocksMoeMLP"}, {"GptOssRMSNorm", "RMSNorm"}},
                   {{"GptOssAttention", {"rotary_pos_emb"}}}},
        Kernelized{R"({"model_type": "mamba", "num_hidden_layers": 1})",
                   {{"SiLUActivation", "SiLU"}},
                   {{"MambaMixer",
                     {"causal_conv1d_fn", "causal_conv1d_update", "mamba_inner_fn",
                      "selective_scan_fn", "selective_state_update"}}}},
        Kernelized{R"({"model_type": "t5", "num_layers": 1})", {}, {}}));

TEST(ModelFromConfig, NestingIsBounded) {
  std::string deep = R"({"model_type": "llama", "x": )";
  for (int i = 0; i < 100; ++i) deep += "[";
  for (int i = 0; i < 100; ++i) deep += "]";
  deep += "}";
  try {
    backplane::model_from_config_json(deep);
    FAIL();
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("deeper than 64 levels"), std::string::npos) << e.what();
  }
  // 63 levels inside the top object are fine (unknown keys are ignored, as transformers keeps
  // them as attributes).
  std::string fine = R"({"model_type": "llama", "num_hidden_layers": 1, "x": )";
  for (int i = 0; i < 63; ++i) fine += "[";
  for (int i = 0; i < 63; ++i) fine += "]";
  fine += "}";
  EXPECT_NO_THROW(backplane::model_from_config_json(fine));
}

TEST(ModelFromConfig, ReadsFilesWithinTheSizeLimit) {
  backplane::testing::TempFolder folder;
  const auto path = folder.path() / "config.json";
  std::ofstream(path) << kTinyLlama;
  EXPECT_EQ(backplane::model_from_config(path).hyperparameters.at("vocab_size"), 1000);

  const auto missing = folder.path() / "absent.json";
  try {
    backplane::model_from_config(missing);
    FAIL();
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("absent.json' does not exist"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(backplane::model_from_config(folder.path()), backplane::InvalidArgument);

  const auto large = folder.path() / "large.json";
  {
    std::ofstream out(large);
    out << "{\"model_type\": \"llama\"}";
    out << std::string((16u << 20) + 1, ' ');
  }
  try {
    backplane::model_from_config(large);
    FAIL();
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("at most 16777216 are accepted"), std::string::npos)
        << e.what();
  }
}

TEST(ModelFromConfig, TextWithinTheSizeLimit) {
  const std::string large = "{\"model_type\": \"llama\"}" + std::string((16u << 20), ' ');
  try {
    backplane::model_from_config_json(large);
    FAIL();
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("at most 16777216 are accepted"), std::string::npos)
        << e.what();
  }
}

TEST(ModelFromConfig, DescribedActivationsFollowTheConfig) {
  // GPT-2's mlp.act is ACT2CLS[activation_function]; Apertus's act_fn too, but for xIELU,
  // which its MLP builds in the model's dtype (ACT2CLS's own keeps bfloat16).
  struct Case {
    const char* config;
    const char* module;
    const char* class_name;
    size_t tensors;
    backplane::DType state_dtype;
  };
  const Case cases[] = {
      {R"({"model_type": "gpt2", "n_layer": 1})", "transformer.h.0.mlp.act", "NewGELUActivation", 0,
       backplane::DType::kFloat32},
      {R"({"model_type": "gpt2", "n_layer": 1, "activation_function": "relu"})",
       "transformer.h.0.mlp.act", "ReLU", 0, backplane::DType::kFloat32},
      {R"({"model_type": "gpt2", "n_layer": 1, "activation_function": "prelu"})",
       "transformer.h.0.mlp.act", "PReLU", 1, backplane::DType::kFloat32},
      {R"({"model_type": "gpt2", "n_layer": 1, "activation_function": "xielu"})",
       "transformer.h.0.mlp.act", "XIELUActivation", 4, backplane::DType::kBFloat16},
      {R"({"model_type": "apertus", "num_hidden_layers": 1})", "model.layers.0.mlp.act_fn",
       "XIELUActivation", 4, backplane::DType::kFloat32},
      {R"({"model_type": "apertus", "num_hidden_layers": 1, "hidden_act": "silu"})",
       "model.layers.0.mlp.act_fn", "SiLUActivation", 0, backplane::DType::kFloat32},
  };
  for (const Case& c : cases) {
    const backplane::ModelDescription d = backplane::model_from_config_json(c.config);
    const backplane::Module* act = backplane::find_module(d.root, c.module);
    ASSERT_NE(act, nullptr) << c.config;
    EXPECT_EQ(act->class_name, c.class_name) << c.config;
    ASSERT_EQ(act->tensors.size(), c.tensors) << c.config;
    for (const backplane::TensorInfo& t : act->tensors)
      EXPECT_EQ(t.dtype, c.state_dtype) << c.config;
  }
}

TEST(ModelFromConfig, ReadsInfinityAsPythonWritesIt) {
  // transformers 4 saved Mamba-2's time_step_limit with Python's bare Infinity; 5 saves
  // {"__float__": "Infinity"}. Both read; the words inside a string stay as they are.
  const backplane::ModelDescription bare = backplane::model_from_config_json(
      R"({"model_type": "mamba2", "num_hidden_layers": 1, "time_step_limit": [0.0, Infinity],
          "name_or_path": "NaN -Infinity \" Infinity"})");
  const backplane::ModelDescription tagged = backplane::model_from_config_json(
      R"({"model_type": "mamba2", "num_hidden_layers": 1,
          "time_step_limit": [0.0, {"__float__": "Infinity"}]})");
  EXPECT_EQ(bare.hyperparameters, tagged.hyperparameters);
  EXPECT_NE(backplane::find_module(bare.root, "backbone.layers.0.mixer.in_proj"), nullptr);
  // A float field may hold any of them, as a Python float may (rms_norm_eps is typed float).
  for (const char* special : {"NaN", "Infinity", "-Infinity", R"({"__float__": "NaN"})"}) {
    SCOPED_TRACE(special);
    EXPECT_NO_THROW(backplane::model_from_config_json(
        std::string(R"({"model_type": "llama", "num_hidden_layers": 1, "rms_norm_eps": )") +
        special + "}"));
  }
  try {
    backplane::model_from_config_json(R"({"model_type": "mamba2", "x": Infinityy})");
    FAIL();
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("not valid JSON"), std::string::npos) << e.what();
  }
}

TEST(ModelFromConfig, SupportedArchitectures) {
  // Every architecture descriptor's class, once, in model_type order.
  const std::vector<std::string> names = backplane::supported_architectures();
  ASSERT_GE(names.size(), 40u);
  EXPECT_EQ(names.front(), "AfmoeForCausalLM");
  for (const char* described :
       {"LlamaForCausalLM", "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
        "GPT2LMHeadModel", "MixtralForCausalLM", "DeepseekV3ForCausalLM", "GptOssForCausalLM",
        "BertLMHeadModel", "Gemma3ForConditionalGeneration"}) {
    EXPECT_EQ(std::count(names.begin(), names.end(), described), 1) << described;
  }
}

}  // namespace
