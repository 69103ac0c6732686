// The planner on a hand-sized tree (tiny_model.hpp). Each expected map is derived by hand from
// the algorithm, step by step in the comment above it (and agrees with transformers 5.24 /
// Accelerate 1.15 on the same tree built in torch).
#include <backplane/error.hpp>
#include <backplane/model/device_map.hpp>
#include <backplane/rules/selection.hpp>

#include <gtest/gtest.h>

#include <string>

#include "planner/planner.hpp"
#include "tiny_model.hpp"

namespace {

using backplane::DevicePlan;
using backplane::DType;
using backplane::MaxMemory;
using backplane::PlanHardware;
using backplane::PlanRules;
using planner_test::tiny_llama;

// "name=device name=device ..." in the plan's order.
std::string map_of(const DevicePlan& plan) {
  std::string out;
  for (const auto& [name, target] : plan.device_map) {
    out +=
        (out.empty() ? "" : " ") + (name.empty() ? std::string("''") : name) + "=" + target.str();
  }
  return out;
}

DevicePlan plan(const backplane::ModelDescription& model, const std::string& strategy,
                const std::string& max_memory, PlanRules rules = PlanRules::kFromPretrained,
                std::optional<DType> dtype = std::nullopt, const PlanHardware& hardware = {}) {
  backplane::PlanOptions options;
  if (!max_memory.empty()) options.max_memory = MaxMemory::parse(max_memory);
  options.dtype = dtype;
  options.rules = rules;
  return backplane::plan_device_map(model, backplane::parse_device_map(strategy), hardware,
                                    options);
}

TEST(ModelTree, SizesAsComputeModuleSizes) {
  const backplane::ModelDescription model = tiny_llama();
  const backplane::planner::ModelTree tree(model, std::nullopt, PlanRules::kFromPretrained);
  EXPECT_EQ(tree.model_size(), 3236u);
  uint64_t layer = 0;
  uint64_t act_fn = 1;
  for (const auto& node : tree.nodes()) {
    if (node.name == "model.layers.2") layer = node.size;
    if (node.name == "model.layers.2.mlp.act_fn") act_fn = node.size;
  }
  EXPECT_EQ(layer, 600u);
  EXPECT_EQ(act_fn, 0u);
  // The largest unsplit layer under the root: the four decoder layers, 600 B each.
  EXPECT_EQ(tree.node(0).layer_max, 600u);
  EXPECT_EQ(tree.node(0).layer_count, 4);
}

TEST(ModelTree, TiedWeightCountsOnceWhetherListedOnceOrTwice) {
  EXPECT_EQ(
      backplane::planner::ModelTree(tiny_llama(true), std::nullopt, PlanRules::kFromPretrained)
          .model_size(),
      2836u);
  // A tree that lists lm_head.weight as well (as an untied torch model does): the first name in
  // named_parameters() order (model.embed_tokens.weight) carries the bytes.
  backplane::ModelDescription both = tiny_llama(false);
  both.tied_parameters = {{"lm_head.weight", "model.embed_tokens.weight"}};
  EXPECT_EQ(
      backplane::planner::ModelTree(both, std::nullopt, PlanRules::kFromPretrained).model_size(),
      2836u);
}

TEST(ModelTree, DtypeOverride) {
  const backplane::ModelDescription model = tiny_llama();
  // from_pretrained(dtype=float16): the 3220 B of parameters halve, the 16 B of float32 RoPE
  // buffers stay: 1610 + 16.
  EXPECT_EQ(
      plan(model, "sequential", "cpu=1GB", PlanRules::kFromPretrained, DType::kFloat16).model_size,
      1626u);
  // Accelerate: parameters converted to float16, buffers by its override min(2, 4): 3236 / 2.
  EXPECT_EQ(
      plan(model, "sequential", "cpu=1GB", PlanRules::kAccelerate, DType::kFloat16).model_size,
      1618u);
  // float64: Accelerate's override alone would keep float32, but the weights are converted as
  // they load, so the parameters double; the non-persistent buffers stay (no note for those).
  EXPECT_EQ(
      plan(model, "sequential", "cpu=1GB", PlanRules::kAccelerate, DType::kFloat64).model_size,
      6456u);
  EXPECT_EQ(
      plan(model, "sequential", "cpu=1GB", PlanRules::kFromPretrained, DType::kFloat64).model_size,
      6456u);
}

// sequential, {0: 1500, 1: 1500, cpu: 10000}. Devices 0, 1, cpu, disk; 0 and cpu keep room for
// the largest pending layer.
// - model (3236): popping it drops the four listed layers, the rescan of what is left finds
//   lm_head (400); 3236 > 1500 - 400: split into embed_tokens, layers, norm, rotary_emb. The
//   rescan lists the layers again (600).
// - embed_tokens 400 <= 1500 - 600: GPU 0 (400 used).
// - layers: its layers leave the list, rescan: lm_head 400; 400 + 2400 > 1100: split, rescan 600.
// - layers.0: 400 + 600 > 900, no split: GPU 0 is done (it keeps 600 reserved); GPU 1 holds no
//   reserve: layers.0 and layers.1 (1200 <= 1500); layers.2 does not fit: cpu.
// - cpu (10000 - 600): layers.2, layers.3, norm, rotary_emb, lm_head.
// Nothing folds: every parent has keys on two devices.
TEST(Planner, SequentialFillsInOrderAndKeepsRoomOnTheFirstAccelerator) {
  const DevicePlan p = plan(tiny_llama(), "sequential", "0=1500,1=1500,cpu=10000");
  EXPECT_EQ(map_of(p),
            "model.embed_tokens=0 model.layers.0=1 model.layers.1=1 model.layers.2=cpu "
            "model.layers.3=cpu model.norm=cpu model.rotary_emb=cpu lm_head=cpu");
  EXPECT_EQ(p.max_memory.str(), "0=1500,1=1500,cpu=10000");
  EXPECT_EQ(p.model_size, 3236u);
  ASSERT_EQ(p.placed.size(), 3u);
  EXPECT_EQ(p.placed[0].device.str(), "0");
  EXPECT_EQ(p.placed[0].bytes, 400u);
  EXPECT_EQ(p.placed[1].bytes, 1200u);
  EXPECT_EQ(p.placed[2].device.str(), "cpu");
  EXPECT_EQ(p.placed[2].bytes, 1636u);
  EXPECT_EQ(p.placed[2].modules.size(), 5u);
}

// auto, {0: 4000, 1: 4000, cpu: 10000}. Balancing: n = 2, per_gpu = 3236 // 2 = 1618, buffer =
// int(1.25 x max(largest no-split block 600, largest module's own tensors 400)) = 750, so GPU 0
// is capped at min(2368, 4000) = 2368; the last GPU keeps 4000.
// - model split as above; embed_tokens (400 <= 2368 - 600), layers.0 (1000), layers.1 (1600)
//   on GPU 0; layers.2: 2200 > 1768: GPU 1 takes layers.2, layers.3, norm, rotary_emb, lm_head.
TEST(Planner, AutoBalancesOverTheAccelerators) {
  const DevicePlan p = plan(tiny_llama(), "auto", "0=4000,1=4000,cpu=10000");
  EXPECT_EQ(map_of(p),
            "model.embed_tokens=0 model.layers.0=0 model.layers.1=0 model.layers.2=1 "
            "model.layers.3=1 model.norm=1 model.rotary_emb=1 lm_head=1");
  EXPECT_EQ(p.max_memory.str(), "0=2368,1=4000,cpu=10000");
  // "balanced" is "auto".
  EXPECT_EQ(map_of(plan(tiny_llama(), "balanced", "0=4000,1=4000,cpu=10000")), map_of(p));
}

// balanced_low_0, three GPUs of 4000: per_gpu = 3236 // 2 + 750 = 2368 caps GPU 1; GPU 0 gets
// max(0, 3236 - (2368 + 4000)) = 0. With 0 - 400 on GPU 0 nothing fits: model splits, and
// embed_tokens (a leaf) moves on to GPU 1, which takes embed_tokens and layers.0-2 (2200 <=
// 2368); layers.3 (2800 > 2368) and the rest go to GPU 2.
TEST(Planner, BalancedLow0KeepsTheFirstAcceleratorFree) {
  const DevicePlan p = plan(tiny_llama(), "balanced_low_0", "0=4000,1=4000,2=4000,cpu=10000");
  EXPECT_EQ(map_of(p),
            "model.embed_tokens=1 model.layers.0=1 model.layers.1=1 model.layers.2=1 "
            "model.layers.3=2 model.norm=2 model.rotary_emb=2 lm_head=2");
  EXPECT_EQ(p.max_memory.str(), "0=0,1=2368,2=4000,cpu=10000");
}

// Tied, sequential, {0: 1000, cpu: 1300}; disk is appended. Model size 2836; lm_head holds 0 B.
// - model: the rescan after popping it sees only lm_head (0 B). model ties lm_head.weight in
//   lm_head: 2836 + 0 > 1000 and 2836 > 1000 alone: split; rescan: 600.
// - embed_tokens with lm_head: 400 + 0 <= 1000 - 600: both on GPU 0.
// - layers split; layers.0: 400 + 600 > 400: next. cpu (1300 - 600): layers.0; layers.1 does
//   not fit: disk takes layers.1-3, norm and rotary_emb.
TEST(Planner, TiedModulesGoTogetherAndOffloadReachesDisk) {
  const DevicePlan p = plan(tiny_llama(true), "sequential", "0=1000,cpu=1300");
  EXPECT_EQ(map_of(p),
            "model.embed_tokens=0 model.layers.0=cpu model.layers.1=disk model.layers.2=disk "
            "model.layers.3=disk model.norm=disk model.rotary_emb=disk lm_head=0");
  EXPECT_EQ(p.model_size, 2836u);
  ASSERT_EQ(p.placed.size(), 3u);
  EXPECT_EQ(p.placed[2].device.str(), "disk");
  EXPECT_EQ(p.placed[2].bytes, 3u * 600 + 36);
}

// Everything fits on GPU 0: the keys fold into {"": 0}.
TEST(Planner, OneDeviceFoldsToTheRoot) {
  EXPECT_EQ(map_of(plan(tiny_llama(), "sequential", "0=1GB,cpu=1GB")), "''=0");
  // No accelerator: cpu (the largest layer reserved there too).
  EXPECT_EQ(map_of(plan(tiny_llama(), "auto", "cpu=1GB")), "''=cpu");
  // max_memory={}: only disk is left.
  const DevicePlan p =
      backplane::plan_device_map(tiny_llama(), backplane::parse_device_map("auto"), PlanHardware{},
                                 {MaxMemory::from_map({}), std::nullopt});
  EXPECT_EQ(map_of(p), "''=disk");
}

// Only one key under a module is left as it is (Accelerate folds two or more).
TEST(Planner, CleanFoldsOnlyTwoOrMoreKeys) {
  // {0: 1000, 1: 3000, cpu}: embed on 0 (400 <= 400), the rest on GPU 1 -> layers fold.
  const DevicePlan p = plan(tiny_llama(), "sequential", "0=1000,1=3000,cpu=1GB");
  EXPECT_EQ(map_of(p),
            "model.embed_tokens=0 model.layers=1 model.norm=1 model.rotary_emb=1 lm_head=1");
}

TEST(Planner, DefaultMaxMemoryFromTheHardware) {
  PlanHardware one;
  one.accelerator_type = "cuda";
  one.accelerators = {{0, 10000, std::nullopt}};
  one.cpu_available = 20000;
  // from_pretrained: one accelerator and no max_memory: 90% of it; 90% of RAM for cpu.
  DevicePlan p = plan(tiny_llama(), "auto", "", PlanRules::kFromPretrained, std::nullopt, one);
  EXPECT_EQ(map_of(p), "''=0");
  EXPECT_EQ(p.max_memory.str(), "0=9000,cpu=18000");
  EXPECT_EQ(p.accelerator_type, "cuda");
  // Accelerate keeps all of the RAM; sequential never takes the 90%.
  p = plan(tiny_llama(), "auto", "", PlanRules::kAccelerate, std::nullopt, one);
  EXPECT_EQ(p.max_memory.str(), "0=9000,cpu=20000");
  p = plan(tiny_llama(), "sequential", "", PlanRules::kFromPretrained, std::nullopt, one);
  EXPECT_EQ(p.max_memory.str(), "0=10000,cpu=18000");

  // 0.9 x 3000 = 2700 leaves GPU 0 too small for the whole model.
  one.accelerators = {{0, 3000, std::nullopt}};
  p = plan(tiny_llama(), "auto", "", PlanRules::kFromPretrained, std::nullopt, one);
  EXPECT_EQ(p.max_memory.str(), "0=2700,cpu=18000");
  EXPECT_NE(map_of(p), "''=0");

  // A neuron-only machine: no accelerator auto may fill: cpu.
  PlanHardware neuron;
  neuron.cpu_available = 1 << 20;
  EXPECT_EQ(
      map_of(plan(tiny_llama(), "auto", "", PlanRules::kFromPretrained, std::nullopt, neuron)),
      "''=cpu");

  // Apple silicon: mps takes the RAM, and there is no cpu budget.
  PlanHardware mac;
  mac.accelerator_type = "mps";
  mac.accelerators = {{0, 0, std::nullopt}};
  mac.cpu_available = 1 << 20;
  p = plan(tiny_llama(), "auto", "", PlanRules::kFromPretrained, std::nullopt, mac);
  EXPECT_EQ(map_of(p), "''=mps");
  EXPECT_EQ(p.max_memory.str(), "mps=1048576");
}

PlanHardware four_gpus() {
  PlanHardware h;
  h.accelerator_type = "cuda";
  for (int i = 0; i < 4; ++i) h.accelerators.push_back({i, 1u << 30, std::nullopt});
  h.cpu_available = 1u << 30;
  return h;
}

TEST(Planner, DeviceAndIndexTakeEverything) {
  DevicePlan p =
      plan(tiny_llama(), "cuda:3", "0=1GB", PlanRules::kFromPretrained, std::nullopt, four_gpus());
  EXPECT_EQ(map_of(p), "''=cuda:3");
  ASSERT_EQ(p.placed.size(), 1u);
  EXPECT_EQ(p.placed[0].bytes, 3236u);
  EXPECT_EQ(p.placed[0].label, "cuda:3");
  p = plan(tiny_llama(), "2", "", PlanRules::kFromPretrained, std::nullopt, four_gpus());
  EXPECT_EQ(map_of(p), "''=2");
  EXPECT_EQ(p.placed[0].bytes, 3236u);
  EXPECT_EQ(p.placed[0].device.str(), "2");  // as hf_device_map holds it
  EXPECT_EQ(p.placed[0].label, "cuda:2");
}

TEST(Planner, DevicesTheHardwareLacksAreRefused) {
  const struct {
    const char* map;
    bool with_gpus;
    const char* message;
  } cases[] = {
      {"cuda:9", true,
       "device_map='cuda:9': 'cuda:9' does not exist; cuda has cuda:0, cuda:1, "
       "cuda:2, cuda:3"},
      {"99", true,
       "device_map='99': 'cuda:99' does not exist; cuda has cuda:0, cuda:1, cuda:2, "
       "cuda:3"},
      {R"({"": "cpu", "model.layers.0": 4})", true,
       "device_map entry 'model.layers.0': 'cuda:4' does not exist; cuda has cuda:0, cuda:1, "
       "cuda:2, cuda:3"},
      {"0", false,
       "device_map names accelerator 0, but there is no accelerator that automatic placement "
       "covers; name the device instead (e.g. 'cpu')"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.map);
    try {
      plan(tiny_llama(), c.map, "", PlanRules::kFromPretrained, std::nullopt,
           c.with_gpus ? four_gpus() : PlanHardware{});
      ADD_FAILURE() << "planned";
    } catch (const backplane::InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()), c.message);
    }
  }
}

