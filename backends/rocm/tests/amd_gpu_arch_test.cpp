// gfx target parsing, the capability table, and identifier formats.
#include <gtest/gtest.h>

#include <backplane/plugin.h>

#include <cstring>
#include <string>
#include <vector>

#include "amd_gpu_arch.hpp"

namespace backplane::rocm {
namespace {

TEST(ParseGcnArchName, Targets) {
  struct Case {
    const char* text;
    const char* processor;
    int major, minor, stepping;
    std::vector<std::string> features;
  };
  const Case cases[] = {
      {"gfx90a:sramecc+:xnack-", "gfx90a", 9, 0, 0xa, {"sramecc+", "xnack-"}},
      {"gfx942:sramecc+:xnack-", "gfx942", 9, 4, 2, {"sramecc+", "xnack-"}},
      {"gfx950", "gfx950", 9, 5, 0, {}},
      {"gfx908:xnack-", "gfx908", 9, 0, 8, {"xnack-"}},
      {"gfx906", "gfx906", 9, 0, 6, {}},
      {"gfx90c:xnack-", "gfx90c", 9, 0, 0xc, {"xnack-"}},
      {"gfx803", "gfx803", 8, 0, 3, {}},
      {"gfx1030", "gfx1030", 10, 3, 0, {}},
      {"gfx1100", "gfx1100", 11, 0, 0, {}},
      {"gfx1201", "gfx1201", 12, 0, 1, {}},
      {"gfx90a::xnack+", "gfx90a", 9, 0, 0xa, {"xnack+"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const auto arch = parse_gcn_arch_name(c.text);
    ASSERT_TRUE(arch.has_value());
    EXPECT_EQ(arch->processor, c.processor);
    EXPECT_EQ(arch->major, c.major);
    EXPECT_EQ(arch->minor, c.minor);
    EXPECT_EQ(arch->stepping, c.stepping);
    EXPECT_EQ(arch->features, c.features);
  }
}

TEST(ParseGcnArchName, RejectsWhatIsNotATarget) {
  for (const char* text : {"", "gfx", "gfx90", "gfx9", "GFX90A", "sm_90", "gfx90g", "gfxa0a",
                           "gfx12345", ":gfx90a", "gfx 90a", "amdgcn-amd-amdhsa--gfx90a"}) {
    EXPECT_FALSE(parse_gcn_arch_name(text).has_value()) << text;
  }
}

TEST(AmdCapabilities, Table) {
  constexpr uint64_t base = BP_CAP_FP64;
  constexpr uint64_t fp16 = BP_CAP_FP16, bf16 = BP_CAP_BF16, fp8 = BP_CAP_FP8;
  struct Case {
    const char* target;
    uint64_t caps;
  };
  const Case cases[] = {
      {"gfx803", base},
      {"gfx900", base | fp16},
      {"gfx906", base | fp16},
      {"gfx908", base | fp16},
      {"gfx90a", base | fp16 | bf16},
      {"gfx90c", base | fp16},
      {"gfx940", base | fp16 | bf16 | fp8},
      {"gfx942", base | fp16 | bf16 | fp8},
      {"gfx950", base | fp16 | bf16 | fp8},
      {"gfx1030", base | fp16},
      {"gfx1100", base | fp16 | bf16},
      {"gfx1151", base | fp16 | bf16},
      {"gfx1201", base | fp16 | bf16 | fp8},
  };
  for (const Case& c : cases) {
    const auto arch = parse_gcn_arch_name(c.target);
    ASSERT_TRUE(arch.has_value()) << c.target;
    EXPECT_EQ(amd_capabilities(*arch, false), c.caps) << c.target;
  }
}

TEST(AmdCapabilities, IntegratedGpusShareHostMemory) {
  const auto arch = parse_gcn_arch_name("gfx1151");
  ASSERT_TRUE(arch.has_value());
  EXPECT_TRUE(amd_capabilities(*arch, true) & BP_CAP_UNIFIED_MEMORY);
  EXPECT_FALSE(amd_capabilities(*arch, false) & BP_CAP_UNIFIED_MEMORY);
}

TEST(FormatHipUuid, AsciiUniqueIdGetsTheGpuPrefix) {
  char bytes[16];
  std::memcpy(bytes, "ab83d2ffef0d3cdf", 16);
  EXPECT_EQ(format_hip_uuid(bytes), "GPU-ab83d2ffef0d3cdf");
}

TEST(FormatHipUuid, BinaryBytesPrintAsAUuid) {
  const char bytes[16] = {0x01,
                          0x23,
                          0x45,
                          0x67,
                          static_cast<char>(0x89),
                          static_cast<char>(0xab),
                          static_cast<char>(0xcd),
                          static_cast<char>(0xef),
                          0,
                          1,
                          2,
                          3,
                          4,
                          5,
                          6,
                          7};
  EXPECT_EQ(format_hip_uuid(bytes), "01234567-89ab-cdef-0001-020304050607");
}

TEST(FormatHipUuid, AllZeroIsNone) {
  const char bytes[16] = {};
  EXPECT_EQ(format_hip_uuid(bytes), "");
}

TEST(NormalizePciBusId, Forms) {
  struct Case {
    const char* text;
    const char* expected;  // nullptr: rejected
  };
  const Case cases[] = {
      {"0000:c1:00.0", "0000:c1:00.0"},
      {"0000:C1:00.0", "0000:c1:00.0"},
      {"00000000:18:00.0", "0000:18:00.0"},
      {"c1:00.0", "0000:c1:00.0"},
      {"0001:03:1f.7", "0001:03:1f.7"},
      {"", nullptr},
      {"0000:c1:00", nullptr},
      {"0000:c1:20.0", nullptr},
      {"0000:c1:00.8", nullptr},
      {"0000:100:00.0", nullptr},
      {"0000:zz:00.0", nullptr},
      {"0000:c1:00.0 ", nullptr},
  };
  for (const Case& c : cases) {
    const auto out = normalize_pci_bus_id(c.text);
    if (c.expected == nullptr) {
      EXPECT_FALSE(out.has_value()) << c.text << " -> " << out.value_or("");
    } else {
      EXPECT_EQ(out.value_or("(rejected)"), c.expected) << c.text;
    }
  }
}

}  // namespace
}  // namespace backplane::rocm
