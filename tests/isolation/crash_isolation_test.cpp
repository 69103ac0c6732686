// Crash isolation (RuntimeOptions::isolate): a plugin that crashes, hangs or exits in init is
// failed with how it ended, and the plugins beside it still load, with the report complete.
#include <backplane/runtime/runtime.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "plugin_folder.hpp"

namespace backplane::testing {
namespace {

using ::testing::HasSubstr;

struct Misbehaviour {
  const char* variant;
  const char* reason;
};

// The test name's parameter, readable in ctest and GoogleTest output.
inline void PrintTo(const Misbehaviour& x, std::ostream* os) {
  *os << x.variant;
}

class CrashIsolation : public ::testing::TestWithParam<Misbehaviour> {};

TEST_P(CrashIsolation, FailsThePluginWithHowInitEndedAndLoadsTheOthers) {
  const Misbehaviour& bad = GetParam();
  PluginFolder dir;
  dir.add_manifest(std::string("fake_") + bad.variant, fake_library(bad.variant), {"fakeaccel"});
  dir.add_manifest("fake_good", fake_library("good"), {"fakeaccel"});
  dir.add_manifest("fake_other", fake_library("other"), {"fakeother"});
  RuntimeOptions options = dir.options();
  options.isolate = true;
  options.isolate_timeout = std::chrono::milliseconds(1000);
  const Runtime rt = Runtime::open(options);

  const PluginInfo& failed = plugin_named(rt, std::string("fake_") + bad.variant);
  EXPECT_EQ(failed.status, PluginStatus::kFailed) << describe(rt);
  EXPECT_EQ(failed.error, bad.reason) << describe(rt);
  EXPECT_TRUE(dir.log().contains("plugin 'fake_" + std::string(bad.variant) + "' (" +
                                 failed.manifest.string() + ") skipped: " + bad.reason))
      << dir.log().dump();

  ASSERT_EQ(rt.plugins().size(), 3u) << describe(rt);
  EXPECT_EQ(plugin_named(rt, "fake_good").status, PluginStatus::kLoaded) << describe(rt);
  EXPECT_EQ(plugin_named(rt, "fake_other").status, PluginStatus::kLoaded) << describe(rt);
  EXPECT_EQ(rt.devices("fakeaccel").size(), 2u);
  EXPECT_EQ(rt.devices("fakeother").size(), 2u);
  // The children log nothing: each good plugin's init ran once here, after its probe.
  EXPECT_EQ(dir.log().count("plugin 'fake_good': init"), 1u) << dir.log().dump();
  EXPECT_EQ(dir.log().count("plugin 'fake_" + std::string(bad.variant) + "': init"), 0u);
}

INSTANTIATE_TEST_SUITE_P(
    Misbehaviours, CrashIsolation,
    ::testing::Values(Misbehaviour{"init_segfault", "init crashed with SIGSEGV"},
                      Misbehaviour{"init_hang", "init did not finish within 1 s"},
                      Misbehaviour{"init_exit", "init called exit(3)"}),
    [](const ::testing::TestParamInfo<Misbehaviour>& i) { return i.param.variant; });

TEST(CrashIsolationRefusals, AreTheSameAsWithoutIsolation) {
  for (const char* variant : {"init_error", "wrong_name", "no_entry"}) {
    PluginFolder plain;
    plain.add_manifest(std::string("fake_") + variant, fake_library(variant), {"fakeaccel"});
    PluginFolder isolated;
    isolated.add_manifest(std::string("fake_") + variant, fake_library(variant), {"fakeaccel"});
    RuntimeOptions options = isolated.options();
    options.isolate = true;
    const Runtime expected = plain.open();
    const Runtime got = Runtime::open(options);
    ASSERT_EQ(got.plugins().size(), 1u);
    EXPECT_EQ(got.plugins()[0].status, PluginStatus::kFailed) << variant;
    EXPECT_EQ(got.plugins()[0].error, expected.plugins()[0].error) << variant;
  }
}

TEST(CrashIsolationRefusals, ADuplicateTypeIsRefusedInTheChildToo) {
  PluginFolder dir;
  dir.add_manifest("fake_good", fake_library("good"), {"fakeaccel"});
  dir.add_manifest("fake_duplicate_type", fake_library("duplicate_type"), {"fakeaccel"});
  RuntimeOptions options = dir.options();
  options.isolate = true;
  const Runtime rt = Runtime::open(options);
  EXPECT_EQ(plugin_named(rt, "fake_good").status, PluginStatus::kLoaded) << describe(rt);
  const PluginInfo& duplicate = plugin_named(rt, "fake_duplicate_type");
  EXPECT_EQ(duplicate.status, PluginStatus::kFailed) << describe(rt);
  EXPECT_THAT(duplicate.error,
              HasSubstr("device type 'fakeaccel' is already provided by plugin 'fake_good'"))
      << describe(rt);
}

}  // namespace
}  // namespace backplane::testing
