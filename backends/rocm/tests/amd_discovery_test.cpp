// Which visibility variable applies, and the /dev/kfd note.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "amd_discovery.hpp"

namespace backplane::rocm {
namespace {

TEST(RocmVisibilityVariable, FirstThatIsSetWins) {
  using Env = std::map<std::string, std::string>;
  struct Case {
    Env env;
    const char* expected;
  };
  const Case cases[] = {
      {{}, ""},
      {{{"PATH", "/bin"}}, ""},
      {{{"CUDA_VISIBLE_DEVICES", "1"}}, "CUDA_VISIBLE_DEVICES"},
      {{{"HIP_VISIBLE_DEVICES", "0"}, {"CUDA_VISIBLE_DEVICES", "1"}}, "HIP_VISIBLE_DEVICES"},
      {{{"ROCR_VISIBLE_DEVICES", "GPU-ab83d2ffef0d3cdf"}, {"HIP_VISIBLE_DEVICES", "0"}},
       "ROCR_VISIBLE_DEVICES"},
      {{{"HIP_VISIBLE_DEVICES", ""}}, "HIP_VISIBLE_DEVICES"},  // empty hides every GPU: it counts
  };
  for (const Case& c : cases) {
    const GetEnv getenv = [&](const char* name) -> const char* {
      auto it = c.env.find(name);
      return it == c.env.end() ? nullptr : it->second.c_str();
    };
    EXPECT_EQ(rocm_visibility_variable(getenv), c.expected);
  }
}

TEST(HipVersionString, MajorAndMinorOfHipVersion) {
  const struct {
    int version;
    const char* expected;
  } cases[] = {
      {50222411, "5.2"}, {50700000, "5.7"}, {60241134, "6.2"}, {60000000, "6.0"},
      {10000000, "1.0"}, {9999999, ""},     {0, ""},           {-1, ""},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(hip_version_string(c.version), c.expected) << c.version;
  }
}

TEST(KfdNote, OnlyWhenTheDeviceNodeIsMissing) {
  EXPECT_EQ(kfd_note("/"), "");
  EXPECT_EQ(kfd_note("/nonexistent/kfd"),
            "; /nonexistent/kfd does not exist (the amdgpu kernel driver is not loaded, or this "
            "container was started without it)");
}

}  // namespace
}  // namespace backplane::rocm