TEST(Planner, ExplicitMapMustCoverEveryParameter) {
  const DevicePlan p = plan(tiny_llama(true), R"({"model": 0, "lm_head": "cpu"})", "",
                            PlanRules::kFromPretrained, std::nullopt, four_gpus());
  EXPECT_EQ(map_of(p), "model=0 lm_head=cpu");
  ASSERT_EQ(p.placed.size(), 2u);
  EXPECT_EQ(p.placed[0].bytes, 2836u);
  EXPECT_EQ(p.placed[1].bytes, 0u);
  try {
    plan(tiny_llama(), R"({"model.layers": 0, "lm_head": "cpu"})", "", PlanRules::kFromPretrained,
         std::nullopt, four_gpus());
    FAIL();
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()),
              "The device_map provided does not give any device for the following parameters: "
              "model.embed_tokens.weight, model.norm.weight; give their modules a device, or "
              "\"\" for everything the map does not name");
  }
  // A map that misses the whole model names the first five and counts the rest.
  try {
    plan(tiny_llama(), R"({"model.layerz.0": "cpu"})", "");
    FAIL();
  } catch (const backplane::InvalidArgument& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("parameters: model.embed_tokens.weight, "), std::string::npos) << what;
    EXPECT_NE(what.find(" more; "), std::string::npos) << what;
    EXPECT_LT(what.size(), 400u) << what;
  }
}

