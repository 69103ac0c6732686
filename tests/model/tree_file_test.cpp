// model_from_tree: the module tree file tools/export-module-tree writes (format
// "backplane-module-tree", version 1), read exactly, and bad files refused by field.
#include <backplane/error.hpp>
#include <backplane/model/model.hpp>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <functional>
#include <string>
#include <vector>

namespace {

using nlohmann::json;

// A two-layer toy decoder as the tool writes one, tied head included.
json toy_tree() {
  return json::parse(R"({
    "format": "backplane-module-tree", "version": 1,
    "producer": {"tool": "export-module-tree", "transformers": "5.24.0", "torch": "2.15.0"},
    "source": "toy", "architecture": "ToyForCausalLM", "model_type": "toy",
    "auto_class": "causal-lm", "dtype": "bfloat16",
    "modules": [["", "ToyForCausalLM"], ["model", "ToyModel"], ["model.embed", "Embedding"],
                ["model.blocks", "ModuleList"], ["model.blocks.0", "ToyBlock"],
                ["model.blocks.0.proj", "Linear"], ["model.blocks.1", "ToyBlock"],
                ["model.blocks.1.proj", "Linear"], ["model.rope", "ToyRotary"],
                ["lm_head", "Linear"]],
    "parameters": [["model.embed.weight", [100, 8], "bfloat16"],
                   ["model.blocks.0.proj.weight", [8, 8], "bfloat16"],
                   ["model.blocks.0.proj.bias", [8], "bfloat16"],
                   ["model.blocks.1.proj.weight", [8, 8], "bfloat16"]],
    "buffers": [["model.rope.inv_freq", [4], "float32", false]],
    "no_split_modules": ["ToyBlock"],
    "tied": [["lm_head.weight", "model.embed.weight"]],
    "tied_weights_keys": {"lm_head.weight": "model.embed.weight"},
    "tp_plan": [["model.blocks.*.proj", "colwise"]],
    "keep_in_fp32_modules": [],
    "hyperparameters": {"hidden_size": 8, "vocab_size": 100},
    "kernel_layers": {"layers": {"ToyBlock": "ToyLayer"},
                      "functions": {"ToyBlock": ["rotary_pos_emb"]}}
  })");
}

TEST(ModelFromTree, ReadsTheTreeExactly) {
  const backplane::ModelDescription d = backplane::model_from_tree_json(toy_tree().dump());
  EXPECT_EQ(d.architecture, "ToyForCausalLM");
  EXPECT_EQ(d.model_type, "toy");
  EXPECT_EQ(d.dtype, backplane::DType::kBFloat16);
  EXPECT_TRUE(d.approximate_because.empty());
  std::vector<std::string> names;
  for (const backplane::NamedModule& m : backplane::named_modules(d.root)) names.push_back(m.name);
  EXPECT_EQ(names,
            (std::vector<std::string>{"", "model", "model.embed", "model.blocks", "model.blocks.0",
                                      "model.blocks.0.proj", "model.blocks.1",
                                      "model.blocks.1.proj", "model.rope", "lm_head"}));
  const backplane::Module* proj = backplane::find_module(d.root, "model.blocks.0.proj");
  ASSERT_NE(proj, nullptr);
  EXPECT_EQ(proj->class_name, "Linear");
  ASSERT_EQ(proj->tensors.size(), 2u);
  EXPECT_EQ(proj->tensors[1].name, "bias");
  const backplane::Module* rope = backplane::find_module(d.root, "model.rope");
  ASSERT_EQ(rope->tensors.size(), 1u);
  EXPECT_TRUE(rope->tensors[0].buffer);
  EXPECT_FALSE(rope->tensors[0].persistent);
  EXPECT_EQ(rope->tensors[0].dtype, backplane::DType::kFloat32);
  EXPECT_TRUE(backplane::find_module(d.root, "lm_head")->tensors.empty());
  EXPECT_EQ(d.no_split_module_classes, std::vector<std::string>{"ToyBlock"});
  EXPECT_EQ(d.tied_weights_keys.at("lm_head.weight"), "model.embed.weight");
  EXPECT_EQ(d.tp_plan.at(0).second, "colwise");
  EXPECT_EQ(d.hyperparameters.at("vocab_size"), 100);
  ASSERT_TRUE(d.kernel_layers.has_value());
  EXPECT_EQ(d.kernel_layers->layers.at("ToyBlock"), "ToyLayer");
  EXPECT_EQ(d.kernel_layers->functions.at("ToyBlock"), std::vector<std::string>{"rotary_pos_emb"});
}

