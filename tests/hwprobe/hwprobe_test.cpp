// hwprobe as a process: the JSON shape, the exit codes, and the environment variables.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "process.hpp"

namespace {

using nlohmann::json;
using testing_support::ProcessResult;
using testing_support::run_process;

ProcessResult hwprobe(std::vector<std::string> args,
                      const std::map<std::string, std::string>& env = {}) {
  args.insert(args.begin(), HWPROBE_PATH);
  return run_process(args, env);
}

json parse_json(const ProcessResult& r) {
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

const json* find_by(const json& array, const char* key, const std::string& value) {
  for (const json& item : array) {
    if (item.at(key) == value) return &item;
  }
  return nullptr;
}

TEST(HwprobeJson, HasTheStableShape) {
  const json j = parse_json(hwprobe({"--json"}));
  ASSERT_TRUE(j.at("plugins").is_array());
  ASSERT_TRUE(j.at("backends").is_array());
  ASSERT_TRUE(j.at("devices").is_array());
  for (const json& p : j["plugins"]) {
    for (const char* key : {"name", "library", "version", "abi_version", "status", "error"}) {
      EXPECT_TRUE(p.contains(key)) << key;
    }
    EXPECT_TRUE(p["status"] == "loaded" || p["status"] == "failed" || p["status"] == "disabled");
  }
  for (const json& b : j["backends"]) {
    for (const char* key : {"type", "plugin", "available", "reason"}) {
      EXPECT_TRUE(b.contains(key)) << key;
    }
    EXPECT_TRUE(b["available"].is_boolean());
  }
  for (const json& d : j["devices"]) {
    for (const char* key :
         {"device", "type", "index", "name", "plugin", "memory_total", "properties"}) {
      EXPECT_TRUE(d.contains(key)) << key;
    }
    EXPECT_TRUE(d["memory_total"].is_number_unsigned());
    EXPECT_TRUE(d["properties"].is_object());
  }
}

TEST(HwprobeJson, ListsTheInTreePlugins) {
  const json j = parse_json(hwprobe({"--json"}));
  const json* cpu = find_by(j["plugins"], "name", "cpu");
  const json* mps = find_by(j["plugins"], "name", "mps");
  ASSERT_NE(cpu, nullptr);
  ASSERT_NE(mps, nullptr);
  EXPECT_EQ((*cpu)["status"], "loaded");
  EXPECT_EQ((*cpu)["abi_version"], "1.6");
  EXPECT_TRUE((*cpu)["error"].is_null());

  const json* cpu_backend = find_by(j["backends"], "type", "cpu");
  ASSERT_NE(cpu_backend, nullptr);
  EXPECT_EQ((*cpu_backend)["available"], true);
  EXPECT_EQ((*cpu_backend)["collective_backend"], "gloo");

  const json* mps_backend = find_by(j["backends"], "type", "mps");
  ASSERT_NE(mps_backend, nullptr);
  EXPECT_EQ((*mps_backend)["available"], false);
  EXPECT_NE((*mps_backend)["reason"].get<std::string>().find("Apple silicon"), std::string::npos);

  const json* cpu_device = find_by(j["devices"], "device", "cpu");
  ASSERT_NE(cpu_device, nullptr);
  EXPECT_EQ((*cpu_device)["index"], 0);
  EXPECT_GT((*cpu_device)["memory_total"].get<uint64_t>(), 0u);
  const json& props = (*cpu_device)["properties"];
  EXPECT_GE(props.at("cores").get<int64_t>(), 1);
  EXPECT_GE(props.at("threads").get<int64_t>(), props.at("cores").get<int64_t>());
  EXPECT_GE(props.at("numa_nodes").get<int64_t>(), 1);
  EXPECT_TRUE(props.at("simd").is_array());
  EXPECT_GT(props.at("memory_available").get<int64_t>(), 0);
}

// The cpu and cuda plugins register the in-tree packages as default layer kernels, in
// inference and, where the package has a backward, training; a simulated H100 gets the cuda
// ones (capability 8.0 and up).
TEST(HwprobeJson, LayerKernelsPerDeviceAndMode) {
  const json j = parse_json(hwprobe({"--json", "--sim", "h100x8"}));
  const json& rows = j.at("layer_kernels");
  const auto row = [&](const std::string& device, const std::string& layer) -> const json* {
    for (const json& r : rows) {
      if (r.at("device") == device && r.at("layer") == layer) return &r;
    }
    return nullptr;
  };
  const struct {
    const char* device;
    const char* layer;
    const char* kernel;
    const char* source;
  } cases[] = {
      {"cpu", "RMSNorm", "backplane/rmsnorm:RMSNorm", "cpu"},
      {"cpu", "SiluAndMul", "backplane/activation:SiluAndMul", "cpu"},
      {"cpu", "RotaryEmbedding", "backplane/rotary:RotaryEmbedding", "cpu"},
      {"cuda:7", "GeluTanhAndMul", "backplane/activation:GeluTanhAndMul", "cuda"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.device) + " " + c.layer);
    const json* r = row(c.device, c.layer);
    ASSERT_NE(r, nullptr) << rows.dump(1);
    EXPECT_EQ(r->at("inference").at("kernel"), c.kernel);
    EXPECT_EQ(r->at("inference").at("source"), c.source);
    EXPECT_EQ(r->at("inference").at("matched_mode"), "inference");
    // Every package has a backward on these devices (ABI 1.6): the same kernel trains.
    EXPECT_EQ(r->at("training").at("kernel"), c.kernel);
    EXPECT_EQ(r->at("training").at("matched_mode"), "training");
  }
  const json* norm = row("cuda:7", "RMSNorm");  // cuda's rmsnorm trains too
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->at("training").at("kernel"), "backplane/rmsnorm:RMSNorm");
  const ProcessResult text = hwprobe({"--sim", "h100x8"});
  EXPECT_NE(text.out.find("Layer kernels"), std::string::npos) << text.out;
}

