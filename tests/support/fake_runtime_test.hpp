// The fixture of a plugin's tests against a fake vendor library (backends/*/tests: the fake
// libcuda, HIP runtime and Level Zero loader), which ctest puts first on LD_LIBRARY_PATH.
// The fakes take their mode from environment variables, as the plugins take visibility: each
// test starts and ends with all of them unset, so that none leaks into the next.
#pragma once

#include <gtest/gtest.h>

#include <stdlib.h>

#include <string>
#include <utility>
#include <vector>

namespace backplane::testing {

// True when `folder` (where a fake library was built) is on LD_LIBRARY_PATH.
inline bool library_path_has(const std::string& folder) {
  const char* path = ::getenv("LD_LIBRARY_PATH");
  return path != nullptr && std::string(path).find(folder) != std::string::npos;
}

class FakeRuntimeTest : public ::testing::Test {
 protected:
  // `fake_folder`: the test skips unless it is on LD_LIBRARY_PATH; nullptr when the test checks
  // for its fake itself. `variables`: the fake's switches and the visibility variables.
  FakeRuntimeTest(const char* fake_folder, std::vector<std::string> variables)
      : fake_folder_(fake_folder), variables_(std::move(variables)) {}

  void SetUp() override {
    if (fake_folder_ != nullptr && !library_path_has(fake_folder_)) {
      GTEST_SKIP() << "run through ctest, which puts " << fake_folder_ << " on LD_LIBRARY_PATH";
    }
    unset_variables();
  }
  void TearDown() override { unset_variables(); }

 private:
  void unset_variables() const {
    for (const std::string& name : variables_) ::unsetenv(name.c_str());
  }

  const char* fake_folder_;
  std::vector<std::string> variables_;
};

}  // namespace backplane::testing
