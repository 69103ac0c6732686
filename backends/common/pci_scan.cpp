#include "pci_scan.hpp"

#include <hwloc.h>

#include <cstdio>
#include <memory>

namespace backplane::backends {
namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};

bool is_accelerator_class(uint16_t class_id) {
  const uint16_t base = class_id >> 8;
  return base == 0x03 || base == 0x12;  // display controllers, processing accelerators
}

}  // namespace

std::vector<PciDevice> scan_pci_accelerators() {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return {};
  std::unique_ptr<hwloc_topology, TopologyDeleter> topology(raw);
  hwloc_topology_set_all_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_NONE);
  hwloc_topology_set_type_filter(raw, HWLOC_OBJ_PCI_DEVICE, HWLOC_TYPE_FILTER_KEEP_ALL);
  hwloc_topology_set_type_filter(raw, HWLOC_OBJ_BRIDGE, HWLOC_TYPE_FILTER_KEEP_ALL);
  if (hwloc_topology_load(raw) != 0) return {};

  std::vector<PciDevice> devices;
  for (hwloc_obj_t obj = hwloc_get_next_pcidev(raw, nullptr); obj != nullptr;
       obj = hwloc_get_next_pcidev(raw, obj)) {
    const auto& pci = obj->attr->pcidev;
    if (!is_accelerator_class(pci.class_id)) continue;
    char bus_id[32];
    std::snprintf(bus_id, sizeof bus_id, "%04x:%02x:%02x.%01x", static_cast<unsigned>(pci.domain),
                  pci.bus, pci.dev, pci.func);
    devices.push_back(PciDevice{bus_id, pci.vendor_id, pci.device_id, pci.class_id});
  }
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