#ifdef HUB_PACKAGES_DIR
// Built with the kernel hub: which build variant of each mapped Hub kernel a device would load,
// with every decision's reason, as kernel-hub resolve gives them (the same hub::Store::resolve).
TEST(HwprobeJson, SaysWhichVariantOfEachMappedKernelADeviceWouldLoad) {
  const std::string rmsnorm = std::string(HUB_PACKAGES_DIR) + "/backplane/rmsnorm";
  const std::map<std::string, std::string> env = {
      {"BACKPLANE_HUB_CACHE", ::testing::TempDir() + "/hwprobe-empty-store"},
      {"KERNELS_CACHE", ::testing::TempDir() + "/hwprobe-no-hf-cache"},
      {"BACKPLANE_LOCAL_KERNELS", "backplane/rmsnorm=" + rmsnorm}};
  const json j = parse_json(hwprobe({"--json", "--sim", "h100x8"}, env));
  ASSERT_TRUE(j.contains("hub_variants")) << j.dump(2);
  const json* cpu_rmsnorm = nullptr;
  const json* cuda_rmsnorm = nullptr;
  for (const json& row : j["hub_variants"]) {
    if (row["repo"] == "backplane/rmsnorm" && row["device"] == "cpu") cpu_rmsnorm = &row;
    if (row["repo"] == "backplane/rmsnorm" && row["device"] == "cuda:0") cuda_rmsnorm = &row;
    if (row["repo"] == "backplane/activation") {
      EXPECT_NE(row["error"].get<std::string>().find("is not installed"), std::string::npos);
    }
  }
  ASSERT_NE(cpu_rmsnorm, nullptr);
  EXPECT_EQ(cpu_rmsnorm->at("revision"), "local");
  EXPECT_EQ(cpu_rmsnorm->at("variant").get<std::string>().find("cpu"), 6u) << *cpu_rmsnorm;
  // On a simulated GPU nothing fits: the cpu build by its backend, and a CUDA build (when nvcc
  // made one) because a simulated device reports no driver version; each says so.
  ASSERT_NE(cuda_rmsnorm, nullptr);
  EXPECT_TRUE(cuda_rmsnorm->at("variant").is_null());
  ASSERT_FALSE(cuda_rmsnorm->at("decisions").empty());
  for (const json& d : cuda_rmsnorm->at("decisions")) {
    EXPECT_FALSE(d["accepted"].get<bool>()) << d;
    const bool cuda_build = d["variant"].get<std::string>().find("-cu") != std::string::npos;
    EXPECT_EQ(d["refused_by"], cuda_build ? "backend_version" : "backend") << d;
  }
  const ProcessResult text = hwprobe({"--sim", "h100x8"}, env);
  EXPECT_NE(text.out.find("Layer kernel packages (the build variant each device would load)"),
            std::string::npos)
      << text.out;
}
#endif

