// metadata.json: what is accepted, and errors that name the file and the field.
#include <backplane/error.hpp>
#include <backplane/hub/metadata.hpp>

#include <gtest/gtest.h>

#include <functional>

#include "hub_testing.hpp"

namespace backplane::hub {
namespace {

using nlohmann::json;
using testing::test_metadata;

TEST(Metadata, ReadsEveryField) {
  json j = test_metadata("org/pkg", "libpkg.so");
  j["backend"] = {{"name", "cuda"}, {"version", "13.0"}};
  j["archs"] = {"sm_80", "sm_90"};
  j["functions"][0]["min_compute_capability"] = "8.0";
  j["functions"][0]["max_head_dim"] = 256;
  j["functions"].push_back(j["functions"][0]);
  j["functions"][1]["name"] = "scale_backward_f32";
  j["functions"][1]["op"] = "scale_backward";
  j["layers"][0]["has_backward"] = true;
  j["layers"][0]["backward_function"] = "scale_backward_f32";
  const PackageMetadata m = parse_metadata(j.dump(), "m.json");
  EXPECT_EQ(m.abi_version(),
            std::to_string(BP_ABI_VERSION_MAJOR) + "." + std::to_string(BP_ABI_VERSION_MINOR));
  EXPECT_EQ(m.repo_id, "org/pkg");
  EXPECT_EQ(m.version, "1.0.0");
  EXPECT_EQ(m.license, "Apache-2.0");
  EXPECT_EQ(m.backend, "cuda");
  ASSERT_TRUE(m.backend_version);
  EXPECT_EQ(m.backend_version->str(), "13.0");
  EXPECT_EQ(m.archs, (std::vector<std::string>{"sm_80", "sm_90"}));
  EXPECT_EQ(m.library, "libpkg.so");
  ASSERT_EQ(m.functions.size(), 2u);
  EXPECT_EQ(m.functions[0].name, "scale_f32");
  EXPECT_EQ(m.functions[0].op, "scale");
  EXPECT_EQ(m.functions[0].device_type, "cpu");
  EXPECT_EQ(m.functions[0].dtypes, std::vector<std::string>{"float32"});
  ASSERT_TRUE(m.functions[0].min_compute_capability);
  EXPECT_EQ(m.functions[0].min_compute_capability->str(), "8.0");
  EXPECT_EQ(m.functions[0].max_head_dim, 256);
  ASSERT_EQ(m.layers.size(), 1u);
  EXPECT_EQ(m.layers[0].name, "Scale");
  EXPECT_TRUE(m.layers[0].has_backward);
  EXPECT_EQ(m.layers[0].backward_function, "scale_backward_f32");
  // to_json writes what parse_metadata reads.
  EXPECT_EQ(to_json(parse_metadata(to_json(m), "again.json")), to_json(m));
}

struct BadCase {
  const char* name;
  std::function<void(json&)> change;
  const char* field;  // "<file>: <field>: " starts the message
  const char* why;
};

TEST(Metadata, ErrorsNameTheFileAndTheField) {
  const std::vector<BadCase> cases = {
      {"format missing", [](json& j) { j.erase("format"); }, "format", "is missing"},
      {"format newer", [](json& j) { j["format"] = 2; }, "format", "expected 1"},
      {"abi not a version", [](json& j) { j["abi_version"] = "1"; }, "abi_version",
       "is not MAJOR.MINOR"},
      {"abi major", [](json& j) { j["abi_version"] = "2.0"; }, "abi_version",
       "this build loads ABI 1.x"},
      {"repo id", [](json& j) { j["repo_id"] = "noslash"; }, "repo_id", "not a kernel repository"},
      {"version type", [](json& j) { j["version"] = 1; }, "version", "must be a string"},
      {"license empty", [](json& j) { j["license"] = ""; }, "license", "must not be empty"},
      {"backend missing", [](json& j) { j.erase("backend"); }, "backend", "is missing"},
      {"backend name", [](json& j) { j["backend"] = json::object(); }, "backend.name",
       "is missing"},
      {"cuda without version",
       [](json& j) {
         j["backend"] = {{"name", "cuda"}};
       },
       "backend.version", "is missing"},
      {"cpu with version",
       [](json& j) {
         j["backend"] = {{"name", "cpu"}, {"version", "1.0"}};
       },
       "backend.version", "has no version"},
      {"archs not list", [](json& j) { j["archs"] = "x86_64"; }, "archs", "array of strings"},
      {"library path", [](json& j) { j["library"] = "../lib.so"; }, "library",
       "must be a file name"},
      {"no functions", [](json& j) { j["functions"] = json::array(); }, "functions",
       "at least one"},
      {"function op", [](json& j) { j["functions"][0]["op"] = "Scale-Op"; }, "functions[0].op",
       "1-64 characters"},
      {"function device", [](json& j) { j["functions"][0]["device_type"] = "CPU"; },
       "functions[0].device_type", "must be a device type"},
      {"function dtypes", [](json& j) { j["functions"][0]["dtypes"] = {1}; }, "functions[0].dtypes",
       "non-empty strings"},
      {"function capability", [](json& j) { j["functions"][0]["min_compute_capability"] = "8"; },
       "functions[0].min_compute_capability", "is not MAJOR.MINOR"},
      {"function head dim", [](json& j) { j["functions"][0]["max_head_dim"] = -1; },
       "functions[0].max_head_dim", "from 0"},
      {"function twice", [](json& j) { j["functions"].push_back(j["functions"][0]); },
       "functions[1].name", "listed twice"},
      {"layer name", [](json& j) { j["layers"][0]["name"] = "1Scale"; }, "layers[0].name",
       "class name"},
      {"layer function", [](json& j) { j["layers"][0]["function"] = "nope"; }, "layers[0].function",
       "not one of the package's functions"},
      {"layer backward", [](json& j) { j["layers"][0]["has_backward"] = "yes"; },
       "layers[0].has_backward", "true or false"},
      {"backward without its function", [](json& j) { j["layers"][0]["has_backward"] = true; },
       "layers[0].has_backward", "backward_function must name the function"},
      {"backward function without has_backward",
       [](json& j) { j["layers"][0]["backward_function"] = "scale_f32"; },
       "layers[0].backward_function", "has_backward must be true"},
      {"backward function unknown",
       [](json& j) {
         j["layers"][0]["has_backward"] = true;
         j["layers"][0]["backward_function"] = "nope";
       },
       "layers[0].backward_function", "not one of the package's functions"},
  };
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.name);
    json j = test_metadata();
    c.change(j);
    try {
      parse_metadata(j.dump(), "build/v/metadata.json");
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgument& e) {
      const std::string prefix = std::string("build/v/metadata.json: ") + c.field + ": ";
      EXPECT_EQ(std::string(e.what()).rfind(prefix, 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.why), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parse_metadata("{not json", "m.json"), InvalidArgument);
}

TEST(Metadata, MustFitItsVariantFolder) {
  json j = test_metadata();
  j["backend"] = {{"name", "cuda"}, {"version", "12.8"}};
  const PackageMetadata cuda128 = parse_metadata(j.dump(), "m.json");
  EXPECT_NO_THROW(
      check_metadata_fits(cuda128, BuildVariant::parse("cxx11-cu128-x86_64-linux"), "m.json"));
  EXPECT_NO_THROW(check_metadata_fits(cuda128, BuildVariant::parse("noarch-cuda"), "m.json"));
  EXPECT_NO_THROW(check_metadata_fits(cuda128, BuildVariant::parse("noarch-universal"), "m.json"));
  const std::pair<const char*, const char*> bad[] = {
      {"cxx11-cu130-x86_64-linux", "m.json: backend.version: '12.8' does not match"},
      {"cxx11-cpu-x86_64-linux", "m.json: backend.name: 'cuda' does not match"},
      {"noarch-rocm", "m.json: backend.name: 'cuda' does not match"},
  };
  for (const auto& [variant, why] : bad) {
    SCOPED_TRACE(variant);
    try {
      check_metadata_fits(cuda128, BuildVariant::parse(variant), "m.json");
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()).rfind(why, 0), 0u) << e.what();
    }
  }
}

TEST(Metadata, ArchListAgainstTheDevice) {
  json j = test_metadata();
  j["backend"] = {{"name", "cuda"}, {"version", "13.0"}};
  j["archs"] = {"sm_80", "sm_90a"};
  const PackageMetadata m = parse_metadata(j.dump(), "m.json");
  struct Case {
    int major, minor;
    bool runs;
  };
  for (const Case& c : {Case{8, 0, true}, Case{8, 6, true}, Case{8, 9, true}, Case{9, 0, true},
                        Case{7, 5, false}, Case{10, 0, false}}) {
    DeviceInfo d;
    d.device = Device("cuda", 0);
    d.compute_capability = ComputeCapability{c.major, c.minor};
    EXPECT_EQ(arch_mismatch(m, d).empty(), c.runs) << c.major << "." << c.minor;
  }
  const PackageMetadata cpu = parse_metadata(test_metadata().dump(), "m.json");
  DeviceInfo host;
  host.arch = SystemFacts::host().cpu;
  EXPECT_EQ(arch_mismatch(cpu, host), "");
  host.arch = "riscv64";
  EXPECT_NE(arch_mismatch(cpu, host).find("cpu:0 is riscv64"), std::string::npos);
}

}  // namespace
}  // namespace backplane::hub
