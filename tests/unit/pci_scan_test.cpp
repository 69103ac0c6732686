// The PCI scan agrees with sysfs, read here independently.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>

#include "pci_scan.hpp"

namespace {

unsigned read_hex(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string text;
  in >> text;
  return static_cast<unsigned>(std::stoul(text, nullptr, 16));
}

TEST(PciScan, MatchesSysfsDisplayAndAcceleratorClasses) {
  std::vector<std::string> expected;
  const std::filesystem::path root = "/sys/bus/pci/devices";
  if (std::filesystem::exists(root)) {
    for (const auto& entry : std::filesystem::directory_iterator(root)) {
      const unsigned base_class = read_hex(entry.path() / "class") >> 16;
      if (base_class == 0x03 || base_class == 0x12) expected.push_back(entry.path().filename());
    }
  }
  std::sort(expected.begin(), expected.end());

  std::vector<std::string> found;
  const std::regex bus_id("[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]");
  for (const auto& d : backplane::backends::scan_pci_accelerators()) {
    EXPECT_TRUE(std::regex_match(d.bus_id, bus_id)) << d.bus_id;
    EXPECT_TRUE((d.class_id >> 8) == 0x03 || (d.class_id >> 8) == 0x12) << d.class_id;
    EXPECT_EQ(read_hex(root / d.bus_id / "vendor"), d.vendor_id) << d.bus_id;
    found.push_back(d.bus_id);
  }
  std::sort(found.begin(), found.end());
  EXPECT_EQ(found, expected);
}

TEST(PciScan, PresenceNoteIsEmptyOrCountsTheDevices) {
  for (uint16_t vendor : {backplane::backends::kPciVendorNvidia, backplane::backends::kPciVendorAmd,
                          backplane::backends::kPciVendorIntel}) {
    const auto devices = backplane::backends::pci_devices_of(vendor);
    const std::string note = backplane::backends::pci_presence_note(vendor, "X");
    if (devices.empty()) {
      EXPECT_EQ(note, "");
    } else {
      EXPECT_NE(note.find(std::to_string(devices.size()) + " X device"), std::string::npos);
    }
  }
}

}  // namespace