TEST(HwprobeText, ShowsBackendsDevicesAndPlugins) {
  const ProcessResult r = hwprobe({});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* heading : {"Backends", "Devices", "Plugins"}) {
    EXPECT_NE(r.out.find(heading), std::string::npos) << heading;
  }
  EXPECT_NE(r.out.find("unavailable: MPS needs Apple silicon"), std::string::npos);
}

TEST(HwprobeParse, PrintsTypeAndIndex) {
  const json j = parse_json(hwprobe({"parse", "cuda:3", "cpu", "--json"}));
  ASSERT_EQ(j.size(), 2u);
  EXPECT_EQ(j[0]["type"], "cuda");
  EXPECT_EQ(j[0]["index"], 3);
  EXPECT_EQ(j[1]["type"], "cpu");
  EXPECT_TRUE(j[1]["index"].is_null());

  const ProcessResult text = hwprobe({"parse", "xpu:1"});
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("type=xpu index=1"), std::string::npos);
}

TEST(HwprobeParse, InvalidStringExitsTwoWithC10Message) {
  const ProcessResult r = hwprobe({"parse", "cuda:01"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("Invalid device string: 'cuda:01'"), std::string::npos) << r.err;

  const ProcessResult unknown = hwprobe({"parse", "cpu", "CUDA:0", "--json"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("device type at start of device string: CUDA"), std::string::npos);
  const json j = json::parse(unknown.out);
  EXPECT_EQ(j[0]["type"], "cpu");  // the valid one is still answered
  EXPECT_TRUE(j[1].contains("error"));
}

TEST(HwprobeUsage, BadUsageExitsTwo) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--bogus"}, {"frobnicate"}, {"parse"}, {"--log", "loud"}, {"plugins", "extra"}}) {
    const ProcessResult r = hwprobe(args);
    EXPECT_EQ(r.exit_code, 2) << args[0];
    EXPECT_FALSE(r.err.empty()) << args[0];
    EXPECT_TRUE(r.out.empty()) << args[0];
  }
  EXPECT_EQ(hwprobe({"--help"}).exit_code, 0);
}

TEST(HwprobeEnvironment, InvalidLogLevelNamesTheVariable) {
  const ProcessResult r = hwprobe({"--json"}, {{"BACKPLANE_LOG", "chatty"}});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("BACKPLANE_LOG='chatty'"), std::string::npos) << r.err;
}

