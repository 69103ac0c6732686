// plan_tensor_parallel on hand-derived models; the differential test compares many more with
// transformers' own apply_tensor_parallelism.
#include <backplane/error.hpp>
#include <backplane/model/model.hpp>
#include <backplane/model/tensor_parallel.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

// head_dim 8; 8 query heads, 4 key/value heads; bfloat16.
backplane::ModelDescription tiny(const std::string& extra = "") {
  return backplane::model_from_config_json(
      R"({"model_type": "llama", "vocab_size": 1000, "hidden_size": 64,
          "intermediate_size": 176, "num_hidden_layers": 2, "num_attention_heads": 8,
          "num_key_value_heads": 4, "torch_dtype": "bfloat16")" +
      extra + "}");
}

const backplane::TensorParallelModule* find(const backplane::TensorParallelPlan& plan,
                                            const std::string& name) {
  for (const auto& module : plan.modules) {
    if (module.name == name) return &module;
  }
  return nullptr;
}

TEST(TensorParallel, TwoRanksOfTinyLlama) {
  const backplane::TensorParallelPlan plan = backplane::plan_tensor_parallel(tiny(), 2);
  EXPECT_EQ(plan.tp_size, 2);
  struct Row {
    const char* module;
    const char* style;
    const char* rule;
    int shard_dim;
    std::vector<int64_t> local;
  };
  const Row rows[] = {
      {"model.embed_tokens", "embedding_rowwise", "model.embed_tokens", 0, {500, 64}},
      {"model.layers.1.self_attn.q_proj",
       "colwise",
       "model.layers.*.self_attn.q_proj",
       0,
       {32, 64}},
      {"model.layers.0.self_attn.k_proj",
       "colwise",
       "model.layers.*.self_attn.k_proj",
       0,
       {16, 64}},
      {"model.layers.0.self_attn.o_proj",
       "rowwise",
       "model.layers.*.self_attn.o_proj",
       1,
       {64, 32}},
      {"model.layers.0.mlp.up_proj", "colwise", "model.layers.*.mlp.up_proj", 0, {88, 64}},
      {"model.layers.0.mlp.down_proj", "rowwise", "model.layers.*.mlp.down_proj", 1, {64, 88}},
      {"model.layers.0.input_layernorm", "", "", -1, {64}},
      {"model.norm", "", "", -1, {64}},
      {"lm_head", "colwise_gather_output", "lm_head", 0, {500, 64}},
  };
  for (const Row& row : rows) {
    const auto* module = find(plan, row.module);
    ASSERT_NE(module, nullptr) << row.module;
    EXPECT_EQ(module->style, row.style) << row.module;
    EXPECT_EQ(module->rule, row.rule) << row.module;
    ASSERT_EQ(module->parameters.size(), 1u) << row.module;
    EXPECT_EQ(module->parameters[0].shard_dim, row.shard_dim) << row.module;
    ASSERT_EQ(module->parameters[0].rank_shapes.size(), 2u);
    EXPECT_EQ(module->parameters[0].rank_shapes[0], row.local) << row.module;
    EXPECT_EQ(module->parameters[0].rank_shapes[1], row.local) << row.module;
  }
  // Modules without parameters or rules (the decoder layer, rotary_emb) are not listed.
  EXPECT_EQ(find(plan, "model.layers.0"), nullptr);
  EXPECT_EQ(find(plan, "model.rotary_emb"), nullptr);

  // Whole parameters: the norms, 2 x 2 x 64 + 64; split: everything else, halved.
  const int64_t replicated = (2 * 2 * 64 + 64) * 2;
  const int64_t layer = 64 * 64 + 32 * 64 + 32 * 64 + 64 * 64 + 3 * 176 * 64;
  const int64_t split = (2 * layer + 2 * 1000 * 64) * 2;
  EXPECT_EQ(plan.replicated_parameter_bytes, replicated);
  EXPECT_EQ(plan.rank_parameter_bytes,
            (std::vector<int64_t>{replicated + split / 2, replicated + split / 2}));
}

TEST(TensorParallel, BiasesFollowTheirStyle) {
  // colwise splits the bias with the output features; rowwise keeps it whole.
  const auto plan =
      backplane::plan_tensor_parallel(tiny(R"(, "attention_bias": true, "mlp_bias": true)"), 4);
  const auto* q = find(plan, "model.layers.0.self_attn.q_proj");
  ASSERT_NE(q, nullptr);
  ASSERT_EQ(q->parameters.size(), 2u);
  EXPECT_EQ(q->parameters[1].name, "bias");
  EXPECT_EQ(q->parameters[1].shard_dim, 0);
  EXPECT_EQ(q->parameters[1].rank_shapes[3], std::vector<int64_t>{16});
  const auto* down = find(plan, "model.layers.1.mlp.down_proj");
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->parameters[1].shard_dim, -1);
  EXPECT_EQ(down->parameters[1].rank_shapes[2], std::vector<int64_t>{64});
}

