#include "pci_scan.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <system_error>

namespace backplane::backends {
namespace {

// The device folders of the PCI bus, named by address: the facts hwloc's Linux backend reads,
// without the cost of a topology (tens of milliseconds per plugin).
const char* const kSysfsPciDevices = "/sys/bus/pci/devices";

std::optional<unsigned long> read_hex(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::string text;
  if (!(in >> text)) return std::nullopt;
  char* end = nullptr;
  const unsigned long value = std::strtoul(text.c_str(), &end, 16);
  if (end == text.c_str()) return std::nullopt;
  return value;
}

bool is_accelerator_class(uint16_t class_id) {
  const unsigned base = class_id >> 8u;
  return base == 0x03 || base == 0x12;  // display controllers, processing accelerators
}

}  // namespace

std::vector<PciDevice> scan_pci_accelerators() {
  std::vector<PciDevice> devices;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(kSysfsPciDevices, ec), end; !ec && it != end;
       it.increment(ec)) {
    // sysfs `class` is 0xBBSSPP (base class, subclass, programming interface).
    const auto class_code = read_hex(it->path() / "class");
    const auto vendor = read_hex(it->path() / "vendor");
    const auto device = read_hex(it->path() / "device");
    if (!class_code || !vendor || !device) continue;
    const auto class_id = static_cast<uint16_t>(*class_code >> 8u);
    if (!is_accelerator_class(class_id)) continue;
    devices.push_back(PciDevice{it->path().filename().string(), static_cast<uint16_t>(*vendor),
                                static_cast<uint16_t>(*device), class_id});
  }
  std::sort(devices.begin(), devices.end(),
            [](const PciDevice& a, const PciDevice& b) { return a.bus_id < b.bus_id; });
  return devices;
}

std::vector<PciDevice> pci_devices_of(uint16_t vendor_id) {
  std::vector<PciDevice> out;
  for (PciDevice& d : scan_pci_accelerators()) {
    if (d.vendor_id == vendor_id) out.push_back(std::move(d));
  }
  return out;
}

std::string pci_presence_note(uint16_t vendor_id, const std::string& vendor_name) {
  const std::vector<PciDevice> devices = pci_devices_of(vendor_id);
  if (devices.empty()) return "";
  std::string ids;
  for (const PciDevice& d : devices) ids += (ids.empty() ? "" : ", ") + d.bus_id;
  return " (" + std::to_string(devices.size()) + " " + vendor_name +
         (devices.size() == 1 ? " device is" : " devices are") + " on the PCI bus: " + ids + ")";
}

}  // namespace backplane::backends
