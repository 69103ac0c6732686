// RuntimeOptions::from_environment and the BACKPLANE_* variables. Every test starts with all of
// them unset and puts the process environment back as it found it.
#include <backplane/error.hpp>
#include <backplane/runtime/runtime.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "plugin_folder.hpp"

namespace backplane::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const char* const kVariables[] = {"BACKPLANE_PLUGIN_PATH", "BACKPLANE_ADD_PLUGIN_PATH",
                                  "BACKPLANE_PLUGINS", "BACKPLANE_DISABLE_PLUGINS",
                                  "BACKPLANE_LOG"};

class EnvironmentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* name : kVariables) {
      if (const char* value = std::getenv(name)) saved_[name] = value;
      ::unsetenv(name);
    }
  }
  void TearDown() override {
    for (const char* name : kVariables) {
      auto it = saved_.find(name);
      if (it == saved_.end()) {
        ::unsetenv(name);
      } else {
        ::setenv(name, it->second.c_str(), 1);
      }
    }
  }
  static void set(const char* name, const std::string& value) {
    ASSERT_EQ(::setenv(name, value.c_str(), 1), 0);
  }

  // from_environment, with the log captured by `dir`.
  static Runtime open_from_environment(const PluginFolder& dir) {
    RuntimeOptions options = RuntimeOptions::from_environment();
    options.log_sink = dir.options().log_sink;
    return Runtime::open(options);
  }

  std::map<std::string, std::string> saved_;
};

TEST_F(EnvironmentTest, NothingSetGivesDefaults) {
  const RuntimeOptions options = RuntimeOptions::from_environment();
  EXPECT_FALSE(options.plugin_path.has_value());
  EXPECT_TRUE(options.add_plugin_path.empty());
  EXPECT_FALSE(options.only_plugins.has_value());
  EXPECT_TRUE(options.disabled_plugins.empty());
  EXPECT_EQ(options.log_level, LogLevel::kWarn);
}

TEST_F(EnvironmentTest, PluginPathSplitsOnColons) {
  set("BACKPLANE_PLUGIN_PATH", "/opt/a: /opt/b ::");
  const RuntimeOptions options = RuntimeOptions::from_environment();
  ASSERT_TRUE(options.plugin_path.has_value());
  EXPECT_THAT(*options.plugin_path, ElementsAre("/opt/a", "/opt/b"));
}

TEST_F(EnvironmentTest, EmptyPluginPathStillReplacesTheSearchPath) {
  set("BACKPLANE_PLUGIN_PATH", "");
  const RuntimeOptions options = RuntimeOptions::from_environment();
  ASSERT_TRUE(options.plugin_path.has_value());
  EXPECT_TRUE(options.plugin_path->empty());
}

TEST_F(EnvironmentTest, AddPluginPath) {
  set("BACKPLANE_ADD_PLUGIN_PATH", "/opt/x:/opt/y");
  const RuntimeOptions options = RuntimeOptions::from_environment();
  EXPECT_FALSE(options.plugin_path.has_value());
  EXPECT_THAT(options.add_plugin_path, ElementsAre("/opt/x", "/opt/y"));
}

TEST_F(EnvironmentTest, PluginsAndDisablePluginsSplitOnCommas) {
  set("BACKPLANE_PLUGINS", "cpu, fake_good,,");
  set("BACKPLANE_DISABLE_PLUGINS", " mps ,fake_other");
  const RuntimeOptions options = RuntimeOptions::from_environment();
  ASSERT_TRUE(options.only_plugins.has_value());
  EXPECT_THAT(*options.only_plugins, ElementsAre("cpu", "fake_good"));
  EXPECT_THAT(options.disabled_plugins, ElementsAre("mps", "fake_other"));
}

TEST_F(EnvironmentTest, LogLevels) {
  const std::pair<const char*, LogLevel> levels[] = {{"error", LogLevel::kError},
                                                     {"warn", LogLevel::kWarn},
                                                     {"info", LogLevel::kInfo},
                                                     {"debug", LogLevel::kDebug}};
  for (const auto& [text, level] : levels) {
    set("BACKPLANE_LOG", text);
    EXPECT_EQ(RuntimeOptions::from_environment().log_level, level) << text;
  }
}

TEST_F(EnvironmentTest, InvalidLogLevelThrowsNamingTheVariable) {
  for (const char* bad : {"loud", "DEBUG", ""}) {
    set("BACKPLANE_LOG", bad);
    try {
      RuntimeOptions::from_environment();
      ADD_FAILURE() << "expected InvalidArgument for BACKPLANE_LOG='" << bad << "'";
    } catch (const InvalidArgument& e) {
      EXPECT_THAT(e.what(), HasSubstr(std::string("BACKPLANE_LOG='") + bad +
                                      "' is not a log level; expected one of error, warn, "
                                      "info, debug"));
    }
  }
}

