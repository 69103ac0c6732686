// Our HIP declarations (hip_api.hpp) against HIP's own header, where it is installed.
#include <gtest/gtest.h>

#include "hip_api.hpp"

#ifdef BACKPLANE_HAVE_HIP_HEADER
#include <hip/hip_runtime_api.h>
#include <hip/hip_version.h>

#include <cstddef>
#endif

namespace backplane::rocm {
namespace {

#ifdef BACKPLANE_HAVE_HIP_HEADER
TEST(HipAbi, DeclarationsMatchTheHeader) {
  // The offsets are those of HIP 5.x; ROCm 6 headers describe hipDeviceProp_tR0600 instead.
  if (HIP_VERSION_MAJOR != 5) GTEST_SKIP() << "HIP " << HIP_VERSION_MAJOR << " header";
  EXPECT_EQ(offsetof(hipDeviceProp_t, gcnArchName), kHipDevicePropGcnArchNameOffset);
  EXPECT_EQ(sizeof(hipDeviceProp_t::gcnArchName), kHipDevicePropGcnArchNameSize);
  EXPECT_LT(sizeof(hipDeviceProp_t), kHipDevicePropBufferSize);
  EXPECT_EQ(static_cast<int>(hipDeviceAttributeClockRate),
            static_cast<int>(HipAttribute::kClockRate));
  EXPECT_EQ(static_cast<int>(hipDeviceAttributeIntegrated),
            static_cast<int>(HipAttribute::kIntegrated));
  EXPECT_EQ(static_cast<int>(hipDeviceAttributeMultiprocessorCount),
            static_cast<int>(HipAttribute::kMultiprocessorCount));
  EXPECT_EQ(static_cast<int>(hipDeviceAttributeWarpSize),
            static_cast<int>(HipAttribute::kWarpSize));
  EXPECT_EQ(static_cast<int>(hipSuccess), kHipSuccess);
  EXPECT_EQ(sizeof(hipUUID), sizeof(HipUuid));
  EXPECT_EQ(sizeof(hipDevice_t), sizeof(int));
}
#else
TEST(HipAbi, DeclarationsMatchTheHeader) {
  GTEST_SKIP() << "the HIP headers are not installed (apt-get install libamdhip64-dev)";
}
#endif

}  // namespace
}  // namespace backplane::rocm
