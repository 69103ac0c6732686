// A scan of the PCI bus for display, 3D and processing-accelerator controllers, so a plugin
// whose vendor runtime is missing can say "2 NVIDIA devices on the PCI bus but no usable
// driver" instead of just "no devices". Read from Linux sysfs, as hwloc's Linux backend does;
// empty elsewhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace backplane::backends {

inline constexpr uint16_t kPciVendorNvidia = 0x10de;
inline constexpr uint16_t kPciVendorAmd = 0x1002;
inline constexpr uint16_t kPciVendorIntel = 0x8086;

struct PciDevice {
  std::string bus_id;  // "0000:18:00.0"
  uint16_t vendor_id = 0;
  uint16_t device_id = 0;
  uint16_t class_id = 0;  // 0x0300 VGA, 0x0302 3D, 0x0380 display, 0x1200 accelerator
};

// Every display/3D/accelerator controller, in bus order. Empty when hwloc cannot scan.
std::vector<PciDevice> scan_pci_accelerators();

// Those of one vendor.
std::vector<PciDevice> pci_devices_of(uint16_t vendor_id);

// " (3 NVIDIA devices are on the PCI bus: 0000:18:00.0, ...)" or "" when there are none:
// appended to an unavailable reason.
std::string pci_presence_note(uint16_t vendor_id, const std::string& vendor_name);

}  // namespace backplane::backends