TEST(HwprobeEnvironment, DebugLogSaysWhyEachPluginWasTaken) {
  const ProcessResult r = hwprobe({"--json"}, {{"BACKPLANE_LOG", "debug"}});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.err.find("plugin search path: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("plugin 'cpu' 0.1.0 loaded from"), std::string::npos) << r.err;
}

TEST(HwprobeEnvironment, DisabledPluginIsReportedNotLoaded) {
  const json j = parse_json(hwprobe({"--json"}, {{"BACKPLANE_DISABLE_PLUGINS", "mps"}}));
  EXPECT_EQ((*find_by(j["plugins"], "name", "mps"))["status"], "disabled");
  EXPECT_EQ(find_by(j["backends"], "type", "mps"), nullptr);
  EXPECT_NE(find_by(j["backends"], "type", "cpu"), nullptr);

  const json only = parse_json(hwprobe({"--json"}, {{"BACKPLANE_PLUGINS", "mps"}}));
  EXPECT_EQ((*find_by(only["plugins"], "name", "cpu"))["status"], "disabled");
  EXPECT_EQ((*find_by(only["plugins"], "name", "mps"))["status"], "loaded");
}

TEST(HwprobeEnvironment, PluginPathReplacesTheDefault) {
  const json j =
      parse_json(hwprobe({"--json"}, {{"BACKPLANE_PLUGIN_PATH", "/nonexistent/plugins"}}));
  EXPECT_TRUE(j["plugins"].empty());
  EXPECT_TRUE(j["devices"].empty());
}

TEST(HwprobeEnvironment, ABrokenAddedPluginFailsAloneAndIsSearchedFirst) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("hwprobe_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "broken.json") << "{\"file_format_version\": \"1.0.0\", \"plugin\": {";
  const ProcessResult r =
      hwprobe({"plugins", "--json"}, {{"BACKPLANE_ADD_PLUGIN_PATH", dir.string()}});
  std::filesystem::remove_all(dir);
  const json j = parse_json(r);
  ASSERT_EQ(j["search_path"].size(), 2u);
  EXPECT_EQ(j["search_path"][0], dir.string());
  EXPECT_EQ(std::filesystem::path(j["search_path"][1].get<std::string>()),
            std::filesystem::path(PLUGIN_BUILD_DIR));
  ASSERT_GE(j["plugins"].size(), 3u);
  EXPECT_EQ(j["plugins"][0]["name"], "broken");
  EXPECT_EQ(j["plugins"][0]["status"], "failed");
  EXPECT_NE(j["plugins"][0]["error"].get<std::string>().find("bad manifest: not valid JSON"),
            std::string::npos);
  EXPECT_EQ((*find_by(j["plugins"], "name", "cpu"))["status"], "loaded");
}

}  // namespace

namespace {

TEST(HwprobeSim, ShippedTopologyByName) {
  const json j = parse_json(hwprobe({"--json", "--sim", "h100x8"}));
  int cuda_devices = 0;
  for (const json& d : j["devices"]) {
    if (d["type"] != "cuda") continue;
    ++cuda_devices;
    EXPECT_EQ(d["simulated"], true);
    EXPECT_EQ(d["compute_capability"], "9.0");
    EXPECT_EQ(d["arch"], "sm_90");
    EXPECT_TRUE(d["uuid"].get<std::string>().rfind("GPU-", 0) == 0);
    EXPECT_EQ(d["physical_index"], d["index"]);
  }
  EXPECT_EQ(cuda_devices, 8);
  bool real_cuda_replaced = false;
  for (const json& b : j["backends"]) {
    if (b["type"] == "cuda" && b["plugin"] == "cuda")
      real_cuda_replaced = b["replaced_by"] == "sim";
  }
  EXPECT_TRUE(real_cuda_replaced);
}

TEST(HwprobeSim, VisibilityVariablesApplyAndAreExplained) {
  const json j =
      parse_json(hwprobe({"--json", "--sim", "h100x8"}, {{"CUDA_VISIBLE_DEVICES", "5,2"}}));
  std::vector<int> physical;
  for (const json& d : j["devices"]) {
    if (d["type"] != "cuda") continue;
    physical.push_back(d["physical_index"].get<int>());
    EXPECT_EQ(d["visibility_variable"], "CUDA_VISIBLE_DEVICES");
  }
  EXPECT_EQ(physical, (std::vector<int>{5, 2}));

  const ProcessResult explain =
      hwprobe({"--explain", "--sim", "h100x8"}, {{"CUDA_VISIBLE_DEVICES", "5,2"}});
  ASSERT_EQ(explain.exit_code, 0) << explain.err;
  EXPECT_NE(explain.out.find("cuda:0 is simulated NVIDIA H100 80GB HBM3, physical device 5, "
                             "mapped to index 0 by CUDA_VISIBLE_DEVICES"),
            std::string::npos)
      << explain.out;
  EXPECT_NE(explain.out.find("CUDA_VISIBLE_DEVICES='5,2': 2 devices visible"), std::string::npos);
}

TEST(HwprobeSim, ABadTopologyFileExitsTwoInsteadOfReportingThisMachine) {
  const std::filesystem::path bad = std::filesystem::temp_directory_path() /
                                    ("hwprobe-notjson-" + std::to_string(::getpid()) + ".json");
  std::ofstream(bad) << "not json";
  const ProcessResult r = hwprobe({"--sim", bad.string()});
  std::filesystem::remove(bad);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find("hwprobe: sim topology '" + bad.string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("not valid JSON"), std::string::npos) << r.err;
}

TEST(HwprobeSim, UnknownTopologyExitsTwoAndListsTheShippedOnes) {
  const ProcessResult r = hwprobe({"--sim", "dgx-z"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--sim 'dgx-z' is neither a topology file nor a shipped topology; "
                       "shipped: apple-m2-ultra, h100x8"),
            std::string::npos)
      << r.err;
}

TEST(HwprobeAccelerators, UnavailableBackendsStillExitZeroWithReasons) {
  const json j = parse_json(hwprobe({"--json"}));
  for (const char* type : {"cuda", "rocm", "xpu"}) {
    const json* backend = find_by(j["backends"], "type", type);
    if (backend == nullptr) continue;  // plugin skipped at configure time
    if ((*backend)["available"] == false) {
      EXPECT_FALSE((*backend)["reason"].get<std::string>().empty()) << type;
    }
  }
}

}  // namespace
