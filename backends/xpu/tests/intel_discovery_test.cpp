// Identifier formats and the capability rule of the xpu plugin.
#include <gtest/gtest.h>

#include <backplane/plugin.h>

#include "intel_discovery.hpp"

namespace backplane::xpu {
namespace {

TEST(FormatZeUuid, Forms) {
  ze_device_uuid_t uuid{};
  EXPECT_EQ(format_ze_uuid(uuid), "");
  for (uint8_t i = 0; i < ZE_MAX_DEVICE_UUID_SIZE; ++i) uuid.id[i] = static_cast<uint8_t>(i * 17);
  EXPECT_EQ(format_ze_uuid(uuid), "00112233-4455-6677-8899-aabbccddeeff");
}

TEST(FormatPciAddress, Table) {
  struct Case {
    ze_pci_address_ext_t address;
    const char* expected;
  };
  const Case cases[] = {
      {{0, 0x3a, 0, 0}, "0000:3a:00.0"},
      {{1, 0xff, 0x1f, 7}, "0001:ff:1f.7"},
      {{0x10000, 2, 3, 1}, "10000:02:03.1"},
  };
  for (const Case& c : cases) EXPECT_EQ(format_pci_address(c.address), c.expected);
}

TEST(IntelCapabilities, FromModuleProperties) {
  ze_device_module_properties_t module{};
  EXPECT_EQ(intel_capabilities(module), uint64_t{BP_CAP_BF16});
  module.fp16flags = ZE_DEVICE_FP_FLAG_ROUND_TO_NEAREST;
  EXPECT_EQ(intel_capabilities(module), uint64_t{BP_CAP_BF16 | BP_CAP_FP16});
  module.fp64flags = ZE_DEVICE_FP_FLAG_FMA;
  EXPECT_EQ(intel_capabilities(module), uint64_t{BP_CAP_BF16 | BP_CAP_FP16 | BP_CAP_FP64});
}

}  // namespace
}  // namespace backplane::xpu
