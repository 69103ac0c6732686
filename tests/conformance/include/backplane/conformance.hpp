// The plugin conformance suite (after PJRT's pjrt_c_api_test.h): the checks every backplane
// plugin must pass, run against one plugin alone, loaded from its manifest. A plugin joins with
// one line in a GoogleTest program linked with backplane_conformance (and GTest::gtest_main):
//
//   #include <backplane/conformance.hpp>
//   BACKPLANE_CONFORMANCE_SUITE(cpu, "/path/to/lib/backplane/plugins/cpu.json");
//
// Use the macro at global scope, once per plugin; NAME (an identifier) prefixes the test
// names: cpu/PluginConformance.DevicesAreWellFormed/cpu.
#pragma once

#include <backplane/runtime/runtime.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>
#include <ostream>
#include <string>
#include <vector>

namespace backplane::conformance {

// One plugin under test.
struct PluginUnderTest {
  std::string label;               // NAME of the macro
  std::filesystem::path manifest;  // the plugin's manifest file
};

// For GoogleTest's messages and ctest's test names: the label.
void PrintTo(const PluginUnderTest& plugin, std::ostream* os);

// Makes the suite's parameter. Defined next to the suite's tests, so that a program using the
// macro links them in (an object of a static library is linked only when something uses it).
PluginUnderTest plugin_under_test(const char* label, const std::filesystem::path& manifest);

// Test name suffix: the label.
std::string plugin_test_name(const ::testing::TestParamInfo<PluginUnderTest>& info);

class PluginConformance : public ::testing::TestWithParam<PluginUnderTest> {
 protected:
  // A runtime that searches only the plugin's manifest, logging at info into log().
  Runtime open() const;
  // The one plugin record of `runtime`; fails the test when there is not exactly one.
  static const PluginInfo* the_plugin(const Runtime& runtime);
  // Every captured log line, for failure messages.
  std::string log() const;

 private:
  mutable std::mutex mutex_;
  mutable std::vector<std::string> log_;
};

}  // namespace backplane::conformance

// Runs the conformance suite on the plugin that MANIFEST (a path) describes.
#define BACKPLANE_CONFORMANCE_SUITE(NAME, MANIFEST)                                    \
  namespace backplane::conformance {                                                   \
  INSTANTIATE_TEST_SUITE_P(                                                            \
      NAME, PluginConformance,                                                         \
      ::testing::Values(::backplane::conformance::plugin_under_test(#NAME, MANIFEST)), \
      ::backplane::conformance::plugin_test_name);                                     \
  }                                                                                    \
  static_assert(true, "BACKPLANE_CONFORMANCE_SUITE is used at global scope")