void retype(backplane::Module& module, DType dtype) {
  for (backplane::TensorInfo& t : module.tensors) {
    if (!t.buffer) t.dtype = dtype;
  }
  for (backplane::Module& child : module.children) retype(child, dtype);
}

TEST(Planner, AccelerateSizesWeightsAsLoadCheckpointConvertsThem) {
  // A bfloat16 model loaded with dtype=float32: its 805 parameters arrive as 4 bytes each, the
  // 8 float32 non-persistent buffer elements keep theirs. Accelerate's own override would count
  // the parameters at 2 bytes.
  backplane::ModelDescription bf16 = tiny_llama();
  retype(bf16.root, DType::kBFloat16);
  DevicePlan p = plan(bf16, "sequential", "cpu=1GB", PlanRules::kAccelerate, DType::kFloat32);
  EXPECT_EQ(p.model_size, 3236u);
  ASSERT_EQ(p.notes.size(), 1u);
  EXPECT_NE(p.notes[0].find("load_checkpoint_and_dispatch(dtype=float32) converts the weights to "
                            "float32 as it loads them"),
            std::string::npos)
      << p.notes[0];
  // Shrinking is Accelerate's own override: nothing to note; buffers shrink too.
  p = plan(tiny_llama(), "sequential", "cpu=1GB", PlanRules::kAccelerate, DType::kFloat16);
  EXPECT_EQ(p.model_size, 3220u / 2 + 8u);
  EXPECT_TRUE(p.notes.empty());
  // from_pretrained builds the model in the dtype: the same bytes, no note.
  p = plan(bf16, "sequential", "cpu=1GB", PlanRules::kFromPretrained, DType::kFloat32);
  EXPECT_EQ(p.model_size, 3236u);
  EXPECT_TRUE(p.notes.empty());
}

