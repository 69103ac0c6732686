// The PCI scan (sysfs) agrees with hwloc's own I/O discovery of the same bus.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <hwloc.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <regex>

#include "pci_scan.hpp"

namespace {

struct HwlocPci {
  std::string bus_id;
  unsigned vendor, class_id;
};

std::vector<HwlocPci> hwloc_accelerators() {
  // hwloc's pci plugin loads libpciaccess and unloads it again at hwloc_topology_destroy, but
  // libpciaccess keeps its device table in globals it never frees: once unloaded, LeakSanitizer
  // reports that table from an unknown module, which no suppression can name. Holding the
  // library for the whole process keeps the table reachable. Not found: nothing to hold.
  static void* const keep_libpciaccess = dlopen("libpciaccess.so.0", RTLD_NOW);
  (void)keep_libpciaccess;
  hwloc_topology_t topology = nullptr;
  hwloc_topology_init(&topology);
  hwloc_topology_set_io_types_filter(topology, HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_load(topology);
  std::vector<HwlocPci> out;
  for (hwloc_obj_t obj = hwloc_get_next_pcidev(topology, nullptr); obj != nullptr;
       obj = hwloc_get_next_pcidev(topology, obj)) {
    const auto& pci = obj->attr->pcidev;
    const unsigned base = pci.class_id >> 8u;
    if (base != 0x03 && base != 0x12) continue;
    char bus_id[32];
    std::snprintf(bus_id, sizeof bus_id, "%04x:%02x:%02x.%01x", static_cast<unsigned>(pci.domain),
                  pci.bus, pci.dev, pci.func);
    out.push_back(HwlocPci{bus_id, pci.vendor_id, pci.class_id});
  }
  hwloc_topology_destroy(topology);
  return out;
}

TEST(PciScan, AgreesWithHwloc) {
  const std::vector<HwlocPci> expected = hwloc_accelerators();
  const auto found = backplane::backends::scan_pci_accelerators();
  ASSERT_EQ(found.size(), expected.size());
  const std::regex bus_id("[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\\.[0-7]");
  for (size_t i = 0; i < found.size(); ++i) {
    EXPECT_TRUE(std::regex_match(found[i].bus_id, bus_id)) << found[i].bus_id;
    EXPECT_EQ(found[i].bus_id, expected[i].bus_id);
    EXPECT_EQ(found[i].vendor_id, expected[i].vendor);
    EXPECT_EQ(found[i].class_id, expected[i].class_id);
  }
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
