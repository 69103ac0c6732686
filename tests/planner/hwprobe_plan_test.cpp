// hwprobe plan as a process: the JSON shape, plans on simulated machines, and bad input (exit 2,
// the message on stderr).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "process.hpp"

namespace {

using nlohmann::json;
using testing_support::ProcessResult;
using testing_support::run_process;

const std::string kLlama70b = BENCH_DATA "/llama-70b-config.json";
const std::string kMixtral = BENCH_DATA "/mixtral-8x22b-config.json";
const std::string kPlannerData = TEST_DATA;

ProcessResult hwprobe(std::vector<std::string> args,
                      const std::map<std::string, std::string>& launch = {}) {
  args.insert(args.begin(), {HWPROBE_PATH, "plan"});
  // The default plugin folder of the build tree; no topology or launcher from the caller's
  // environment.
  std::map<std::string, std::string> env = {{"BACKPLANE_PLUGIN_PATH", ""},
                                            {"BACKPLANE_SIM_TOPOLOGY", ""},
                                            {"CUDA_VISIBLE_DEVICES", ""},
                                            {"BACKPLANE_PLUGINS", ""},
                                            {"RANK", ""},
                                            {"LOCAL_RANK", ""},
                                            {"WORLD_SIZE", ""}};
  for (const auto& [name, value] : launch) env[name] = value;
  return run_process(args, env);
}

json plan_json(std::vector<std::string> args) {
  args.push_back("--json");
  const ProcessResult r = hwprobe(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

// A one-layer Llama config in a temporary folder.
class TinyConfig {
 public:
  TinyConfig() {
    dir_ = std::filesystem::temp_directory_path() / ("hwprobe-plan-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    std::ofstream(path()) << R"({"model_type": "llama", "architectures": ["LlamaForCausalLM"],
      "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
      "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 1000,
      "dtype": "bfloat16"})";
  }
  ~TinyConfig() { std::filesystem::remove_all(dir_); }
  std::string path() const { return (dir_ / "config.json").string(); }

 private:
  std::filesystem::path dir_;
};

// A safetensors file of float32 tensors (zeros) with these names and shapes.
void write_f32_safetensors(const std::filesystem::path& path,
                           const std::vector<std::pair<std::string, std::vector<int>>>& tensors) {
  json header = json::object();
  size_t offset = 0;
  for (const auto& [name, shape] : tensors) {
    size_t bytes = 4;
    for (int d : shape) bytes *= static_cast<size_t>(d);
    header[name] = {{"dtype", "F32"}, {"shape", shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  const std::string text = header.dump();
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((text.size() >> (8 * i)) & 0xff);
  file += text + std::string(offset, '\0');
  std::ofstream(path.string(), std::ios::binary) << file;
}

TEST(HwprobePlan, AutoOnEightSimulatedH100s) {
  const json j = plan_json({"--config", kLlama70b, "--device-map", "auto", "--sim", "h100x8"});
  ASSERT_TRUE(j.at("device_map").is_object());
  // 80 layers + embed_tokens, norm, rotary_emb, lm_head: layers are split over the GPUs, so no
  // parent folds.
  EXPECT_EQ(j["device_map"].size(), 84u);
  // 70.55 G bf16 parameters and RoPE's two float32 buffers of 64.
  EXPECT_EQ(j.at("model_size"), 141107413504ull);
  EXPECT_EQ(j.at("accelerator_type"), "cuda");
  std::set<int> gpus;
  for (const auto& [name, device] : j["device_map"].items()) {
    ASSERT_TRUE(device.is_number_integer()) << name << " went to " << device;
    gpus.insert(device.get<int>());
  }
  EXPECT_EQ(gpus, (std::set<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(j["device_map"]["model.embed_tokens"], 0);
  EXPECT_EQ(j["device_map"]["lm_head"], 7);
  // Balanced: every GPU but the last capped near model_size / 8; the last keeps all of its
  // memory (simulated devices cannot tell free memory: their total, 81559 MiB).
  const json& budgets = j.at("max_memory");
  EXPECT_EQ(budgets.at("7"), 81559ull << 20);
  EXPECT_LT(budgets.at("0").get<uint64_t>(), 20ull << 30);
  EXPECT_TRUE(budgets.contains("cpu"));
}

// Derived by hand, and what transformers gives: GPU 0 keeps room for the largest layer
// (embed_tokens / lm_head, 2101346304 B): 40 GiB - that leaves embed_tokens + 22 layers of
// 1711308800 B; GPU 1 takes 25 layers (25 x 1711308800 <= 40 GiB); cpu the rest.
TEST(HwprobePlan, AModelWordIsTheFileItNames) {
  const std::vector<std::string> rest = {"--device-map", "auto", "--sim", "h100x8"};
  std::vector<std::string> by_word = {kLlama70b};
  std::vector<std::string> by_alias = {"--config", kLlama70b};
  by_word.insert(by_word.end(), rest.begin(), rest.end());
  by_alias.insert(by_alias.end(), rest.begin(), rest.end());
  const json word = plan_json(by_word);
  EXPECT_EQ(word.at("device_map"), plan_json(by_alias).at("device_map"));
  EXPECT_EQ(word.at("model").at("kind"), "config");
  EXPECT_FALSE(word.at("model").contains("hub_id"));
}

TEST(HwprobePlan, SequentialWithMaxMemory) {
  const json j = plan_json({"--config", kLlama70b, "--device-map", "sequential", "--max-memory",
                            "0=40GiB,1=40GiB,cpu=200GiB", "--sim", "h100x8"});
  const json& map = j.at("device_map");
  EXPECT_EQ(map.at("model.embed_tokens"), 0);
  EXPECT_EQ(map.at("model.layers.21"), 0);
  EXPECT_EQ(map.at("model.layers.22"), 1);
  EXPECT_EQ(map.at("model.layers.46"), 1);
  EXPECT_EQ(map.at("model.layers.47"), "cpu");
  EXPECT_EQ(map.at("lm_head"), "cpu");
  EXPECT_EQ(j.at("max_memory"), json::parse(R"({"0": 42949672960, "1": 42949672960,
                                                "cpu": 214748364800})"));
}

TEST(HwprobePlan, DeviceStringIndexAndDtype) {
  json j = plan_json({"--config", kLlama70b, "--device-map", "cuda:3", "--sim", "h100x8"});
  EXPECT_EQ(j.at("device_map"), json::parse(R"({"": "cuda:3"})"));
  j = plan_json({"--config", kLlama70b, "--device-map", "5", "--sim", "h100x8"});
  EXPECT_EQ(j.at("device_map"), json::parse(R"({"": 5})"));
  // float32 doubles the parameters; the float32 buffers stay 512 B.
  j = plan_json(
      {"--config", kLlama70b, "--device-map", "cuda:0", "--dtype", "float32", "--sim", "h100x8"});
  EXPECT_EQ(j.at("model_size"), 2 * (141107413504ull - 512) + 512);
  EXPECT_EQ(j.at("placed")[0].at("label"), "cuda:0");
  EXPECT_EQ(j.at("notes"), json::array());
}

TEST(HwprobePlan, AnExplicitMapLabelsWhatItsEmptyKeyTakes) {
  const TinyConfig config;
  ProcessResult r = hwprobe({"--config", config.path(), "--device-map",
                             R"({"": "cpu", "model.layers.0": 0})", "--sim", "h100x8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("cpu     "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(the rest of the model)\n"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("(whole model)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cuda:0  "), std::string::npos) << r.out;
  r = hwprobe({"--config", config.path(), "--device-map", "cpu"});
  EXPECT_NE(r.out.find("(whole model)\n"), std::string::npos) << r.out;
  // A key that names nothing: planned (transformers ignores it), and said.
  r = hwprobe(
      {"--config", config.path(), "--device-map", R"({"": "cpu", "model.layerz.0": "cpu"})"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("note: device_map entry 'model.layerz.0' names no module or parameter of "
                       "the model; transformers ignores it"),
            std::string::npos)
      << r.out;
}

TEST(HwprobePlan, TinyBudgetsWarnNamingTheKey) {
  const TinyConfig config;
  const ProcessResult r =
      hwprobe({"--config", config.path(), "--device-map", "sequential", "--max-memory", "cpu=30"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("hwprobe: warning: --max-memory cpu=30: 30 bytes is less than 1 MiB; a "
                       "size without a unit counts bytes (write 30GiB or 30GB for gigabytes)"),
            std::string::npos)
      << r.err;
}

TEST(HwprobePlan, AccelerateSizesAHalfPrecisionModelAsLoadedInFloat32) {
  const TinyConfig config;  // bfloat16
  const json half = plan_json({"--config", config.path(), "--device-map", "sequential", "--rules",
                               "accelerate", "--max-memory", "cpu=1GB"});
  const json full = plan_json({"--config", config.path(), "--device-map", "sequential", "--rules",
                               "accelerate", "--dtype", "float32", "--max-memory", "cpu=1GB"});
  // Parameters double; the float32 RoPE buffers (non-persistent) do not.
  EXPECT_GT(full.at("model_size").get<uint64_t>(),
            2 * half.at("model_size").get<uint64_t>() - 1024);
  ASSERT_EQ(full.at("notes").size(), 1u);
  EXPECT_NE(
      full.at("notes")[0].get<std::string>().find("load_checkpoint_and_dispatch(dtype=float32)"),
      std::string::npos);
}

TEST(HwprobePlan, NeuronIsNeverFilledByAuto) {
  const TinyConfig config;
  const json j =
      plan_json({"--config", config.path(), "--device-map", "auto", "--sim", "trn1-32xlarge"});
  EXPECT_EQ(j.at("device_map"), json::parse(R"({"": "cpu"})"));
  EXPECT_TRUE(j.at("accelerator_type").is_null());
  EXPECT_FALSE(j.at("max_memory").contains("0"));
}

// --weights: a safetensors file without a config beside it (the tree rebuilt from its names).
TEST(HwprobePlan, FromSafetensorsWeights) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("hwprobe-plan-weights-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::vector<std::pair<std::string, std::vector<int>>> tensors = {
      {"lm_head.weight", {16, 4}},
      {"model.embed_tokens.weight", {16, 4}},
      {"model.layers.0.mlp.gate_proj.weight", {8, 4}},
      {"model.layers.1.mlp.gate_proj.weight", {8, 4}},
      {"model.norm.weight", {4}}};
  write_f32_safetensors(dir / "model.safetensors", tensors);

  const json j = plan_json({"--weights", (dir / "model.safetensors").string(), "--device-map",
                            "sequential", "--max-memory", "0=1MB,cpu=1MB"});
  std::filesystem::remove_all(dir);
  EXPECT_EQ(j.at("model_size"), 4u * (64 + 64 + 32 + 32 + 4));
  EXPECT_EQ(j.at("device_map"), json::parse(R"({"": 0})"));
}

TEST(HwprobePlan, ATreeFilePlansExactlyAndWeightsAloneSayTheyAreApproximate) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("hwprobe-plan-exact-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  // A tree file as tools/export-module-tree writes one: two blocks and a head.
  std::ofstream(dir / "tree.json") << R"({"format": "backplane-module-tree", "version": 1,
    "architecture": "ToyForCausalLM", "model_type": "toy", "dtype": "float32",
    "modules": [["", "ToyForCausalLM"], ["blocks", "ModuleList"], ["blocks.0", "ToyBlock"],
                ["blocks.1", "ToyBlock"], ["head", "Linear"]],
    "parameters": [["blocks.0.w", [1024, 256], "float32"], ["blocks.1.w", [1024, 256], "float32"],
                   ["head.weight", [64, 256], "float32"]],
    "buffers": [], "no_split_modules": ["ToyBlock"], "tied": [], "tp_plan": []})";
  json j = plan_json({"--tree", (dir / "tree.json").string(), "--device-map", "sequential",
                      "--max-memory", "0=2200KiB,cpu=10MiB", "--sim", "h100x8"});
  EXPECT_EQ(j.at("exact"), true);
  EXPECT_EQ(j.at("approximate_because"), json::array());
  EXPECT_EQ(j.at("device_map"), json::parse(R"({"": 0})"));
  EXPECT_EQ(j.at("model_size"), 4 * (2 * 1024 * 256 + 64 * 256));

  // The same shapes as bare weights: planned, but approximate, and --exact refuses it.
  const std::vector<std::pair<std::string, std::vector<int>>> tensors = {
      {"blocks.0.w", {1024, 256}}, {"blocks.1.w", {1024, 256}}, {"head.weight", {64, 256}}};
  write_f32_safetensors(dir / "model.safetensors", tensors);
  const std::vector<std::string> weights = {"--weights",    (dir / "model.safetensors").string(),
                                            "--device-map", "sequential",
                                            "--max-memory", "0=2200KiB,cpu=10MiB",
                                            "--sim",        "h100x8"};
  ProcessResult r = hwprobe([&] {
    auto a = weights;
    a.push_back("--json");
    return a;
  }());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  j = json::parse(r.out);
  EXPECT_EQ(j.at("exact"), false);
  ASSERT_GE(j.at("approximate_because").size(), 2u);
  EXPECT_NE(r.err.find("hwprobe: warning: this plan is approximate"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("the numbered blocks of blocks are kept whole"), std::string::npos) << r.err;
  r = hwprobe([&] {
    auto a = weights;
    a.push_back("--exact");
    return a;
  }());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("--exact: the plan would be approximate"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("tools/export-module-tree"), std::string::npos) << r.err;
  std::filesystem::remove_all(dir);
}

// Mixtral is described by its architecture descriptor (core/src/model/architectures/): its
// plan is exact, and its decoder layers are kept whole.
TEST(HwprobePlan, ADescribedArchitecturePlansExactly) {
  const json j = plan_json({kMixtral, "--device-map", "auto", "--sim", "h100x8"});
  EXPECT_EQ(j.at("exact"), true);
  EXPECT_EQ(j.at("approximate_because"), json::array());
  EXPECT_EQ(j.at("architecture"), "MixtralForCausalLM");
  // 56 layers of 8 experts (fused gate_up_proj and down_proj) in bf16: about 281 GB.
  EXPECT_GT(j.at("model_size").get<uint64_t>(), 280'000'000'000u);
  EXPECT_LT(j.at("model_size").get<uint64_t>(), 283'000'000'000u);
  for (const auto& [name, device] : j.at("device_map").items()) {
    EXPECT_EQ(name.find(".mlp"), std::string::npos) << name << ": a layer was split";
  }
}

TEST(HwprobePlan, ReadableFormShowsDevicesAndOffload) {
  const ProcessResult r = hwprobe({"--config", kLlama70b, "--device-map", "sequential",
                                   "--max-memory", "0=40GiB,1=40GiB,cpu=30GiB", "--sim", "h100x8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("cuda:0  "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model.embed_tokens, model.layers.0-21"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("model.layers.22-46"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("offloaded: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" to disk"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" to cpu"), std::string::npos) << r.out;
}

TEST(HwprobePlan, TensorParallelPlan) {
  const json j = plan_json({"--config", kLlama70b, "--tp-size", "8"});
  ASSERT_EQ(j.at("per_rank_bytes").size(), 8u);
  EXPECT_EQ(j["per_rank_bytes"][0], j["per_rank_bytes"][7]);
  EXPECT_EQ(j.at("tp_plan").at("model.layers.0.self_attn.q_proj"), "colwise");
  EXPECT_EQ(j.at("tp_plan").at("model.layers.79.mlp.down_proj"), "rowwise");
  // Each rank holds about an eighth of the 141 GB.
  EXPECT_LT(j["per_rank_bytes"][0].get<uint64_t>(), 141107413504ull / 8 + (1ull << 30));
}

TEST(HwprobePlan, EachTorchrunRankLearnsItsDeviceAndShards) {
  const std::map<std::string, std::string> rank2 = {
      {"RANK", "2"}, {"LOCAL_RANK", "2"}, {"WORLD_SIZE", "8"}};
  const ProcessResult r =
      hwprobe({"--config", kLlama70b, "--tp-size", "8", "--sim", "h100x8", "--json"}, rank2);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  const json& rank = j.at("this_rank");
  EXPECT_EQ(rank.at("rank"), 2);
  EXPECT_EQ(rank.at("device"), "cuda:2");
  EXPECT_EQ(rank.at("collective_backend"), "nccl");
  EXPECT_EQ(rank.at("bytes"), j["per_rank_bytes"][2]);
  // 64 heads x 128 over 8 ranks: 1024 rows of q_proj; the vocabulary split 128256 / 8.
  EXPECT_EQ(rank.at("shards").at("model.layers.0.self_attn.q_proj.weight"),
            (std::vector<int64_t>{1024, 8192}));
  EXPECT_EQ(rank.at("shards").at("model.embed_tokens.weight"), (std::vector<int64_t>{16032, 8192}));

  // Not launched: no rank. A rank beyond the plan: refused.
  EXPECT_TRUE(plan_json({"--config", kLlama70b, "--tp-size", "8"}).at("this_rank").is_null());
  const ProcessResult outside =
      hwprobe({"--config", kLlama70b, "--tp-size", "4", "--sim", "h100x8"},
              {{"RANK", "5"}, {"LOCAL_RANK", "5"}, {"WORLD_SIZE", "8"}});
  EXPECT_EQ(outside.exit_code, 2);
  EXPECT_NE(outside.err.find("rank 5 is outside --tp-size 4"), std::string::npos) << outside.err;
}

// The seed's question, "does it fit in 4-bit?": Llama-70B quantized on load by bitsandbytes
// takes a quarter of its bfloat16 size, every Linear but lm_head swapped, budgets at 90%.
TEST(HwprobePlan, QuantizeOnLoadSwapsTheLinearsAndShrinksTheModel) {
  const json plan = plan_json(
      {"--config", kLlama70b, "--device-map", "auto", "--quantize", "bnb-4bit", "--sim", "h100x8"});
  const json& q = plan.at("quantization");
  EXPECT_EQ(q.at("method"), "bitsandbytes_4bit");
  EXPECT_EQ(q.at("pre_quantized"), false);
  EXPECT_EQ(q.at("replaced_modules"), 80 * 7);  // q, k, v, o, gate, up, down in 80 layers
  EXPECT_EQ(q.at("replaced_with"), "Linear4bit");
  EXPECT_EQ(q.at("modules_to_not_convert"), json::array({"lm_head"}));
  EXPECT_DOUBLE_EQ(q.at("max_memory_factor").get<double>(), 0.9);
  const auto size = plan.at("model_size").get<uint64_t>();
  const auto unquantized = q.at("unquantized_size").get<uint64_t>();
  EXPECT_LT(size, unquantized / 3);
  EXPECT_GT(size, unquantized / 4);  // embeddings, norms and lm_head stay in bfloat16
  for (const auto& [name, device] : plan.at("device_map").items()) {
    EXPECT_TRUE(device.is_number_integer()) << name << ": " << device;  // all on GPUs
  }
  const ProcessResult text = hwprobe(
      {"--config", kLlama70b, "--device-map", "auto", "--quantize", "bnb-4bit", "--sim", "h100x8"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("quantization: bitsandbytes_4bit (on load), 560 modules -> Linear4bit"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("kept in full precision: lm_head"), std::string::npos) << text.out;
}

// Quantizing on load without room on the GPUs: bitsandbytes refuses the map it would make.
TEST(HwprobePlan, QuantizedWeightsOffloadedAreRefusedInTransformersWords) {
  const ProcessResult r =
      hwprobe({"--config", kLlama70b, "--device-map", "auto", "--quantize", "bnb-8bit",
               "--max-memory", "0=20GiB,cpu=200GiB", "--sim", "h100x8"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("Some modules are dispatched on the CPU or the disk. Make sure you have "
                       "enough GPU RAM to fit the quantized model."),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("llm_int8_enable_fp32_cpu_offload=True"), std::string::npos) << r.err;
}

// hwprobe quant: the same rules per device of a simulated machine.
TEST(HwprobeQuant, EachDeviceSaysWhichMethodsLoadAndWhy) {
  const ProcessResult r = run_process({HWPROBE_PATH, "quant", "--sim", "h100x8", "--json"},
                                      {{"BACKPLANE_PLUGIN_PATH", ""}, {"BACKPLANE_PLUGINS", ""}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out);
  EXPECT_EQ(out.at("accelerator"), "cuda");
  std::map<std::string, json> by_device;
  for (const json& d : out.at("devices")) by_device[d.at("device")] = d;
  ASSERT_EQ(by_device.count("cuda:7"), 1u);
  ASSERT_EQ(by_device.count("cpu:0"), 1u);
  EXPECT_EQ(by_device["cuda:7"].at("compute_capability"), "9.0");
  EXPECT_TRUE(by_device["cpu:0"].at("offload").get<bool>());
  std::map<std::string, json> gpu;
  for (const json& m : by_device["cuda:7"].at("methods")) gpu[m.at("method")] = m;
  EXPECT_EQ(gpu["fp8"].at("on_load"), "loads");
  EXPECT_EQ(gpu["awq"].at("on_load"), "refused");
  EXPECT_EQ(gpu["awq"].at("pre_quantized"), "loads");
  EXPECT_TRUE(gpu["bitsandbytes_4bit"].at("planned").get<bool>());
  EXPECT_TRUE(gpu["mxfp4"].at("planned").get<bool>());
  std::map<std::string, json> cpu;
  for (const json& m : by_device["cpu:0"].at("methods")) cpu[m.at("method")] = m;
  EXPECT_EQ(cpu["bitsandbytes_8bit"].at("on_load"), "refused");
  EXPECT_EQ(cpu["fp8"].at("pre_quantized"), "loads");

  const ProcessResult all = run_process({HWPROBE_PATH, "quant", "--sim", "h100x8"},
                                        {{"BACKPLANE_PLUGIN_PATH", ""}, {"BACKPLANE_PLUGINS", ""}});
  ASSERT_EQ(all.exit_code, 0) << all.err;
  // The eight alike GPUs share one table.
  EXPECT_NE(all.out.find("cuda:0-7 (NVIDIA H100 80GB HBM3, compute capability 9.0)"),
            std::string::npos)
      << all.out;

  const ProcessResult one = run_process(
      {HWPROBE_PATH, "quant", "--sim", kPlannerData + "/cpu-only-topology.json", "--device", "cpu"},
      {{"BACKPLANE_PLUGIN_PATH", ""}, {"BACKPLANE_PLUGINS", ""}});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.out.find("METHOD              ON LOAD      PRE-QUANTIZED  PLANNED  WHY"),
            std::string::npos)
      << one.out;
  EXPECT_NE(one.out.find("fp8                 refused      dequantized    yes"), std::string::npos)
      << one.out;

  const ProcessResult absent =
      run_process({HWPROBE_PATH, "quant", "--sim", "h100x8", "--device", "cuda:8"},
                  {{"BACKPLANE_PLUGIN_PATH", ""}});
  EXPECT_EQ(absent.exit_code, 2);
  EXPECT_TRUE(absent.out.empty()) << absent.out;
  EXPECT_NE(absent.err.find("cuda:8"), std::string::npos) << absent.err;
}

struct BadInput {
  std::vector<std::string> args;
  const char* message;  // a part of stderr
};

// Test names show the arguments after the config.
void PrintTo(const BadInput& b, std::ostream* os) {
  for (size_t i = 0; i < b.args.size(); ++i) {
    if (b.args[i] == kLlama70b) continue;
    *os << (i == 0 ? "" : " ") << b.args[i];
  }
}

class HwprobePlanBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(HwprobePlanBadInput, ExitsTwoWithTheMessage) {
  const ProcessResult r = hwprobe(GetParam().args);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find(GetParam().message), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    Table, HwprobePlanBadInput,
    ::testing::Values(
        BadInput{{"--config", kLlama70b, "--device-map", "auto", "--max-memory", "gpu0=1GB"},
                 "--max-memory gpu0=1GB: Device gpu0 is not recognized, available devices are "
                 "integers(for GPU/XPU), "
                 "'mps', 'cpu' and 'disk'"},
        BadInput{{"--config", kLlama70b, "--device-map", "auto", "--max-memory", "disk=1TB"},
                 "--max-memory disk=1TB: `size` 1TB is not in a valid format. Use an integer for "
                 "bytes, or a string with an unit (like '5.0GB'). (Accelerate's sizes stop at "
                 "GB: write 1000GB, or 931GiB)"},
        BadInput{{"--config", kLlama70b, "--device-map", "cuda:9", "--sim", "h100x8"},
                 "device_map='cuda:9': 'cuda:9' does not exist; cuda has cuda:0, cuda:1, cuda:2, "
                 "cuda:3, cuda:4, cuda:5, cuda:6, cuda:7"},
        BadInput{{"--config", kLlama70b, "--device-map", "99", "--sim", "h100x8"},
                 "device_map='99': 'cuda:99' does not exist; cuda has cuda:0"},
        BadInput{{"--config", kLlama70b, "--device-map", R"({"": "cpu", "lm_head": 8})", "--sim",
                  "h100x8"},
                 "device_map entry 'lm_head': 'cuda:8' does not exist"},
        BadInput{
            {"--config", kLlama70b, "--device-map", R"({"model.layerz": 0})", "--sim", "h100x8"},
            "The device_map provided does not give any device for the following parameters: "
            "model.embed_tokens.weight, "},
        BadInput{{"--config", kLlama70b, "--device-map", "automatic"},
                 "When passing device_map as a string, the value needs to be a device name (e.g. "
                 "cpu, cuda:0) or 'auto', 'balanced', 'balanced_low_0', 'sequential' but found "
                 "automatic."},
        BadInput{{"--config", kLlama70b, "--device-map", "-1"},
                 "You can't pass device_map as a negative int."},
        BadInput{{"--config", kLlama70b, "--device-map", "auto", "--dtype", "int8"},
                 "--dtype int8: expected bfloat16, float16 or float32"},
        BadInput{{"--config", kLlama70b, "--device-map", "auto", "--tp-size", "2"},
                 "Tensor parallelism and `device_map` are mutually exclusive."},
        BadInput{{"--config", kLlama70b, "--weights", "x.safetensors", "--device-map", "auto"},
                 "give one MODEL (a folder, config.json, .safetensors file, index, module tree "
                 "file or Hub id org/name[@revision]), or one of --config FILE"},
        BadInput{{kLlama70b, "--config", kLlama70b, "--device-map", "auto"}, "give one MODEL"},
        BadInput{{kLlama70b, kLlama70b, "--device-map", "auto"}, "give one MODEL"},
        BadInput{{"tests-org/surely-not-cached", "--device-map", "auto"},
                 "models--tests-org--surely-not-cached"},
        BadInput{{"not/a/hub/id", "--device-map", "auto"},
                 "'not/a/hub/id' is no file or folder, and not a Hub id"},
        BadInput{{"--config", kLlama70b}, "give --device-map VALUE (or --tp-size N)"},
        // An architecture no descriptor has: the nearest names, and the tool for any.
        BadInput{{kPlannerData + "/unknown-architecture-config.json", "--device-map", "auto"},
                 "model_type 'mixtrall' is not described here"},
        BadInput{{kPlannerData + "/unknown-architecture-config.json", "--device-map", "auto"},
                 "nearest: mixtral"},
        BadInput{{kPlannerData + "/unknown-architecture-config.json", "--device-map", "auto"},
                 "tools/export-module-tree"},
        // A field the architecture needs, left null: the field and the architecture.
        BadInput{{kPlannerData + "/gpt2-null-width-config.json", "--device-map", "auto"},
                 "`n_embd` is null; GPT2LMHeadModel's config types it int"},
        BadInput{{"--config", "/nonexistent/config.json", "--device-map", "auto"},
                 "/nonexistent/config.json"},
        BadInput{{"--config", kLlama70b, "--device-map", "auto", "--bogus"},
                 "unrecognised option '--bogus'"},
        // Quantization: an unknown method names the accepted ones; contradictory bitsandbytes
        // flags and a GPU-only method without a GPU get transformers' errors.
        BadInput{{"--config", kLlama70b, "--device-map", "auto", "--quantize", "int4"},
                 "--quantize int4: expected bnb-4bit, bnb-8bit or fp8"},
        BadInput{{kPlannerData + "/bnb-both-bits-config.json", "--device-map", "auto"},
                 "load_in_4bit and load_in_8bit are both True, but only one can be used at the "
                 "same time"},
        BadInput{{"--config", kLlama70b, "--device-map", "auto", "--quantize", "fp8", "--sim",
                  kPlannerData + "/cpu-only-topology.json"},
                 "No GPU or XPU found. A GPU or XPU is needed for FP8 quantization."},
        BadInput{{"--config", kLlama70b, "--tp-size", "2", "--quantize", "bnb-4bit"},
                 "tensor-parallel plans of a model quantized with bitsandbytes_4bit are not "
                 "described here"},
        BadInput{{"--config", kLlama70b, "--device-map", "auto", "--quantize", "bnb-4bit",
                  "--rules", "accelerate", "--sim", "h100x8"},
                 "the accelerate rules (load_checkpoint_and_dispatch) have no quantizer"}));

}  // namespace