TEST(Planner, AMapKeyThatNamesNothingIsNoted) {
  const DevicePlan p = plan(tiny_llama(), R"({"": "cpu", "model.layerz.0": "cpu"})", "");
  EXPECT_EQ(p.notes, std::vector<std::string>{
                         "device_map entry 'model.layerz.0' names no module or parameter of the "
                         "model; transformers ignores it"});
  EXPECT_TRUE(plan(tiny_llama(), R"({"": "cpu", "model.layers.0": "cpu"})", "").notes.empty());
}

TEST(Planner, BalancedLow0NeedsAcceleratorsFromZero) {
  try {
    plan(tiny_llama(), "balanced_low_0", "1=4000,2=4000,cpu=10000");
    FAIL();
  } catch (const backplane::InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()),
              "balanced_low_0 needs accelerators 0 to 1 in max_memory (Accelerate reads them by "
              "index); 0 is missing");
  }
}

TEST(Planner, TiedNameOutsideTheModelIsRefused) {
  backplane::ModelDescription model = tiny_llama();
  model.tied_parameters = {{"head.weight", "model.embed_tokens.weight"}};
  EXPECT_THROW(plan(model, "auto", "cpu=1GB"), backplane::InvalidArgument);
}

// Accelerate and transformers part ways when a module fits alone but not with the module it
// is tied to, and that one cannot be split: Accelerate moves on to the next device,
// transformers splits the module. Tree: a (children y, x; 100 B each) and b (a leaf: its own v,
// 400 B, and w tied to a.x.w, counted under a.x). Total 600 B.
// GPU 0 keeps room for the largest layer, b (400): 700 - 400 = 300. a with b: 200 + 400 > 300;
// a alone fits (200 <= 300); b cannot be split.
// - Accelerate: a alone fits, so it is not split (200 < 300): next device; GPU 1 takes a and b.
// - transformers: a splits into y, x. y (100 <= 300) stays on GPU 0; x with b (500) does not
//   fit, x alone does, b cannot split, x cannot either: GPU 1 takes x and b.
TEST(Planner, TiedSplitDiffersBetweenRuleSets) {
  using planner_test::module;
  using planner_test::tensor;
  backplane::ModelDescription model;
  model.root = module(
      "", "Root", {},
      {module("a", "Block", {},
              {module("y", "L", {tensor("w", {25})}), module("x", "L", {tensor("w", {25})})}),
       module("b", "B", {tensor("v", {100})})});
  model.tied_parameters = {{"a.x.w", "b.w"}};
  EXPECT_EQ(map_of(plan(model, "sequential", "0=700,1=1000,cpu=1GB")), "a.y=0 a.x=1 b=1");
  EXPECT_EQ(map_of(plan(model, "sequential", "0=700,1=1000,cpu=1GB", PlanRules::kAccelerate)),
            "''=1");
}

}  // namespace