// A tree file written before export-module-tree recorded kernel layers: not known, not none.
TEST(ModelFromTree, KernelLayersOfAnOlderFileAreNotKnown) {
  json tree = toy_tree();
  tree.erase("kernel_layers");
  EXPECT_FALSE(backplane::model_from_tree_json(tree.dump()).kernel_layers.has_value());
}

struct Bad {
  const char* name;
  std::function<void(json&)> spoil;
  const char* message;
};

void PrintTo(const Bad& b, std::ostream* os) {
  *os << b.name;
}

class RefusedTree : public ::testing::TestWithParam<Bad> {};

TEST_P(RefusedTree, NamesTheField) {
  json tree = toy_tree();
  GetParam().spoil(tree);
  try {
    backplane::model_from_tree_json(tree.dump(), "tree.json");
    FAIL() << "accepted";
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("tree.json: ", 0), 0u) << e.what();
    EXPECT_NE(std::string(e.what()).find(GetParam().message), std::string::npos) << e.what();
  }
}

INSTANTIATE_TEST_SUITE_P(
    Table, RefusedTree,
    ::testing::Values(
        Bad{"another format", [](json& tree) { tree["format"] = "onnx"; },
            "format: must be \"backplane-module-tree\""},
        Bad{"a later version", [](json& tree) { tree["version"] = 2; },
            "version: must be 1; this backplane reads version 1"},
        Bad{"no root first", [](json& tree) { tree["modules"].erase(tree["modules"].begin()); },
            "modules[0]: the root module \"\" comes first"},
        Bad{"a child before its parent",
            [](json& tree) { std::swap(tree["modules"][2], tree["modules"][1]); },
            "comes before its parent 'model'"},
        Bad{"a module twice",
            [](json& tree) {
              tree["modules"].push_back({"model", "ToyModel"});
            },
            "module 'model' twice"},
        Bad{"a tensor of no module",
            [](json& tree) {
              tree["parameters"].push_back({"model.nowhere.weight", {1}, "float32"});
            },
            "'model.nowhere.weight' belongs to no listed module"},
        Bad{"a negative dimension",
            [](json& tree) {
              tree["parameters"][0][1] = json::array({-1, 8});
            },
            "must hold non-negative integers"},
        Bad{"an unknown dtype", [](json& tree) { tree["parameters"][0][2] = "float7"; }, "float7"},
        Bad{"a buffer without persistence",
            [](json& tree) {
              tree["buffers"][0] = json::array({"model.rope.inv_freq", {4}, "float32"});
            },
            "buffers[0]: must be [name, shape, dtype, persistent]"},
        Bad{"tied not pairs", [](json& tree) { tree["tied"] = json::array({1}); },
            "tied: must be an array of arrays"},
        Bad{"kernel layers without functions",
            [](json& tree) { tree["kernel_layers"].erase("functions"); },
            "kernel_layers: must be {\"layers\": {class: layer name}"},
        Bad{"a kernel layer that is no name",
            [](json& tree) { tree["kernel_layers"]["layers"]["ToyBlock"] = 3; },
            "kernel_layers.layers.ToyBlock: must be a layer name"},
        Bad{"kernel functions not a list",
            [](json& tree) { tree["kernel_layers"]["functions"]["ToyBlock"] = "rotary_pos_emb"; },
            "kernel_layers.functions.ToyBlock: must be a list of names"}));

TEST(ModelFromTree, DuplicateKeysAndBadJsonAreRefused) {
  EXPECT_THROW(backplane::model_from_tree_json(R"({"format": 1, "format": 2})", "t"),
               backplane::InvalidArgument);
  EXPECT_THROW(backplane::model_from_tree_json("{", "t"), backplane::InvalidArgument);
  EXPECT_THROW(backplane::model_from_tree("/nonexistent/tree.json"), backplane::InvalidArgument);
}

}  // namespace