TEST_F(EnvironmentTest, RuntimeFollowsPluginPathAndDisablePlugins) {
  PluginFolder dir;
  dir.add_manifest("fake_good", fake_library("good"), {"fakeaccel"});
  dir.add_manifest("fake_other", fake_library("other"), {"fakeother"});
  set("BACKPLANE_PLUGIN_PATH", dir.path().string());
  set("BACKPLANE_DISABLE_PLUGINS", "fake_other");
  const Runtime rt = open_from_environment(dir);
  EXPECT_THAT(rt.search_path(), ElementsAre(dir.path()));
  ASSERT_EQ(rt.plugins().size(), 2u) << describe(rt);
  EXPECT_EQ(plugin_named(rt, "fake_good").status, PluginStatus::kLoaded);
  EXPECT_EQ(plugin_named(rt, "fake_other").status, PluginStatus::kDisabled);
  EXPECT_EQ(plugin_named(rt, "fake_other").error, "disabled by request");
  EXPECT_EQ(rt.devices().size(), 2u);
}

TEST_F(EnvironmentTest, RuntimeFollowsPlugins) {
  PluginFolder dir;
  dir.add_manifest("fake_good", fake_library("good"), {"fakeaccel"});
  dir.add_manifest("fake_other", fake_library("other"), {"fakeother"});
  set("BACKPLANE_PLUGIN_PATH", dir.path().string());
  set("BACKPLANE_PLUGINS", "fake_other");
  const Runtime rt = open_from_environment(dir);
  EXPECT_EQ(plugin_named(rt, "fake_good").status, PluginStatus::kDisabled);
  EXPECT_EQ(plugin_named(rt, "fake_good").error, "not among the selected plugins (fake_other)");
  EXPECT_EQ(plugin_named(rt, "fake_other").status, PluginStatus::kLoaded);
  ASSERT_EQ(rt.devices().size(), 2u);
  EXPECT_EQ(rt.devices()[0].device, Device("fakeother", 0));
}

TEST_F(EnvironmentTest, RuntimeFollowsAddPluginPath) {
  PluginFolder dir;
  dir.add_manifest("fake_good", fake_library("good"), {"fakeaccel"});
  set("BACKPLANE_ADD_PLUGIN_PATH", dir.path().string());
  set("BACKPLANE_PLUGINS", "fake_good");  // the default folder's plugins are not loaded
  const Runtime rt = open_from_environment(dir);
  EXPECT_THAT(rt.search_path(), ElementsAre(dir.path(), default_plugin_directory()));
  EXPECT_EQ(plugin_named(rt, "fake_good").status, PluginStatus::kLoaded);
}

TEST_F(EnvironmentTest, RuntimeFollowsLog) {
  PluginFolder dir;
  dir.add_manifest("fake_good", fake_library("good"), {"fakeaccel"});
  set("BACKPLANE_PLUGIN_PATH", dir.path().string());
  set("BACKPLANE_LOG", "error");
  { const Runtime rt = open_from_environment(dir); }
  EXPECT_FALSE(dir.log().contains("plugin 'fake_good': init")) << dir.log().dump();
  set("BACKPLANE_LOG", "info");
  { const Runtime rt = open_from_environment(dir); }
  EXPECT_TRUE(dir.log().contains("info: plugin 'fake_good': init")) << dir.log().dump();
  EXPECT_FALSE(dir.log().contains("debug: ")) << dir.log().dump();
}

TEST_F(EnvironmentTest, OpenWithoutArgumentsReadsTheEnvironment) {
  PluginFolder dir;
  dir.add_manifest("fake_good", fake_library("good"), {"fakeaccel"});
  set("BACKPLANE_PLUGIN_PATH", dir.path().string());
  set("BACKPLANE_LOG", "error");  // keeps stderr quiet
  const Runtime rt = Runtime::open();
  ASSERT_EQ(rt.plugins().size(), 1u) << describe(rt);
  EXPECT_EQ(rt.plugins()[0].status, PluginStatus::kLoaded);
  EXPECT_EQ(rt.devices().size(), 2u);
}

TEST_F(EnvironmentTest, OpenWithBadLogLevelThrows) {
  set("BACKPLANE_LOG", "verbose");
  EXPECT_THROW(Runtime::open(), InvalidArgument);
}

}  // namespace
}  // namespace backplane::testing
