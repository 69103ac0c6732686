// The pure conversions from driver values to registered values, by tables.
#include <backplane/plugin.h>
#include <gtest/gtest.h>

#include <string>

#include "device_facts.hpp"
#include "discovery.hpp"

namespace backplane::cuda {
namespace {

TEST(FormatUuid, GroupsSixteenBytesAsNvidiaSmiDoes) {
  const char bytes[16] = {'\x2f', '\x6b', '\x3a', '\xb5', '\x8c', '\x3f', '\x8a', '\x1e',
                          '\xe1', '\xb5', '\x2d', '\x0b', '\xa8', '\xe5', '\xf5', '\xa1'};
  EXPECT_EQ(format_uuid(bytes), "GPU-2f6b3ab5-8c3f-8a1e-e1b5-2d0ba8e5f5a1");
  EXPECT_EQ(format_uuid(bytes, "MIG-"), "MIG-2f6b3ab5-8c3f-8a1e-e1b5-2d0ba8e5f5a1");
}

TEST(FormatUuid, KeepsZerosAndHighBytes) {
  const char zeros[16] = {};
  EXPECT_EQ(format_uuid(zeros), "GPU-00000000-0000-0000-0000-000000000000");
  char ones[16];
  for (char& c : ones) c = '\xff';
  EXPECT_EQ(format_uuid(ones), "GPU-ffffffff-ffff-ffff-ffff-ffffffffffff");
}

TEST(ArchName, IsSmMajorMinor) {
  const struct {
    int major, minor;
    const char* arch;
  } cases[] = {
      {3, 5, "sm_35"},   {5, 3, "sm_53"},   {6, 1, "sm_61"},   {7, 0, "sm_70"},   {7, 5, "sm_75"},
      {8, 0, "sm_80"},   {8, 6, "sm_86"},   {8, 9, "sm_89"},   {9, 0, "sm_90"},   {10, 0, "sm_100"},
      {10, 3, "sm_103"}, {11, 0, "sm_110"}, {12, 0, "sm_120"}, {12, 1, "sm_121"},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(arch_name(c.major, c.minor), c.arch) << c.major << "." << c.minor;
  }
}

TEST(CapabilitiesFor, FollowsComputeCapability) {
  constexpr uint64_t f16 = BP_CAP_FP16, bf16 = BP_CAP_BF16, tf32 = BP_CAP_TF32, fp8 = BP_CAP_FP8,
                     f64 = BP_CAP_FP64;
  const struct {
    int major, minor;
    uint64_t caps;
  } cases[] = {
      {3, 5, f64},                             // Kepler
      {5, 2, f64},                             // Maxwell
      {5, 3, f64 | f16},                       // Jetson TX1: first with fp16 arithmetic
      {6, 0, f64 | f16},                       // P100
      {7, 0, f64 | f16},                       // V100
      {7, 5, f64 | f16},                       // T4
      {8, 0, f64 | f16 | bf16 | tf32},         // A100
      {8, 6, f64 | f16 | bf16 | tf32},         // A10, RTX 30xx
      {8, 7, f64 | f16 | bf16 | tf32},         // Orin
      {8, 9, f64 | f16 | bf16 | tf32 | fp8},   // L4, L40, RTX 40xx
      {9, 0, f64 | f16 | bf16 | tf32 | fp8},   // H100, H200
      {10, 0, f64 | f16 | bf16 | tf32 | fp8},  // B200
      {12, 0, f64 | f16 | bf16 | tf32 | fp8},  // RTX 50xx
  };
  for (const auto& c : cases) {
    EXPECT_EQ(capabilities_for(c.major, c.minor), c.caps) << c.major << "." << c.minor;
  }
  EXPECT_EQ(capabilities_for(9, 0) & BP_CAP_UNIFIED_MEMORY, 0u);
}

TEST(NormalizePciBusId, GivesLowerCaseFourDigitDomain) {
  const struct {
    const char* in;
    const char* out;
  } cases[] = {
      {"0000:3B:00.0", "0000:3b:00.0"},      // cuDeviceGetPCIBusId
      {"00000000:3B:00.0", "0000:3b:00.0"},  // nvidia-smi
      {"0000:18:00.0", "0000:18:00.0"},      {"00000001:AF:1F.7", "0001:af:1f.7"},
      {"00010000:01:00.0", "10000:01:00.0"},  // a domain above 0xffff (VMD) keeps its digits
  };
  for (const auto& c : cases) EXPECT_EQ(normalize_pci_bus_id(c.in), c.out) << c.in;
}

TEST(DriverVersionString, IsMajorDotMinor) {
  EXPECT_EQ(driver_version_string(12040), "12.4");
  EXPECT_EQ(driver_version_string(13000), "13.0");
  EXPECT_EQ(driver_version_string(11080), "11.8");
  EXPECT_EQ(driver_version_string(12090), "12.9");
}

TEST(NoDeviceHint, NamesTheVisibilityVariableAndNvmlCount) {
  EXPECT_EQ(no_device_hint(std::nullopt, std::nullopt), "");
  EXPECT_EQ(no_device_hint(std::nullopt, 2u), " (NVML sees 2 GPUs)");
  EXPECT_EQ(no_device_hint(std::string(""), std::nullopt),
            " (CUDA_VISIBLE_DEVICES is set but empty, which hides every device)");
  EXPECT_EQ(no_device_hint(std::string(""), 1u),
            " (CUDA_VISIBLE_DEVICES is set but empty, which hides every device; NVML sees 1 GPU)");
  EXPECT_EQ(no_device_hint(std::string("7"), 4u),
            " (CUDA_VISIBLE_DEVICES=\"7\" may name no device that exists; unset it to see them "
            "all; NVML sees 4 GPUs)");
}

}  // namespace
}  // namespace backplane::cuda
