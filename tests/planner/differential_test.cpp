// The differential test of device_map planning: tests/python/device_map_oracle.py asks the
// pinned transformers and Accelerate where each module goes, for four architectures x generated
// configs x max_memory budgets x dtypes x strategies; this test plans every case again and
// requires the same hf_device_map, module by module, and the same budgets.
//
// Each model is planned twice: from the module tree torch built (exported by the oracle), and
// from model_from_config on the same config.json (the path hwprobe plan takes).
//
// One difference is expected and counted: with a "disk" key in max_memory, Accelerate's own
// get_balanced_memory raises (it resolves every key with torch.device, and "disk" is none);
// the planner counts disk out and plans.
//
// The "accelerate-loaded" cases (a half-precision model, dtype=float32) are compared with
// Accelerate's planning of the model as load_checkpoint_in_model leaves it (weights converted to
// float32). Accelerate's own map for those ("accelerate_own") sizes the weights at their half
// precision and overfills; the test counts where the two differ and requires the plan to say
// so in its notes.
#include <backplane/error.hpp>
#include <backplane/model/device_map.hpp>
#include <backplane/model/model.hpp>
#include <backplane/model/model_source.hpp>
#include <backplane/rules/selection.hpp>

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace {

using nlohmann::json;

json read_oracle(const char* variable) {
  const char* path = std::getenv(variable);
  if (path == nullptr) throw std::runtime_error(std::string(variable) + " is not set");
  std::ifstream in(path);
  if (!in) throw std::runtime_error(std::string("cannot read ") + path);
  return json::parse(in);
}

const json& oracle() {
  static const json data = read_oracle("BACKPLANE_DEVICE_MAP_ORACLE");
  return data;
}

// The torch module tree (named_modules() order, full names) back into nested Modules.
backplane::Module build_module(const json& entries, size_t& i, const std::string& prefix) {
  const json& entry = entries[i];
  backplane::Module module;
  const std::string name = entry[0].get<std::string>();
  module.name = name.empty()
                    ? ""
                    : name.substr(name.rfind('.') == std::string::npos ? 0 : name.rfind('.') + 1);
  module.class_name = entry[1].get<std::string>();
  for (const json& t : entry[2]) {
    backplane::TensorInfo tensor;
    tensor.name = t[0].get<std::string>();
    tensor.shape = t[1].get<std::vector<int64_t>>();
    tensor.dtype = backplane::parse_dtype(t[2].get<std::string>());
    tensor.buffer = t[3].get<bool>();
    tensor.persistent = t[4].get<bool>();
    module.tensors.push_back(std::move(tensor));
  }
  ++i;
  const std::string child_prefix = name.empty() ? "" : name + ".";
  while (i < entries.size()) {
    const std::string next = entries[i][0].get<std::string>();
    if (next.compare(0, child_prefix.size(), child_prefix) != 0 || next == name) break;
    module.children.push_back(build_module(entries, i, child_prefix));
  }
  (void)prefix;
  return module;
}

backplane::ModelDescription from_tree(const json& model) {
  backplane::ModelDescription description;
  const json& config = model.at("config");
  description.architecture = config.at("architectures")[0].get<std::string>();
  description.model_type = config.at("model_type").get<std::string>();
  description.dtype = backplane::parse_dtype(config.at("dtype").get<std::string>());
  size_t i = 0;
  description.root = build_module(model.at("tree"), i, "");
  description.no_split_module_classes = model.at("no_split").get<std::vector<std::string>>();
  description.tied_parameters = model.at("tied").get<std::vector<std::vector<std::string>>>();
  return description;
}

std::string python_device(const json& v) {
  return v.is_number_integer() ? std::to_string(v.get<int64_t>()) : v.get<std::string>();
}

struct Outcome {
  int compared = 0;
  int errors_matched = 0;
  int documented_differences = 0;
  int loaded_cases = 0;          // a half-precision model planned with dtype=float32
  int accelerate_overfills = 0;  // of those, where Accelerate's own map differs from the plan
  std::vector<std::string> mismatches;
  std::set<std::string> models, strategies, budgets, dtypes;
};

std::string describe(const json& c) {
  std::ostringstream out;
  out << c.at("model").get<std::string>() << " rules=" << c.at("rules").get<std::string>()
      << " strategy=" << c.at("strategy").get<std::string>()
      << " budget=" << c.at("budget").get<std::string>() << " dtype=" << c.at("dtype").dump();
  return out.str();
}

void run_case(const json& c, const backplane::ModelDescription& model, Outcome& outcome) {
  const backplane::PlanRules rules = c.at("rules") == "accelerate"
                                         ? backplane::PlanRules::kAccelerate
                                         : backplane::PlanRules::kFromPretrained;
  std::optional<backplane::MaxMemory> max_memory;
  if (!c.at("max_memory").is_null()) {
    std::vector<std::pair<std::string, std::string>> entries;
    for (const json& e : c.at("max_memory")) {
      entries.emplace_back(e[0].get<std::string>(), std::to_string(e[1].get<uint64_t>()));
    }
    max_memory = backplane::MaxMemory::from_map(entries);
  }
  // Given budgets: the oracle machine has no accelerator of its own; torch's int keys are cuda.
  backplane::PlanHardware hardware;
  hardware.accelerator_type = "cuda";
  if (!c.at("hardware").is_null()) {
    const json& h = c.at("hardware");
    hardware.accelerator_type = h.at("type").get<std::string>();
    int index = 0;
    for (const json& free : h.at("accelerators")) {
      hardware.accelerators.push_back({index++, free.get<uint64_t>(), std::nullopt});
    }
    hardware.cpu_available = h.at("cpu").get<uint64_t>();
  }
  std::optional<backplane::DType> dtype;
  if (!c.at("dtype").is_null()) dtype = backplane::parse_dtype(c.at("dtype").get<std::string>());
  const backplane::PlanStrategy strategy =
      backplane::parse_device_map(c.at("strategy").get<std::string>());

  const json& expected = c.at("expected");
  ++outcome.compared;
  outcome.models.insert(c.at("model").get<std::string>());
  outcome.strategies.insert(c.at("rules").get<std::string>() + ":" +
                            c.at("strategy").get<std::string>());
  const std::string budget = c.at("budget").get<std::string>();
  outcome.budgets.insert(budget.substr(0, budget.find("-x")));  // "4-gpus-x1.37" -> "4-gpus"
  outcome.dtypes.insert(c.at("dtype").dump());
  if (expected.contains("error")) {
    const std::string error = expected.at("error").get<std::string>();
    const bool disk_key_crash = error.rfind("RuntimeError: Expected one of", 0) == 0;
    try {
      backplane::plan_device_map(model, strategy, hardware, {max_memory, dtype, rules});
      if (disk_key_crash) {
        ++outcome.documented_differences;
      } else {
        outcome.mismatches.push_back(describe(c) + ": Python raised " + error +
                                     ", the planner did not");
      }
    } catch (const backplane::InvalidArgument& e) {
      if (disk_key_crash) {
        outcome.mismatches.push_back(describe(c) + ": planner raised " + e.what());
      } else {
        ++outcome.errors_matched;
      }
    }
    return;
  }
  backplane::DevicePlan plan;
  try {
    plan = backplane::plan_device_map(model, strategy, hardware, {max_memory, dtype, rules});
  } catch (const std::exception& e) {
    outcome.mismatches.push_back(describe(c) + ": planner raised " + e.what());
    return;
  }
  std::map<std::string, std::string> want;
  for (const json& e : expected.at("device_map"))
    want[e[0].get<std::string>()] = python_device(e[1]);
  std::map<std::string, std::string> got;
  for (const auto& [name, target] : plan.device_map) got[name] = target.str();
  if (c.contains("accelerate_own")) {
    ++outcome.loaded_cases;
    if (plan.notes.empty()) outcome.mismatches.push_back(describe(c) + ": no note on the upcast");
    const json& own = c.at("accelerate_own");
    std::map<std::string, std::string> own_map;
    if (own.contains("device_map")) {
      for (const json& e : own.at("device_map"))
        own_map[e[0].get<std::string>()] = python_device(e[1]);
    }
    if (own_map != want) ++outcome.accelerate_overfills;
  }
  if (want != got) {
    std::string text = describe(c) + "\n    expected:";
    for (const auto& [k, v] : want) text += " " + k + "=" + v;
    text += "\n    planned: ";
    for (const auto& [k, v] : got) text += " " + k + "=" + v;
    outcome.mismatches.push_back(text);
    return;
  }
  if (!c.at("budgets").is_null()) {
    std::map<std::string, uint64_t> want_budgets;
    for (const json& e : c.at("budgets")) {
      const double v = e[1].get<double>();
      want_budgets[e[0].get<std::string>()] = v > 0 ? static_cast<uint64_t>(std::floor(v)) : 0;
    }
    std::map<std::string, uint64_t> got_budgets;
    for (const auto& [device, bytes] : plan.max_memory.entries()) got_budgets[device.str()] = bytes;
    if (want_budgets != got_budgets) {
      std::string text = describe(c) + ": budgets differ\n    expected:";
      for (const auto& [k, v] : want_budgets) text += " " + k + "=" + std::to_string(v);
      text += "\n    planned: ";
      for (const auto& [k, v] : got_budgets) text += " " + k + "=" + std::to_string(v);
      outcome.mismatches.push_back(text);
    }
  }
}

void check(const Outcome& outcome) {
  for (size_t i = 0; i < outcome.mismatches.size() && i < 25; ++i) {
    ADD_FAILURE() << outcome.mismatches[i];
  }
  EXPECT_EQ(outcome.mismatches.size(), 0u) << "of " << outcome.compared << " cases";
  // Coverage the oracle promises: a test over too few cases proves little.
  EXPECT_GE(outcome.compared, 5000);
  EXPECT_GE(outcome.errors_matched, 100);
  EXPECT_GE(outcome.documented_differences, 100);
  EXPECT_GE(outcome.loaded_cases, 500);
  EXPECT_GE(outcome.accelerate_overfills, 50);
  std::cout << "[ planner  ] " << outcome.compared
            << " cases: " << outcome.compared - static_cast<int>(outcome.mismatches.size())
            << " agree (" << outcome.errors_matched << " errors where Python fails), "
            << outcome.documented_differences
            << " with a disk key where Accelerate's get_balanced_memory raises; "
            << outcome.loaded_cases << " half-precision models loaded as float32, "
            << outcome.accelerate_overfills
            << " of them where Accelerate's own map (half-precision sizes) would differ; "
            << outcome.models.size() << " models, " << outcome.strategies.size()
            << " rule:strategy pairs, " << outcome.budgets.size() << " budget kinds, "
            << outcome.dtypes.size() << " dtype overrides\n";
}

TEST(DeviceMapDifferential, FromTheTorchModuleTree) {
  const json& data = oracle();
  std::map<std::string, backplane::ModelDescription> models;
  for (const auto& [id, model] : data.at("models").items()) models.emplace(id, from_tree(model));
  Outcome outcome;
  for (const json& c : data.at("cases")) {
    const std::string id = c.at("model").get<std::string>();
    run_case(c, models.at(id), outcome);
  }
  check(outcome);
}

TEST(DeviceMapDifferential, FromModelFromConfig) {
  const json& data = oracle();
  std::map<std::string, backplane::ModelDescription> models;
  for (const auto& [id, model] : data.at("models").items()) {
    models.emplace(id, backplane::model_from_config_json(model.at("config").dump()));
  }
  Outcome outcome;
  for (const json& c : data.at("cases")) {
    const std::string id = c.at("model").get<std::string>();
    run_case(c, models.at(id), outcome);
  }
  check(outcome);
}

// The tree sizes agree with what transformers / Accelerate computed for the whole model.
TEST(DeviceMapDifferential, ModelSizes) {
  const json& data = oracle();
  int compared = 0;
  for (const auto& [id, model] : data.at("models").items()) {
    const bool accelerate = id.find("/accelerate") != std::string::npos;
    const backplane::DevicePlan plan = backplane::plan_device_map(
        from_tree(model), backplane::parse_device_map("sequential"), backplane::PlanHardware{},
        {backplane::MaxMemory::parse("cpu=1"), std::nullopt,
         accelerate ? backplane::PlanRules::kAccelerate : backplane::PlanRules::kFromPretrained});
    EXPECT_EQ(plan.model_size, model.at("model_size").get<uint64_t>()) << id;
    ++compared;
  }
  EXPECT_GE(compared, 32);
}

// Every causal-LM architecture of the pinned transformers that its config defaults build: the
// tree tools/export-module-tree writes, read by model_from_tree, planned for every strategy over
// budgets that split it across 2-4 GPUs with cpu and disk offload, equal to from_pretrained's
// hf_device_map (tests/python/architecture_oracle.py).
TEST(DeviceMapDifferential, FromExportedTrees) {
  const json data = read_oracle("BACKPLANE_ARCHITECTURE_ORACLE");
  std::map<std::string, backplane::ModelDescription> models;
  for (const auto& [id, model] : data.at("models").items()) {
    const backplane::ModelDescription description =
        backplane::model_from_tree_json(model.at("tree").dump(), id);
    EXPECT_TRUE(description.approximate_because.empty()) << id;
    try {
      const backplane::DevicePlan sized = backplane::plan_device_map(
          description, backplane::parse_device_map("sequential"), backplane::PlanHardware{},
          {backplane::MaxMemory::parse("cpu=1000GB"), std::nullopt});
      EXPECT_EQ(sized.model_size, model.at("model_size").get<uint64_t>()) << id;
    } catch (const std::exception& e) {
      ADD_FAILURE() << id << ": " << e.what();
    }
    models.emplace(id, description);
  }
  Outcome outcome;
  for (const json& c : data.at("cases"))
    run_case(c, models.at(c.at("model").get<std::string>()), outcome);
  for (size_t i = 0; i < outcome.mismatches.size() && i < 25; ++i) {
    ADD_FAILURE() << outcome.mismatches[i];
  }
  EXPECT_EQ(outcome.mismatches.size(), 0u) << "of " << outcome.compared << " cases";
  EXPECT_GE(models.size(), 170u);
  std::cout << "[ planner  ] exported trees: " << models.size() << " architectures, "
            << outcome.compared << " cases, " << outcome.mismatches.size() << " differ; "
            << data.at("refused").size() << " architectures transformers cannot build from its "
            << "own config defaults\n";
}

// One line per module and tensor, in named_modules() order, then the model-wide lists: two
// descriptions are the same model for every planner and rule when these lines are equal.
std::vector<std::string> model_lines(const backplane::ModelDescription& model) {
  std::vector<std::string> lines;
  for (const backplane::NamedModule& named : backplane::named_modules(model.root)) {
    lines.push_back("module " + named.name + " " + named.module->class_name);
    for (const backplane::TensorInfo& tensor : named.module->tensors) {
      std::string shape;
      for (int64_t dim : tensor.shape) shape += (shape.empty() ? "" : ",") + std::to_string(dim);
      lines.push_back(
          "  " + tensor.name + " [" + shape + "] " + backplane::to_string(tensor.dtype) +
          (tensor.buffer ? (tensor.persistent ? " buffer" : " non-persistent buffer") : ""));
    }
  }
  for (const std::string& name : model.no_split_module_classes) lines.push_back("no_split " + name);
  for (const auto& group : model.tied_parameters) {
    std::string names;
    for (const std::string& name : group) names += " " + name;
    lines.push_back("tied" + names);
  }
  for (const auto& [target, source] : model.tied_weights_keys) {
    lines.push_back("tied key " + target + " <- " + source);
  }
  for (const auto& [pattern, style] : model.tp_plan) lines.push_back("tp " + pattern + " " + style);
  for (const auto& [key, value] : model.hyperparameters) {
    lines.push_back("hyperparameter " + key + " " + std::to_string(value));
  }
  if (!model.kernel_layers) lines.push_back("kernel layers not known");
  if (model.kernel_layers) {
    for (const auto& [name, layer] : model.kernel_layers->layers) {
      lines.push_back("kernel layer " + name + " " + layer);
    }
    for (const auto& [name, layers] : model.kernel_layers->functions) {
      for (const std::string& layer : layers)
        lines.push_back("kernel function " + name + " " + layer);
    }
  }
  return lines;
}

std::string first_difference(const backplane::ModelDescription& expected,
                             const backplane::ModelDescription& got) {
  const std::vector<std::string> a = model_lines(expected);
  const std::vector<std::string> b = model_lines(got);
  for (size_t i = 0; i < a.size() || i < b.size(); ++i) {
    const std::string x = i < a.size() ? a[i] : "(nothing)";
    const std::string y = i < b.size() ? b[i] : "(nothing)";
    if (x != y) return "line " + std::to_string(i) + ": transformers '" + x + "', ours '" + y + "'";
  }
  return "";
}

// The oracle's cases of the models in `planned`, each planned from its description and
// compared with from_pretrained's map (a failure per mismatch, up to 25).
Outcome plan_oracle_cases(const json& data,
                          const std::map<std::string, backplane::ModelDescription>& planned) {
  Outcome outcome;
  for (const json& c : data.at("cases")) {
    const auto it = planned.find(c.at("model").get<std::string>());
    if (it != planned.end()) run_case(c, it->second, outcome);
  }
  for (size_t i = 0; i < outcome.mismatches.size() && i < 25; ++i) {
    ADD_FAILURE() << outcome.mismatches[i];
  }
  EXPECT_EQ(outcome.mismatches.size(), 0u) << "of " << outcome.compared << " cases";
  return outcome;
}

// The architectures users load most (those of the issue's list that are described): each must
// be described and equal to transformers over all its configs.
constexpr const char* kDescribedArchitectures[] = {
    "llama",       "mistral",     "qwen2",   "qwen3",       "gemma",      "gemma2",
    "phi",         "phi3",        "mixtral", "qwen2_moe",   "qwen3_moe",  "deepseek_v2",
    "deepseek_v3", "gpt_oss",     "gpt2",    "gpt_neox",    "gptj",       "starcoder2",
    "olmo2",       "cohere",      "cohere2", "granite",     "granitemoe", "stablelm",
    "mamba",       "jamba",       "glm4",    "glm4_moe",    "ernie4_5",   "smollm3",
    "bert",        "gemma3_text", "olmo3",   "llama4_text", "falcon",     "qwen3_next",
    "mamba2",      "falcon_h1",   "gemma3",  "t5",
};

// Architectures as data (core/src/model/architectures/): for every architecture with a
// descriptor, each config.json the oracle wrote (as save_pretrained writes it, in full, and
// small edges: flags flipped, grouped-query attention, wider, shallower) must give, through
// model_from_config_json alone, the tree transformers built for it; and the plans of the
// class defaults must equal from_pretrained's for every strategy and budget.
TEST(DeviceMapDifferential, FromConfigsThroughDescriptors) {
  const json data = read_oracle("BACKPLANE_ARCHITECTURE_ORACLE");
  const std::vector<std::string> described = backplane::supported_architectures();
  const std::set<std::string> described_set(described.begin(), described.end());
  std::map<std::string, backplane::ModelDescription> planned;
  int configs = 0, equal_architectures = 0;
  std::set<std::string> equal;
  std::string unequal;  // the model types with a difference, for the failure message
  std::vector<std::string> differences;
  for (const auto& [id, model] : data.at("models").items()) {
    if (!described_set.count(model.at("tree").at("architecture").get<std::string>())) continue;
    try {
      backplane::model_from_config_json(json{{"model_type", id}}.dump());
    } catch (const backplane::InvalidArgument& e) {
      // Another model_type of a described class (a Llama clone): not this descriptor's.
      if (std::string(e.what()).find("is not described here") != std::string::npos) continue;
    }
    // An architecture none of whose configs transformers could read back is not counted.
    bool all_equal = !model.at("configs").empty();
    for (const json& variant : model.at("configs")) {
      const std::string label = id + " (" + variant.at("label").get<std::string>() + ")";
      ++configs;
      try {
        const backplane::ModelDescription ours =
            backplane::model_from_config_json(variant.at("config").dump());
        const backplane::ModelDescription theirs =
            backplane::model_from_tree_json(variant.at("tree").dump(), label);
        EXPECT_TRUE(ours.approximate_because.empty()) << label;
        const std::string difference = first_difference(theirs, ours);
        if (!difference.empty()) {
          all_equal = false;
          differences.push_back(label + ": " + difference);
        }
        if (variant.at("label") == "full") planned.emplace(id, ours);
      } catch (const std::exception& e) {
        all_equal = false;
        differences.push_back(label + ": " + e.what());
      }
    }
    equal_architectures += all_equal ? 1 : 0;
    if (all_equal) equal.insert(id);
    if (!all_equal) unequal += (unequal.empty() ? "" : " ") + id;
  }
  for (size_t i = 0; i < differences.size() && i < 25; ++i) ADD_FAILURE() << differences[i];
  EXPECT_EQ(differences.size(), 0u) << "of " << configs << " configs; not equal: " << unequal;
  const Outcome outcome = plan_oracle_cases(data, planned);
  // The architectures users load most, each described and equal over all its configs. Adding
  // an architecture: its descriptor file (architecture_descriptors.py writes it) and a row.
  for (const char* model_type : kDescribedArchitectures) {
    EXPECT_EQ(equal.count(model_type), 1u) << model_type << " is not described and equal";
  }
  EXPECT_GE(equal_architectures, 40);
  std::cout << "[ planner  ] descriptors: " << equal_architectures << " of "
            << data.at("models").size() + data.at("refused").size()
            << " architectures (the causal LMs and T5) equal to transformers over " << configs
            << " configs; " << outcome.compared << " plans from config.json alone, "
            << outcome.mismatches.size() << " differ\n";
}

// The same architectures from a checkpoint folder as save_pretrained leaves it (config.json
// beside model.safetensors, tied weights left out and transformers 5's conversions reverted:
// Mixtral's experts one by one): model_from_path reads the headers, checks the weights against
// the descriptor's tree (renamed and fused back), and plans exactly what from_pretrained plans.
// Checkpoints model_from_path refuses although from_pretrained loads them: their conversions
// are more than renames and expert fusing (transformers 5's conversion ops), which the weights
// check does not undo: a fused query_key_value it splits (Sarvam-MoE), a vocabulary it pads to
// a multiple (Inkling 2), conv and norm weights it reshapes or moves (Kimi-Linear,
// DeepSeek-V4). Exactly these: a new one fails, and so does one that starts to pass.
const std::set<std::string> kKnownCheckpointRefusals = {
    "deepseek_v4", "inkling2_loop_text", "inkling2_text", "kimi_linear", "sarvam_moe",
};

TEST(DeviceMapDifferential, FromCheckpointsThroughDescriptors) {
  const json data = read_oracle("BACKPLANE_ARCHITECTURE_ORACLE");
  std::map<std::string, backplane::ModelDescription> planned;
  std::vector<std::string> differences;
  std::set<std::string> refused;
  for (const auto& [id, model] : data.at("models").items()) {
    if (!model.contains("checkpoint")) continue;
    const std::string folder = model.at("checkpoint").get<std::string>();
    if (kKnownCheckpointRefusals.count(id)) {
      try {
        backplane::model_from_path(folder);
        differences.push_back(id + ": its checkpoint now reads: drop it from the known refusals");
      } catch (const backplane::InvalidArgument& e) {
        // Refused naming the tensor, as a checkpoint that contradicts its config is.
        EXPECT_NE(std::string(e.what()).find("The weights hold '"), std::string::npos) << e.what();
        refused.insert(id);
      }
      continue;
    }
    try {
      const backplane::ModelDescription ours = backplane::model_from_path(folder);
      const backplane::ModelDescription theirs =
          backplane::model_from_tree_json(model.at("tree").dump(), id);
      if (!ours.approximate_because.empty() || !ours.from_config) {
        differences.push_back(id + ": the plan from its checkpoint is not exact");
      }
      const std::string difference = first_difference(theirs, ours);
      if (!difference.empty()) differences.push_back(id + " (checkpoint): " + difference);
      planned.emplace(id, ours);
    } catch (const std::exception& e) {
      differences.push_back(id + " (checkpoint " + folder + "): " + e.what());
    }
  }
  for (size_t i = 0; i < differences.size() && i < 25; ++i) ADD_FAILURE() << differences[i];
  EXPECT_EQ(differences.size(), 0u);
  for (const char* model_type : kDescribedArchitectures) {
    EXPECT_EQ(planned.count(model_type), 1u) << model_type << " has no checkpoint compared";
  }
  const Outcome outcome = plan_oracle_cases(data, planned);
  EXPECT_EQ(refused.size(), kKnownCheckpointRefusals.size());
  std::cout << "[ planner  ] checkpoints: " << planned.size()
            << " architectures read from save_pretrained's headers, " << outcome.compared
            << " plans equal to from_pretrained's, " << outcome.mismatches.size() << " differ; "
            << refused.size() << " refused (conversions beyond renames and fusing)\n";
}

// Configs transformers refuses that a descriptor plans all the same. Exactly these: a new one
// fails, and so does one that no longer happens.
const std::set<std::string> kKnownAccepted = {
    // The descriptor's derived mlp_layer_types has num_hidden_layers entries; transformers'
    // ["dense"] * k + ["sparse"] * (n - k) has n + 1 for k = -1.
    R"(deepseek_v32 {"first_k_dense_replace":-1})",
    R"(glm_moe_dsa {"first_k_dense_replace":-1})",
    // A null head_dim the class fills in (hidden_size // num_attention_heads, odd here): the
    // generator learns fill-ins only for fields whose default is the null.
    R"(seed_oss {"head_dim":null})",
};

// Whether `message` names a key `config` changes (`hidden_size`, text_config.hidden_size).
bool names_a_changed_key(const std::string& message, const json& config) {
  for (const auto& [key, value] : config.items()) {
    if (message.find(key) != std::string::npos) return true;
    if (value.is_object() && names_a_changed_key(message, value)) return true;
  }
  return false;
}

// What transformers refuses, refused too: configs near each described architecture's class
// defaults that a config validator (or nn.Embedding, when the model is built) refuses. Each is
// refused in transformers' words, or in other words that name the changed key (a layer count
// of -1 is refused before its validator is reached), or is accepted under a validator the
// description says it does not apply.
TEST(DeviceMapDifferential, RefusalsThroughDescriptors) {
  const json data = read_oracle("BACKPLANE_ARCHITECTURE_ORACLE");
  int same_words = 0, other_words = 0, unchecked = 0, architectures = 0;
  std::vector<std::string> wrong;
  std::set<std::string> known_seen;
  for (const auto& [id, model] : data.at("models").items()) {
    if (!model.contains("refusals")) continue;
    std::vector<std::string> not_applied;
    try {
      not_applied = backplane::model_from_config_json(json{{"model_type", id}}.dump()).unchecked;
    } catch (const backplane::InvalidArgument& e) {
      // An oracle older than the descriptors: an architecture no longer described.
      ADD_FAILURE() << id << ": " << e.what();
      continue;
    }
    ++architectures;
    for (const json& refusal : model.at("refusals")) {
      json config = refusal.at("config");
      config["model_type"] = id;
      const std::string label = id + " " + refusal.at("config").dump();
      const std::string expected = refusal.at("error").get<std::string>();
      const std::string validator = refusal.at("validator").get<std::string>();
      const bool validator_not_applied =
          std::any_of(not_applied.begin(), not_applied.end(), [&](const std::string& by) {
            return by.size() > validator.size() &&
                   by.compare(by.size() - validator.size(), validator.size(), validator) == 0;
          });
      try {
        backplane::model_from_config_json(config.dump());
        if (validator_not_applied) {
          ++unchecked;
        } else if (kKnownAccepted.count(label)) {
          known_seen.insert(label);
        } else {
          wrong.push_back(label + ": accepted; transformers (" + validator + "): " + expected);
        }
      } catch (const backplane::InvalidArgument& e) {
        const std::string ours = e.what();
        // Where the validator's own condition fails in Python (None * 2), the refusal names
        // the validator instead of Python's TypeError.
        if (ours.find(expected) != std::string::npos ||
            (refusal.at("raised_by_python").get<bool>() &&
             ours.find(validator) != std::string::npos)) {
          ++same_words;
        } else if (names_a_changed_key(ours, refusal.at("config")) || validator_not_applied) {
          ++other_words;
        } else {
          wrong.push_back(label + ": refused as \"" + ours + "\"; transformers: " + expected);
        }
      }
    }
  }
  for (size_t i = 0; i < wrong.size() && i < 25; ++i) ADD_FAILURE() << wrong[i];
  EXPECT_EQ(wrong.size(), 0u);
  for (const std::string& label : kKnownAccepted) {
    EXPECT_EQ(known_seen.count(label), 1u) << label << " is no longer accepted: drop it";
  }
  EXPECT_GE(same_words, 300);
  EXPECT_LE(other_words, same_words / 10);
  std::cout << "[ planner  ] refusals over " << architectures
            << " described architectures: " << same_words
            << " configs transformers refuses, refused in its words, " << other_words
            << " in other words naming the key, " << unchecked
            << " accepted under a validator the description names as not applied, "
            << known_seen.size() << " known to be accepted\n";
}

}  // namespace
