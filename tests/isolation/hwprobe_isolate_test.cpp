// hwprobe --isolate: a plugin that crashes or exits in init no longer takes hwprobe with it; the
// report lists it as failed with how it ended, and everything else as usual.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "plugin_folder.hpp"
#include "process.hpp"

namespace backplane::testing {
namespace {

using ::testing::HasSubstr;
using testing_support::run_process;

class HwprobeIsolate : public ::testing::Test {
 protected:
  void SetUp() override {
    dir.add_manifest("fake_init_segfault", fake_library("init_segfault"), {"fakeaccel"});
    dir.add_manifest("fake_good", fake_library("good"), {"fakeaccel"});
    dir.add_manifest("fake_init_exit", fake_library("init_exit"), {"fakeother"});
    dir.add_manifest("fake_init_hang", fake_library("init_hang"), {"fakeoff"});
  }
  std::map<std::string, std::string> env(std::map<std::string, std::string> more = {}) const {
    more["BACKPLANE_PLUGIN_PATH"] = dir.path().string();
    more.emplace("BACKPLANE_ISOLATE_TIMEOUT", "0.5");
    return more;
  }
  // plugin name -> [status, error]
  static std::map<std::string, std::vector<std::string>> plugins(const std::string& json_text) {
    std::map<std::string, std::vector<std::string>> out;
    const nlohmann::json report = nlohmann::json::parse(json_text);
    for (const auto& p : report.at("plugins")) {
      out[p.at("name").get<std::string>()] = {
          p.at("status").get<std::string>(),
          p.at("error").is_null() ? std::string() : p.at("error").get<std::string>()};
    }
    return out;
  }

  PluginFolder dir;
};

TEST_F(HwprobeIsolate, ReportsEachMisbehaviourAndTheRest) {
  const std::map<std::string, std::vector<std::string>> expected = {
      {"fake_init_segfault", {"failed", "init crashed with SIGSEGV"}},
      {"fake_good", {"loaded", ""}},
      {"fake_init_exit", {"failed", "init called exit(3)"}},
      {"fake_init_hang", {"failed", "init did not finish within 0.5 s"}},
  };
  // The option and the variable are the same switch.
  for (const auto& [args, variables] :
       std::vector<std::pair<std::vector<std::string>, std::map<std::string, std::string>>>{
           {{HWPROBE_PATH, "--json", "--isolate"}, env()},
           {{HWPROBE_PATH, "--json"}, env({{"BACKPLANE_ISOLATE", "1"}})}}) {
    const auto result = run_process(args, variables);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    EXPECT_EQ(plugins(result.out), expected) << result.out;
    const auto devices = nlohmann::json::parse(result.out).at("devices");
    EXPECT_EQ(devices.size(), 2u) << devices.dump();  // fake_good's two
  }
}

TEST_F(HwprobeIsolate, WithoutItTheCrashTakesHwprobeDown) {
  const auto result = run_process({HWPROBE_PATH, "--json"}, env());
  EXPECT_EQ(result.exit_code, -1) << "expected hwprobe to die of the plugin's SIGSEGV";
}

TEST_F(HwprobeIsolate, ABadVariableIsNamed) {
  const auto result = run_process({HWPROBE_PATH}, env({{"BACKPLANE_ISOLATE", "yes"}}));
  EXPECT_EQ(result.exit_code, 2);
  EXPECT_THAT(result.err, HasSubstr("BACKPLANE_ISOLATE='yes' is not a switch; expected 1 or 0"));
  const auto timeout = run_process({HWPROBE_PATH}, env({{"BACKPLANE_ISOLATE_TIMEOUT", "-1"}}));
  EXPECT_EQ(timeout.exit_code, 2);
  EXPECT_THAT(timeout.err, HasSubstr("BACKPLANE_ISOLATE_TIMEOUT='-1' is not a timeout"));
}

}  // namespace
}  // namespace backplane::testing
