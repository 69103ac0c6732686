#include "simulated_visibility.hpp"

#include <backplane/error.hpp>

#include <algorithm>

namespace backplane::detail {
namespace {

int64_t int_property(const DeviceInfo& d, const char* name) {
  const Property* p = d.property(name);
  return p != nullptr && std::holds_alternative<int64_t>(p->value) ? std::get<int64_t>(p->value)
                                                                   : 0;
}

PhysicalDevice physical_of(const DeviceInfo& d) {
  PhysicalDevice p;
  p.uuid = d.uuid;
  p.pci_bus_id = d.pci_bus_id;
  if (d.compute_capability) {
    p.compute_capability_major = d.compute_capability->major;
    p.compute_capability_minor = d.compute_capability->minor;
  }
  p.multiprocessors = static_cast<int>(int_property(d, "multiprocessors"));
  p.clock_mhz = static_cast<int>(int_property(d, "clock_mhz"));
  p.sub_devices = static_cast<int>(int_property(d, "sub_devices"));
  return p;
}

// Logical device `index`: physical device `physical`, or one tile of it.
DeviceInfo logical_device(const DeviceInfo& physical, int index, int tile,
                          const std::string& variable) {
  DeviceInfo d = physical;
  d.device = Device(physical.device.type(), index);
  d.visibility_variable = variable;
  if (tile >= 0) {
    const int64_t tiles = std::max<int64_t>(1, int_property(physical, "sub_devices"));
    d.name += " (tile " + std::to_string(tile) + ")";
    d.memory_total /= static_cast<uint64_t>(tiles);
    d.properties.push_back(Property{"sub_device", static_cast<int64_t>(tile)});
  }
  return d;
}

void apply_to_backend(Registry& registered, BackendInfo& backend, const EnvLookup& env) {
  const std::string& type = backend.type;
  std::vector<DeviceInfo> physical;
  std::vector<DeviceInfo> others;
  for (DeviceInfo& d : registered.devices) {
    (d.device.type() == type ? physical : others).push_back(std::move(d));
  }
  std::vector<PhysicalDevice> inputs;
  for (const DeviceInfo& d : physical) inputs.push_back(physical_of(d));
  const std::string vendor = physical.empty() ? "" : physical.front().vendor;

  std::vector<DeviceInfo> visible;
  try {
    const Visibility visibility = visible_for(type, vendor, env, inputs);
    backend.visibility_notes = visibility.notes;
    for (size_t i = 0; i < visibility.physical.size(); ++i) {
      const int tile = visibility.sub_device.empty() ? -1 : visibility.sub_device[i];
      visible.push_back(logical_device(physical.at(static_cast<size_t>(visibility.physical[i])),
                                       static_cast<int>(i), tile, visibility.variable));
    }
  } catch (const InvalidArgument& e) {
    // The vendor runtime refuses to start with such a value: so does the simulated one.
    backend.available = false;
    backend.unavailable_reason = e.what();
    backend.visibility_notes = {e.what()};
    visible.clear();
  }
  registered.devices = std::move(others);
  for (DeviceInfo& d : visible) registered.devices.push_back(std::move(d));
}

}  // namespace

void apply_simulated_visibility(Registry& registered, const EnvLookup& env) {
  for (BackendInfo& backend : registered.backends) {
    if (backend.simulated && backend.available) apply_to_backend(registered, backend, env);
  }
}

}  // namespace backplane::detail