TEST(TensorParallel, TiedWeightsCountOnce) {
  const auto untied = backplane::plan_tensor_parallel(tiny(), 2);
  const auto tied = backplane::plan_tensor_parallel(tiny(R"(, "tie_word_embeddings": true)"), 2);
  // lm_head keeps its rule but owns no parameter: its weight is embed_tokens'.
  const auto* lm_head = find(tied, "lm_head");
  ASSERT_NE(lm_head, nullptr);
  EXPECT_EQ(lm_head->style, "colwise_gather_output");
  EXPECT_TRUE(lm_head->parameters.empty());
  EXPECT_EQ(untied.rank_parameter_bytes[0] - tied.rank_parameter_bytes[0], 500 * 64 * 2);
}

TEST(TensorParallel, OneRankAppliesNoRule) {
  const auto description = tiny();
  const auto plan = backplane::plan_tensor_parallel(description, 1);
  int64_t total = 0;
  for (const auto& named : backplane::named_modules(description.root)) {
    for (const auto& tensor : named.module->tensors) {
      if (!tensor.buffer) total += tensor.nbytes();
    }
  }
  for (const auto& module : plan.modules) EXPECT_EQ(module.style, "") << module.name;
  EXPECT_EQ(plan.rank_parameter_bytes, std::vector<int64_t>{total});
  EXPECT_EQ(plan.replicated_parameter_bytes, total);
}

TEST(TensorParallel, UnevenSplitsWhenAllowed) {
  // vocab 1001 over 4 ranks: torch.chunk gives 251, 251, 251, 248.
  backplane::TensorParallelOptions options;
  options.allow_uneven_shards = true;
  const auto plan = backplane::plan_tensor_parallel(tiny(R"(, "vocab_size": 1001)"), 4, options);
  const auto* embed = find(plan, "model.embed_tokens");
  ASSERT_NE(embed, nullptr);
  std::vector<int64_t> rows;
  for (const auto& shape : embed->parameters[0].rank_shapes) rows.push_back(shape[0]);
  EXPECT_EQ(rows, (std::vector<int64_t>{251, 251, 251, 248}));
  EXPECT_GT(plan.rank_parameter_bytes[0], plan.rank_parameter_bytes[3]);
}

struct Refused {
  std::string extra;  // appended to the tiny config
  int tp_size;
  bool allow_uneven;
  std::string message;
};

// The test name's parameter, readable in ctest and GoogleTest output.
inline void PrintTo(const Refused& x, std::ostream* os) {
  *os << "tp_size " << x.tp_size << (x.allow_uneven ? " uneven" : "")
      << (x.extra.empty() ? "" : " +" + x.extra);
}

class RefusedPlan : public ::testing::TestWithParam<Refused> {};

TEST_P(RefusedPlan, NamesTheNumberAndTheTpSize) {
  const auto description = tiny(GetParam().extra);
  backplane::TensorParallelOptions options;
  options.allow_uneven_shards = GetParam().allow_uneven;
  try {
    backplane::plan_tensor_parallel(description, GetParam().tp_size, options);
    FAIL() << GetParam().message;
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find(GetParam().message), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, RefusedPlan,
    ::testing::Values(
        Refused{"", 0, false, "tp_size must be from 1 to 4096, got 0"},
        Refused{"", -2, false, "tp_size must be from 1 to 4096, got -2"},
        Refused{"", 8192, false, "tp_size must be from 1 to 4096, got 8192"},
        Refused{"", 3, false, "num_attention_heads (8) is not divisible by tp_size 3"},
        Refused{"", 3, true, "num_attention_heads (8) is not divisible by tp_size 3"},
        Refused{"", 8, false, "num_key_value_heads (4) is not divisible by tp_size 8"},
        Refused{"", 8, true, "num_key_value_heads (4) is not divisible by tp_size 8"},
        Refused{R"(, "intermediate_size": 102)", 4, false,
                "intermediate_size (102) is not divisible by tp_size 4"},
        Refused{R"(, "vocab_size": 1001)", 2, false,
                "vocab_size (1001) is not divisible by tp_size 2"}));

TEST(TensorParallel, NeedsAPlanAndKnownStyles) {
  backplane::ModelDescription description = tiny();
  description.tp_plan.clear();
  description.from_config = false;
  try {
    backplane::plan_tensor_parallel(description, 2);
    FAIL();
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("has no tp_plan (a model rebuilt from weights alone"),
              std::string::npos)
        << e.what();
  }
  EXPECT_NO_THROW(backplane::plan_tensor_parallel(description, 1));

  description = tiny();
  description.tp_plan.emplace_back("model.norm", "sideways");
  try {
    backplane::plan_tensor_parallel(description, 2);
    FAIL();
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("uses the style 'sideways'"), std::string::npos)
        << e.what();
  }
}

TEST(TensorParallel, RulesMayNameParameters) {
  // A rule on a parameter wins over its module's (transformers' _get_parameter_plan).
  backplane::ModelDescription description = tiny();
  description.tp_plan.emplace_back("model.layers.*.input_layernorm.weight", "embedding_rowwise");
  const auto plan = backplane::plan_tensor_parallel(description, 2);
  const auto* norm = find(plan, "model.layers.1.input_layernorm");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->style, "");
  EXPECT_EQ(norm->parameters[0].shard_dim, 0);
  EXPECT_EQ(norm->parameters[0].rank_shapes[1], std::vector<int64_t>{32});
}

}  // namespace
