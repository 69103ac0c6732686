// HIP error descriptions: the runtime's words where it has some, ours where it has none.
#include <gtest/gtest.h>

#include "hip_errors.hpp"

namespace backplane::rocm {
namespace {

TEST(DescribeHipError, Table) {
  struct Case {
    HipError code;
    const char* runtime_name;
    const char* runtime_text;
    const char* expected;
  };
  const Case cases[] = {
      // HIP 5.2: hipGetErrorString() repeats the name.
      {101, "hipErrorInvalidDevice", "hipErrorInvalidDevice",
       "hipErrorInvalidDevice: invalid device ordinal"},
      {100, "hipErrorNoDevice", "hipErrorNoDevice",
       "hipErrorNoDevice: no ROCm-capable device is detected"},
      // Newer runtimes have their own text.
      {100, "hipErrorNoDevice", "no ROCm-capable device is detected",
       "hipErrorNoDevice: no ROCm-capable device is detected"},
      {35, "hipErrorInsufficientDriver", "some newer wording",
       "hipErrorInsufficientDriver: some newer wording"},
      // No runtime strings at all.
      {3, nullptr, nullptr, "hipErrorNotInitialized: initialization error"},
      {1053, "", "", "hipErrorRuntimeOther: HSA runtime call other than memory returned error"},
      // A code neither side knows.
      {4242, "hipErrorUnknown", "hipErrorUnknown", "hipError 4242"},
      {4242, nullptr, "a text", "hipError 4242: a text"},
      {999, "hipErrorUnknown", "hipErrorUnknown", "hipErrorUnknown: unknown error"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(describe_hip_error(c.code, c.runtime_name, c.runtime_text), c.expected) << c.code;
  }
}

TEST(HipErrorName, KnownAndUnknown) {
  EXPECT_STREQ(hip_error_name(0), "hipSuccess");
  EXPECT_STREQ(hip_error_name(100), "hipErrorNoDevice");
  EXPECT_STREQ(hip_error_name(101), "hipErrorInvalidDevice");
  EXPECT_EQ(hip_error_name(-1), nullptr);
  EXPECT_EQ(hip_error_text(12345), nullptr);
}

}  // namespace
}  // namespace backplane::rocm
