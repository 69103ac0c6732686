// Simulated topologies x visibility settings -> the devices a program sees, in order.
// Each row runs the sim plugin alone through a real Runtime, as a host application would.
#include <backplane/backplane.hpp>
#include <backplane/internal/device_types.hpp>

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "scoped_environment.hpp"

namespace {

using backplane::Runtime;
using backplane::RuntimeOptions;

// Variables any row may set; every row starts with all of them unset.
const char* const kVisibilityVariables[] = {
    "CUDA_VISIBLE_DEVICES",     "CUDA_DEVICE_ORDER",
    "ROCR_VISIBLE_DEVICES",     "HIP_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",       "ZE_AFFINITY_MASK",
    "ZE_FLAT_DEVICE_HIERARCHY", "ZE_ENABLE_PCI_ID_DEVICE_ORDER",
    "HABANA_VISIBLE_MODULES",   "NEURON_RT_VISIBLE_CORES"};

Runtime open_sim(backplane::testing::ScopedEnvironment& env, const std::string& topology,
                 const std::map<std::string, std::string>& variables,
                 std::vector<std::string> plugins = {"sim"}) {
  for (const char* name : kVisibilityVariables) env.unset(name);
  env.set("BACKPLANE_SIM_TOPOLOGY", std::string(TOPOLOGY_DIR) + "/" + topology + ".json");
  for (const auto& [name, value] : variables) env.set(name, value);
  RuntimeOptions options;
  options.plugin_path = std::vector<std::filesystem::path>{PLUGIN_BUILD_DIR};
  options.only_plugins = std::move(plugins);
  options.log_sink = [](backplane::LogLevel, const std::string&) {};
  return Runtime::open(options);
}

struct Row {
  const char* topology;
  std::map<std::string, std::string> variables;
  const char* type;
  std::vector<int> physical;  // physical index of logical device 0, 1, ...
  const char* variable;       // the variable that mapped them; "" for none
};

void PrintTo(const Row& row, std::ostream* os) {
  *os << row.topology << " " << row.type;
  for (const auto& [name, value] : row.variables) *os << " " << name << "='" << value << "'";
}

class SimVisibility : public ::testing::TestWithParam<Row> {};

TEST_P(SimVisibility, DevicesInLogicalOrder) {
  const Row& row = GetParam();
  backplane::testing::ScopedEnvironment env;
  const Runtime runtime = open_sim(env, row.topology, row.variables);
  const backplane::BackendInfo* backend = runtime.backend(row.type);
  ASSERT_NE(backend, nullptr);
  EXPECT_TRUE(backend->available) << backend->unavailable_reason;
  EXPECT_TRUE(backend->simulated);
  EXPECT_FALSE(backend->visibility_notes.empty());

  std::vector<int> physical;
  const auto devices = runtime.devices(row.type);
  for (size_t i = 0; i < devices.size(); ++i) {
    EXPECT_EQ(*devices[i].device.index(), static_cast<int>(i));
    EXPECT_TRUE(devices[i].simulated);
    EXPECT_EQ(devices[i].visibility_variable, row.variable);
    physical.push_back(devices[i].physical_index);
  }
  EXPECT_EQ(physical, row.physical);
}

using Vars = std::map<std::string, std::string>;

INSTANTIATE_TEST_SUITE_P(
    Topologies, SimVisibility,
    ::testing::Values(
        // 8 identical GPUs: FASTEST_FIRST ties fall back to PCI order.
        Row{"h100x8", {}, "cuda", {0, 1, 2, 3, 4, 5, 6, 7}, ""},
        Row{"h100x8",
            Vars{{"CUDA_VISIBLE_DEVICES", "3,1"}},
            "cuda",
            {3, 1},
            "CUDA_VISIBLE_DEVICES"},
        Row{"h100x8", Vars{{"CUDA_VISIBLE_DEVICES", ""}}, "cuda", {}, "CUDA_VISIBLE_DEVICES"},
        Row{"h100x8", Vars{{"CUDA_VISIBLE_DEVICES", "1,1"}}, "cuda", {}, "CUDA_VISIBLE_DEVICES"},
        Row{"h100x8", Vars{{"CUDA_VISIBLE_DEVICES", "2,9,1"}}, "cuda", {2}, "CUDA_VISIBLE_DEVICES"},
        Row{"h100x8",
            Vars{{"CUDA_VISIBLE_DEVICES", "1gpu2, 4"}},
            "cuda",
            {1, 4},
            "CUDA_VISIBLE_DEVICES"},
        Row{"h100x8",
            Vars{{"CUDA_VISIBLE_DEVICES", "GPU-8d116ece,GPU-6513"}},
            "cuda",
            {5, 0},
            "CUDA_VISIBLE_DEVICES"},
        // A100 is faster than the RTX A4000 on the lower PCI bus.
        Row{"mixed", {}, "cuda", {1, 0}, ""},
        Row{"mixed",
            Vars{{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}},
            "cuda",
            {0, 1},
            "CUDA_DEVICE_ORDER"},
        Row{"mixed", Vars{{"CUDA_VISIBLE_DEVICES", "0"}}, "cuda", {1}, "CUDA_VISIBLE_DEVICES"},
        Row{"mixed",
            Vars{{"CUDA_VISIBLE_DEVICES", "0"}, {"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}},
            "cuda",
            {0},
            "CUDA_VISIBLE_DEVICES"},
        // With NVIDIA present, AMD GPUs answer only to rocm.
        Row{"mixed", {}, "rocm", {0}, ""},
        Row{"mixed", Vars{{"HABANA_VISIBLE_MODULES", "1"}}, "hpu", {1}, "HABANA_VISIBLE_MODULES"},
        Row{"mi300x8",
            Vars{{"ROCR_VISIBLE_DEVICES", "2,3"}, {"HIP_VISIBLE_DEVICES", "1"}},
            "cuda",
            {3},
            "HIP_VISIBLE_DEVICES"},
        Row{"mi300x8",
            Vars{{"ROCR_VISIBLE_DEVICES", "5,4"}},
            "rocm",
            {5, 4},
            "ROCR_VISIBLE_DEVICES"},
        Row{"mi300x8", Vars{{"CUDA_VISIBLE_DEVICES", "7"}}, "cuda", {7}, "CUDA_VISIBLE_DEVICES"},
        // Level Zero: FLAT (default) makes each of the 2 tiles a device; no reordering.
        Row{"intel-max1550x4", {}, "xpu", {0, 0, 1, 1, 2, 2, 3, 3}, ""},
        Row{"intel-max1550x4",
            Vars{{"ZE_FLAT_DEVICE_HIERARCHY", "COMPOSITE"}},
            "xpu",
            {0, 1, 2, 3},
            "ZE_FLAT_DEVICE_HIERARCHY"},
        Row{"intel-max1550x4",
            Vars{{"ZE_AFFINITY_MASK", "3,1"}},
            "xpu",
            {0, 1},
            "ZE_AFFINITY_MASK"},
        Row{"trn1-32xlarge",
            Vars{{"NEURON_RT_VISIBLE_CORES", "4-7"}},
            "neuron",
            {4, 5, 6, 7},
            "NEURON_RT_VISIBLE_CORES"},
        Row{"apple-m2-ultra", {}, "mps", {0}, ""}));

TEST(SimTopology, ARefusedValueMakesTheBackendUnavailable) {
  backplane::testing::ScopedEnvironment env;
  const Runtime runtime =
      open_sim(env, "mi300x8", {{"ROCR_VISIBLE_DEVICES", "1,2"}, {"HIP_VISIBLE_DEVICES", "0,1,2"}});
  const backplane::BackendInfo* cuda = runtime.backend("cuda");
  ASSERT_NE(cuda, nullptr);
  EXPECT_FALSE(cuda->available);
  EXPECT_NE(cuda->unavailable_reason.find("HIP_VISIBLE_DEVICES='0,1,2' lists 3 devices"),
            std::string::npos)
      << cuda->unavailable_reason;
  EXPECT_TRUE(runtime.devices("cuda").empty());

  const Runtime neuron = open_sim(env, "trn1-32xlarge", {{"NEURON_RT_VISIBLE_CORES", "four"}});
  ASSERT_NE(neuron.backend("neuron"), nullptr);
  EXPECT_FALSE(neuron.backend("neuron")->available);
  EXPECT_NE(neuron.backend("neuron")->unavailable_reason.find("NEURON_RT_VISIBLE_CORES"),
            std::string::npos);
}

TEST(SimTopology, DevicesCarryTheTopologysFacts) {
  backplane::testing::ScopedEnvironment env;
  const Runtime runtime = open_sim(env, "mixed", {});
  const backplane::DeviceInfo& a100 = runtime.device(backplane::Device("cuda", 0));
  EXPECT_EQ(a100.name, "NVIDIA A100-SXM4-80GB");
  EXPECT_EQ(a100.memory_total, 81920ull << 20);
  ASSERT_TRUE(a100.compute_capability);
  EXPECT_EQ(a100.compute_capability->str(), "8.0");
  EXPECT_EQ(a100.arch, "sm_80");
  EXPECT_EQ(a100.pci_bus_id, "0000:81:00.0");
  EXPECT_TRUE(a100.has(backplane::kCapBf16));
  const backplane::DeviceInfo& mi210 = runtime.device(backplane::Device("rocm", 0));
  EXPECT_EQ(mi210.vendor, "amd");
  EXPECT_EQ(runtime.backend("rocm")->hub_key, "rocm");
  EXPECT_EQ(runtime.backend("hpu")->collective_backend, "hccl");
}

TEST(SimTopology, SimulatedBackendsReplaceRealOnes) {
  backplane::testing::ScopedEnvironment env;
  const Runtime runtime = open_sim(env, "h100x8", {}, {"cuda", "sim", "cpu"});
  const backplane::BackendInfo* cuda = runtime.backend("cuda");
  ASSERT_NE(cuda, nullptr);
  EXPECT_EQ(cuda->plugin, "sim");
  EXPECT_EQ(runtime.devices("cuda").size(), 8u);
  bool real_replaced = false;
  for (const backplane::BackendInfo& b : runtime.backends()) {
    if (b.type == "cuda" && b.plugin == "cuda") real_replaced = b.replaced_by == "sim";
  }
  EXPECT_TRUE(real_replaced);
  EXPECT_EQ(runtime.devices("cpu").size(), 1u);  // untouched
}

TEST(SimTopology, ABadTopologyFailsTheSimPluginAlone) {
  backplane::testing::ScopedEnvironment env;
  const std::filesystem::path bad = std::filesystem::temp_directory_path() /
                                    ("bad-topology-" + std::to_string(::getpid()) + ".json");
  std::ofstream(bad) << R"({"devices": [{"type": "gpu", "name": "x", "memory": "1GiB"}]})";
  env.set("BACKPLANE_SIM_TOPOLOGY", bad.string());
  RuntimeOptions options;
  options.plugin_path = std::vector<std::filesystem::path>{PLUGIN_BUILD_DIR};
  options.only_plugins = std::vector<std::string>{"sim", "cpu"};
  options.log_sink = [](backplane::LogLevel, const std::string&) {};
  const Runtime runtime = Runtime::open(options);
  std::filesystem::remove(bad);
  for (const backplane::PluginInfo& p : runtime.plugins()) {
    if (p.name == "sim") {
      EXPECT_EQ(p.status, backplane::PluginStatus::kFailed);
      EXPECT_NE(p.error.find("device 0 has type \"gpu\"; a topology may declare cuda"),
                std::string::npos)
          << p.error;
      EXPECT_NE(p.error.find(bad.string()), std::string::npos);
    }
    if (p.name == "cpu") {
      EXPECT_EQ(p.status, backplane::PluginStatus::kLoaded);
    }
  }
}

RuntimeOptions sim_only_options() {
  RuntimeOptions options;
  options.plugin_path = std::vector<std::filesystem::path>{PLUGIN_BUILD_DIR};
  options.only_plugins = std::vector<std::string>{"sim", "cpu"};
  options.log_sink = [](backplane::LogLevel, const std::string&) {};
  return options;
}

TEST(SimTopology, TheShippedOnesAreFoundBesideTheLibrary) {
  EXPECT_EQ(backplane::shipped_topology_directory(),
            std::filesystem::weakly_canonical(TOPOLOGY_DIR));
  const std::vector<std::string> names = backplane::shipped_topologies();
  EXPECT_NE(std::find(names.begin(), names.end(), "h100x8"), names.end());
  EXPECT_EQ(backplane::resolve_sim_topology("h100x8", "test"),
            backplane::shipped_topology_directory() / "h100x8.json");
}

TEST(SimTopology, RuntimeOptionsTakeANameOrAFile) {
  backplane::testing::ScopedEnvironment env;
  env.unset("BACKPLANE_SIM_TOPOLOGY");
  for (const std::string& topology :
       {std::string("h100x8"), std::string(TOPOLOGY_DIR) + "/h100x8.json"}) {
    SCOPED_TRACE(topology);
    RuntimeOptions options = sim_only_options();
    options.sim_topology = topology;
    const Runtime runtime = Runtime::open(options);
    EXPECT_EQ(runtime.devices("cuda").size(), 8u);
  }
  // The variable takes shipped names too, without the option.
  env.set("BACKPLANE_SIM_TOPOLOGY", "h100x8");
  EXPECT_EQ(Runtime::open(sim_only_options()).devices("cuda").size(), 8u);
  EXPECT_EQ(RuntimeOptions::from_environment().sim_topology, "h100x8");
}

TEST(SimTopology, AnAskedForTopologyThatDoesNotComeUpIsAnError) {
  backplane::testing::ScopedEnvironment env;
  env.unset("BACKPLANE_SIM_TOPOLOGY");
  const std::filesystem::path bad =
      std::filesystem::temp_directory_path() / ("notjson-" + std::to_string(::getpid()) + ".json");
  std::ofstream(bad) << "this is not json";
  struct Case {
    std::string topology;
    std::vector<std::string> plugins;
    std::string message;
  };
  const Case cases[] = {
      {bad.string(),
       {"sim", "cpu"},
       "sim topology '" + bad.string() + "' (" + bad.string() +
           ") was asked for, but the sim plugin failed: init failed"},
      {"dgx-z",
       {"sim", "cpu"},
       "sim topology 'dgx-z' is neither a topology file nor a shipped topology; shipped: "},
      {"h100x8", {"cpu"}, "was asked for, but the sim plugin is not among the selected plugins"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.topology);
    RuntimeOptions options = sim_only_options();
    options.only_plugins = c.plugins;
    options.sim_topology = c.topology;
    try {
      Runtime::open(options);
      ADD_FAILURE() << "opened";
    } catch (const backplane::InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos) << e.what();
    }
  }
  std::filesystem::remove(bad);
}

TEST(SimTopology, InactiveWithoutTheVariable) {
  backplane::testing::ScopedEnvironment env;
  env.unset("BACKPLANE_SIM_TOPOLOGY");
  RuntimeOptions options;
  options.plugin_path = std::vector<std::filesystem::path>{PLUGIN_BUILD_DIR};
  options.only_plugins = std::vector<std::string>{"sim"};
  const Runtime runtime = Runtime::open(options);
  EXPECT_TRUE(runtime.backends().empty());
  EXPECT_TRUE(runtime.devices().empty());
  for (const backplane::PluginInfo& p : runtime.plugins()) {
    if (p.name == "sim") {
      EXPECT_EQ(p.status, backplane::PluginStatus::kLoaded);
    }
  }
}

}  // namespace

// The in-tree plugins and the simulated backend register each device type as the one facts
// table says (backplane/internal/device_types.hpp), so that selection treats a simulated cuda
// as the real one.
void expect_registered_as_the_table_says(const backplane::BackendInfo& b) {
  // The rocm plugin's cuda (PyTorch's ROCm builds) and a simulated AMD cuda are rocm's.
  const std::string facts_of = b.hub_key == "rocm" ? "rocm" : b.type;
  const backplane::internal::DeviceTypeFacts* facts =
      backplane::internal::device_type_facts(facts_of);
  ASSERT_NE(facts, nullptr) << b.type << " of " << b.plugin << " is not in the table";
  const std::string what = b.type + " of " + b.plugin;
  EXPECT_EQ(b.hub_key, facts->hub_key) << what;
  EXPECT_EQ(b.collective_backend, facts->collective_backend) << what;
  EXPECT_EQ(b.training_priority, facts->training_priority) << what;
  EXPECT_EQ(b.accelerator, facts->accelerator) << what;
  EXPECT_EQ(b.automatic_placement, facts->automatic_placement) << what;
}

TEST(DeviceTypeFacts, InTreePluginsRegisterWhatTheTableSays) {
  backplane::testing::ScopedEnvironment env;
  const Runtime runtime = open_sim(env, "h100x8", {}, {"cpu", "cuda", "rocm", "xpu", "mps"});
  std::set<std::string> plugins;
  for (const backplane::BackendInfo& b : runtime.backends()) {
    expect_registered_as_the_table_says(b);
    plugins.insert(b.plugin);
  }
  EXPECT_EQ(plugins, (std::set<std::string>{"cpu", "cuda", "rocm", "xpu", "mps"}));
}

TEST(DeviceTypeFacts, TheSimulatedBackendRegistersWhatTheTableSays) {
  std::set<std::string> types;
  for (const char* topology :
       {"h100x8", "mi300x8", "intel-max1550x4", "apple-m2-ultra", "trn1-32xlarge", "mixed"}) {
    backplane::testing::ScopedEnvironment env;
    const Runtime runtime = open_sim(env, topology, {});
    for (const backplane::BackendInfo& b : runtime.backends()) {
      EXPECT_TRUE(b.simulated) << b.type;
      expect_registered_as_the_table_says(b);
      types.insert(b.type);
    }
  }
  EXPECT_GE(types.size(), 6u);  // cuda, rocm, xpu, mps, neuron and more
}
