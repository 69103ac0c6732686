// Opening the HIP runtime: the reasons given when it is missing or is not a HIP runtime.
#include <gtest/gtest.h>

#include "hip_api.hpp"

namespace backplane::rocm {
namespace {

TEST(HipRuntimeOpen, MissingLibraryNamesTheFirstCandidateAndItsDlerror) {
  std::string error;
  EXPECT_EQ(
      HipRuntime::open({"libbackplane-absent-hip.so.5", "/nonexistent/libamdhip64.so.5"}, error),
      nullptr);
  EXPECT_EQ(error,
            "the HIP runtime libbackplane-absent-hip.so.5 was not found "
            "(libbackplane-absent-hip.so.5: cannot open shared object file: No such file or "
            "directory)");
}

TEST(HipRuntimeOpen, ALibraryThatIsNotHip) {
  std::string error;
  EXPECT_EQ(HipRuntime::open({"libc.so.6"}, error), nullptr);
  EXPECT_EQ(error, "the HIP runtime libc.so.6 lacks hipInit (too old or not a HIP runtime)");
}

}  // namespace
}  // namespace backplane::rocm
