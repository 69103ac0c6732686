// The renames of transformers' weight conversion, as compiled in from checkpoint_renames.json
// (tests/python/checkpoint_renames.py; checkpoint_renames_current keeps the data current).
// Expected names are what transformers' rename_source_key gives for the same keys.
#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "model/checkpoint_renames.hpp"

namespace {

using backplane::model_detail::checkpoint_renames;

struct RenameCase {
  std::string model_type;
  std::string saved;
  std::string loaded;
};

void PrintTo(const RenameCase& c, std::ostream* os) {
  *os << c.model_type << ": " << c.saved;
}

class CheckpointRename : public testing::TestWithParam<RenameCase> {};

TEST_P(CheckpointRename, NamesTheTensorAsTheModelDoes) {
  const RenameCase& c = GetParam();
  const auto& renames = checkpoint_renames(c.model_type);
  ASSERT_TRUE(renames.known) << c.model_type;
  bool renamed = false;
  EXPECT_EQ(renames.apply(c.saved, renamed), c.loaded);
  EXPECT_EQ(renamed, c.saved != c.loaded);
}

INSTANTIATE_TEST_SUITE_P(
    Transformers, CheckpointRename,
    testing::Values(
        RenameCase{"gpt_neox", "embed_out.weight", "lm_head.weight"},
        // Anchored: only a leading embed_out is the head.
        RenameCase{"gpt_neox", "gpt_neox.embed_out.weight", "gpt_neox.embed_out.weight"},
        RenameCase{"mixtral", "model.layers.3.block_sparse_moe.gate.weight",
                   "model.layers.3.mlp.gate.weight"},
        RenameCase{"gpt2", "transformer.h.0.attn.c_attn.weight",
                   "transformer.h.0.attn.c_attn.weight"},
        // The legacy names every model takes (TF-era LayerNorm gamma/beta).
        RenameCase{"bert", "bert.encoder.layer.0.output.LayerNorm.gamma",
                   "bert.encoder.layer.0.output.LayerNorm.weight"},
        RenameCase{"llama", "model.norm.weight", "model.norm.weight"},
        // A rename confined to the language sub-model, after a root rename moved it there.
        RenameCase{"gemma3", "language_model.model.layers.0.mlp.up_proj.weight",
                   "model.language_model.layers.0.mlp.up_proj.weight"},
        RenameCase{"gemma3", "model.language_model.model.layers.0.mlp.up_proj.weight",
                   "model.language_model.layers.0.mlp.up_proj.weight"},
        RenameCase{"gemma3", "lm_head.weight", "lm_head.weight"}));

TEST(CheckpointRenames, SaysWhichArchitecturesFuseTensorsOnLoad) {
  EXPECT_TRUE(checkpoint_renames("mixtral").fuses);
  EXPECT_FALSE(checkpoint_renames("gpt2").fuses);
}

TEST(CheckpointRenames, AnUnknownModelTypeTakesOnlyTheRenamesOfEveryModel) {
  const auto& renames = checkpoint_renames("not_a_model_type");
  EXPECT_FALSE(renames.known);
  bool renamed = false;
  EXPECT_EQ(renames.apply("embed_out.weight", renamed), "embed_out.weight");
  EXPECT_FALSE(renamed);
  EXPECT_EQ(renames.apply("encoder.LayerNorm.gamma", renamed), "encoder.LayerNorm.weight");
  EXPECT_TRUE(renamed);
}

}  // namespace
