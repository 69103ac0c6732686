// The quantizers' module swap on a described model (core/src/model/quantized_modules.cpp). The
// skip-pattern table is what transformers 5.24's should_convert_module answers for the same
// names; the swaps are sized as replace_with_bnb_linear / replace_with_fp8_linear build them
// (tests/python/quantized_plan_check.py compares whole plans with transformers itself).
#include <backplane/error.hpp>

#include <gtest/gtest.h>

#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "model/quantized_modules.hpp"
#include "tiny_model.hpp"

namespace {

using backplane::DType;
using backplane::QuantizationConfig;
using backplane::QuantMethod;
using backplane::quantization::should_convert_module;
using backplane::quantization::swap_quantized_modules;

struct Skip {
  std::string name;
  std::vector<std::string> patterns;
  bool convert;
};

std::ostream& operator<<(std::ostream& os, const Skip& s) {
  os << s.name << " [";
  for (const std::string& p : s.patterns) os << p << " ";
  return os << "]";
}

class ShouldConvert : public ::testing::TestWithParam<Skip> {};

TEST_P(ShouldConvert, AsTransformersMatchesPatterns) {
  EXPECT_EQ(should_convert_module(GetParam().name, GetParam().patterns), GetParam().convert);
}

INSTANTIATE_TEST_SUITE_P(
    Patterns, ShouldConvert,
    ::testing::Values(
        // A regex from the start, up to a module boundary.
        Skip{"model.layers.1.mlp", {"model.layers.1"}, false},
        Skip{"model.layers.11.mlp", {"model.layers.1"}, true},
        Skip{"model.layers.1.mlp", {"layers.1"}, true},  // not at the start, not a suffix
        Skip{"model.layers.0.self_attn.q_proj", {R"(model\.layers\.\d+\.self_attn)"}, false},
        Skip{"model.layers.0.self_attn.q_proj", {"model.layers.*.self_attn"}, false},
        Skip{"model.layers.0.mlp.up_proj", {"model.layers.*.self_attn"}, true},
        Skip{"model.layers.0.mlp.up_proj", {"model.layers.0."}, false},  // ends with the dot
        Skip{"model.layers.0.mlp.up_proj", {"model"}, false},
        Skip{"model.layers.0.mlp.up_proj", {"mod"}, true},
        // A suffix, of the name or of its last part.
        Skip{"lm_head", {"lm_head"}, false}, Skip{"model.lm_head", {"lm_head"}, false},
        Skip{"model.layers.0.mlp.down_proj", {"mlp.down_proj"}, false},
        Skip{"model.layers.0.mlp.up_proj", {"p_proj"}, false},
        Skip{"model.layers.0.mlp.down_proj", {"down"}, true},
        Skip{"model.layers.0.mlp.up_proj", {}, true},
        Skip{"model.layers.0.mlp.up_proj", {"lm_head", "up_proj"}, false}));

TEST(ShouldConvert, RefusesAPatternThatIsNoRegex) {
  try {
    should_convert_module("model.layers.0", {"model.layers.(0"});
    FAIL() << "accepted";
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'model.layers.(0'"), std::string::npos) << e.what();
  }
}

// get_keys_to_not_convert: the tied pair, the last parameter's module and the output embeddings.
TEST(DefaultSkips, TiedAndLastAndOutputEmbeddings) {
  const backplane::ModelDescription untied = planner_test::tiny_llama(false, 2);
  EXPECT_EQ(backplane::quantization::default_skips(untied), std::vector<std::string>{"lm_head"});
  const backplane::ModelDescription tied = planner_test::tiny_llama(true, 2);
  EXPECT_EQ(backplane::quantization::default_skips(tied),
            (std::vector<std::string>{"lm_head", "model.embed_tokens"}));
}

int64_t count_class(const backplane::Module& m, const std::string& class_name) {
  int64_t n = m.class_name == class_name ? 1 : 0;
  for (const backplane::Module& child : m.children) n += count_class(child, class_name);
  return n;
}

// bitsandbytes: every Linear but lm_head becomes Linear4bit, its weight counted at 4 bits, the
// rest of the model in the main dtype.
TEST(Swap, BitsAndBytes4bitCountsWeightsAtHalfAByte) {
  const backplane::ModelDescription model = planner_test::tiny_llama(false, 2);
  QuantizationConfig config;
  config.method = QuantMethod::kBitsAndBytes4bit;
  const auto swapped = swap_quantized_modules(model, config, DType::kBFloat16, {});
  EXPECT_EQ(swapped.replaced, 14);  // 7 Linear a layer
  EXPECT_EQ(count_class(swapped.model.root, "Linear4bit"), 14);
  EXPECT_EQ(swapped.replaced_with, "Linear4bit");
  EXPECT_EQ(swapped.not_converted, std::vector<std::string>{"lm_head"});
  const backplane::Module* q =
      backplane::find_module(swapped.model.root, "model.layers.0.mlp.up_proj");
  ASSERT_NE(q, nullptr);
  ASSERT_EQ(q->tensors.size(), 1u);
  EXPECT_EQ(q->tensors[0].quantized_bits, 4);
  EXPECT_EQ(q->tensors[0].dtype, DType::kBFloat16);
  const backplane::Module* head = backplane::find_module(swapped.model.root, "lm_head");
  EXPECT_EQ(head->class_name, "Linear");
  EXPECT_FALSE(head->tensors[0].quantized_bits.has_value());
}

// A skip list given replaces the defaults (lm_head is quantized then); fp32 cpu offload keeps the
// offloaded modules too.
TEST(Swap, GivenSkipsReplaceTheDefaults) {
  const backplane::ModelDescription model = planner_test::tiny_llama(false, 2);
  QuantizationConfig config;
  config.method = QuantMethod::kBitsAndBytes8bit;
  config.modules_to_not_convert = std::vector<std::string>{"down_proj"};
  const auto swapped = swap_quantized_modules(model, config, DType::kFloat16, {"model.layers.1"});
  EXPECT_EQ(swapped.not_converted, (std::vector<std::string>{"down_proj", "model.layers.1"}));
  // Layer 0 but its down_proj (a suffix), nothing of layer 1 (a prefix up to a dot), lm_head.
  EXPECT_EQ(swapped.replaced, 7);
  EXPECT_EQ(backplane::find_module(swapped.model.root, "lm_head")->class_name, "Linear8bitLt");
}

// FP8Linear: float8 weight, one float32 scale per 128x128 block (rounded up), or one byte a block
// with ue8m0 scales; a scalar scale without blocks; an activation scale when static.
TEST(Swap, Fp8LinearTensors) {
  backplane::ModelDescription model;
  model.root = planner_test::module(
      "", "M", {}, {planner_test::linear("proj", 300, 129), planner_test::linear("head", 7, 129)});
  model.hyperparameters["hidden_size"] = 129;
  QuantizationConfig config;
  config.method = QuantMethod::kFp8;
  config.pre_quantized = true;
  config.modules_to_not_convert = std::vector<std::string>{"head"};
  auto swapped = swap_quantized_modules(model, config, DType::kBFloat16, {});
  const backplane::Module* proj = backplane::find_module(swapped.model.root, "proj");
  ASSERT_EQ(proj->class_name, "FP8Linear");
  ASSERT_EQ(proj->tensors.size(), 2u);
  EXPECT_EQ(proj->tensors[0].dtype, DType::kFloat8E4M3);
  EXPECT_EQ(proj->tensors[1].name, "weight_scale_inv");
  EXPECT_EQ(proj->tensors[1].shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(proj->tensors[1].dtype, DType::kFloat32);

  config.ue8m0_scales = true;
  swapped = swap_quantized_modules(model, config, DType::kBFloat16, {});
  EXPECT_EQ(backplane::find_module(swapped.model.root, "proj")->tensors[1].dtype,
            DType::kFloat8E8M0);

  config.weight_block_size.reset();
  config.static_activations = true;
  swapped = swap_quantized_modules(model, config, DType::kBFloat16, {});
  proj = backplane::find_module(swapped.model.root, "proj");
  ASSERT_EQ(proj->tensors.size(), 3u);
  EXPECT_TRUE(proj->tensors[1].shape.empty());
  EXPECT_EQ(proj->tensors[1].dtype, DType::kFloat32);  // a scalar scale stays float32
  EXPECT_EQ(proj->tensors[2].name, "activation_scale");

  config.dequantize = true;  // where fp8 cannot run: nothing swapped
  swapped = swap_quantized_modules(model, config, DType::kBFloat16, {});
  EXPECT_EQ(swapped.replaced, 0);
  EXPECT_EQ(backplane::find_module(swapped.model.root, "proj")->class_name, "Linear");
}

// compressed-tensors on a Linear (300, 129) and lm_head: W4 group 64 packed, the scale in the
// model's dtype, zero points only where asymmetric or before compression; lm_head ignored.
TEST(CompressedTensors, PackedGroupsAndIgnore) {
  backplane::ModelDescription model;
  model.root = planner_test::module(
      "", "M", {},
      {planner_test::linear("proj", 300, 129), planner_test::linear("lm_head", 7, 129)});
  backplane::CompressedArgs w;
  w.num_bits = 4;
  w.strategy = "group";
  w.group_size = 64;
  w.zp_dtype = "int8";
  backplane::CompressedTensors ct;
  ct.groups.push_back({"g", {"Linear"}, w, std::nullopt, std::nullopt, std::nullopt});
  ct.ignore = {"lm_head"};
  ct.compressed = true;
  QuantizationConfig config;
  config.method = QuantMethod::kCompressedTensors;
  config.pre_quantized = true;
  config.compressed_tensors = ct;
  auto swapped = swap_quantized_modules(model, config, DType::kBFloat16, {});
  EXPECT_EQ(swapped.replaced, 1);
  const backplane::Module* proj = backplane::find_module(swapped.model.root, "proj");
  std::map<std::string, std::pair<std::vector<int64_t>, DType>> tensors;
  for (const auto& t : proj->tensors) tensors[t.name] = {t.shape, t.dtype};
  EXPECT_EQ(tensors.count("weight"), 0u);
  EXPECT_EQ(tensors["weight_packed"].first, (std::vector<int64_t>{300, 17}));  // ceil(129*4/32)
  EXPECT_EQ(tensors["weight_packed"].second, DType::kInt32);
  EXPECT_EQ(tensors["weight_scale"].first, (std::vector<int64_t>{300, 3}));  // ceil(129/64)
  EXPECT_EQ(tensors["weight_scale"].second, DType::kBFloat16);
  EXPECT_EQ(tensors["weight_shape"].second, DType::kInt64);
  EXPECT_EQ(tensors.count("weight_zero_point"), 0u);  // symmetric, compressed
  EXPECT_EQ(backplane::find_module(swapped.model.root, "lm_head")->tensors.size(), 1u);

  // Frozen: the dense weight, its scale and a zero point even though symmetric.
  config.compressed_tensors->compressed = false;
  config.compressed_tensors->force_zero_point = true;
  swapped = swap_quantized_modules(model, config, DType::kBFloat16, {});
  proj = backplane::find_module(swapped.model.root, "proj");
  tensors.clear();
  for (const auto& t : proj->tensors) tensors[t.name] = {t.shape, t.dtype};
  EXPECT_EQ(tensors["weight"].second, DType::kBFloat16);
  EXPECT_EQ(tensors["weight_zero_point"].first, (std::vector<int64_t>{300, 3}));
  EXPECT_EQ(tensors["weight_zero_point"].second, DType::kInt8);

  // A regex target matches from the start of the name; an exact name beats a class.
  ct.groups[0].targets = {"re:pro"};
  config.compressed_tensors = ct;
  EXPECT_EQ(swap_quantized_modules(model, config, DType::kBFloat16, {}).replaced, 1);
  ct.groups[0].targets = {"re:roj"};
  config.compressed_tensors = ct;
  EXPECT_EQ(swap_quantized_modules(model, config, DType::kBFloat16, {}).replaced, 0);
}

// GPTQ: exact Linear layers under the block prefix become QuantLinear with GPT-QModel's packed
// tensors; what lies outside the prefix (lm_head, embeddings) stays in the model's dtype.
TEST(Gptq, PacksTheLayersUnderTheBlockPrefix) {
  const backplane::ModelDescription model = planner_test::tiny_llama(false, 2);
  QuantizationConfig config;
  config.method = QuantMethod::kGptq;
  config.pre_quantized = true;
  config.gptq = backplane::Gptq{4, 2, std::nullopt, std::nullopt};
  auto swapped = swap_quantized_modules(model, config, DType::kFloat16, {});
  EXPECT_EQ(swapped.replaced, 14);
  const backplane::Module* q =
      backplane::find_module(swapped.model.root, "model.layers.1.mlp.up_proj");
  ASSERT_EQ(q->class_name, "QuantLinear");
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto& t : q->tensors) shapes[t.name] = t.shape;
  EXPECT_EQ(shapes["qweight"], (std::vector<int64_t>{1, 5}));  // ceil(4 * 4 / 32), out
  EXPECT_EQ(shapes["qzeros"], (std::vector<int64_t>{2, 1}));   // 4 / 2 groups, ceil(5 * 4 / 32)
  EXPECT_EQ(shapes["scales"], (std::vector<int64_t>{2, 5}));
  EXPECT_EQ(shapes["g_idx"], (std::vector<int64_t>{4}));
  EXPECT_EQ(backplane::find_module(swapped.model.root, "lm_head")->class_name, "Linear");

  // block_name_to_quantize is a plain prefix; modules_in_block_to_quantize keeps suffixes.
  config.gptq->block_name_to_quantize = "model.layers.1";
  config.gptq->modules_in_block_to_quantize = std::vector<std::string>{"proj"};
  EXPECT_EQ(swap_quantized_modules(model, config, DType::kFloat16, {}).replaced, 7);
  config.gptq->modules_in_block_to_quantize = std::vector<std::string>{"down_proj", "q_proj"};
  EXPECT_EQ(swap_quantized_modules(model, config, DType::kFloat16, {}).replaced, 2);

  backplane::ModelDescription other;
  other.root = planner_test::module("", "M", {}, {planner_test::linear("blocks", 4, 4)});
  config.gptq = backplane::Gptq{};
  try {
    swap_quantized_modules(other, config, DType::kFloat16, {});
    FAIL() << "no block pattern";
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("Block pattern could not be match"), std::string::npos);
  }
}

}  // namespace
