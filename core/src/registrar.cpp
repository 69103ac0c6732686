#include "registrar.hpp"

#include <backplane/error.hpp>
#include <backplane/internal/text.hpp>
#include <backplane/rules/device.hpp>
#include <backplane/rules/kernel_mapping.hpp>

#include <algorithm>
#include <climits>

namespace backplane::detail {
namespace {

std::string copy(const char* s) {
  return s != nullptr ? std::string(s) : std::string();
}

bool is_property_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// Converts one plugin property; an empty `error` on success.
Property read_property(const bp_property& in, std::string& error) {
  Property out;
  out.name = copy(in.name);
  if (!is_property_name(out.name)) {
    error = "property name '" + out.name + "' must be made of a-z, 0-9 and '_'";
    return out;
  }
  switch (in.kind) {
    case BP_VALUE_STRING:
      out.value = copy(in.value.string);
      break;
    case BP_VALUE_INT64:
      out.value = static_cast<int64_t>(in.value.int64);
      break;
    case BP_VALUE_FLOAT64:
      out.value = in.value.float64;
      break;
    case BP_VALUE_BOOL:
      out.value = in.value.boolean != 0;
      break;
    case BP_VALUE_STRING_LIST: {
      if (in.value.string_list.count > 0 && in.value.string_list.items == nullptr) {
        error = "property '" + out.name + "' has a NULL string list";
        return out;
      }
      std::vector<std::string> items;
      for (size_t i = 0; i < in.value.string_list.count; ++i) {
        items.push_back(copy(in.value.string_list.items[i]));
      }
      out.value = std::move(items);
      break;
    }
    default:
      error = "property '" + out.name + "' has unknown value kind " + std::to_string(in.kind);
  }
  return out;
}

}  // namespace

std::string PluginRegistration::add_device_type(const bp_device_type_desc& d) {
  BackendInfo backend;
  backend.type = copy(d.name);
  backend.plugin = manifest_.name;
  backend.hub_key = d.hub_key != nullptr ? d.hub_key : backend.type;
  backend.collective_backend = copy(d.collective_backend);
  backend.training_priority = d.training_priority;
  backend.accelerator = (d.flags & BP_TYPE_ACCELERATOR) != 0;
  backend.automatic_placement = (d.flags & BP_TYPE_AUTO_PLACEMENT) != 0;
  backend.available = d.available != 0;
  backend.unavailable_reason = copy(d.unavailable_reason);
  backend.simulated = (d.flags & BP_TYPE_SIMULATED) != 0;
  if (std::string reason = check_device_type(backend); !reason.empty()) return reason;
  if (const BackendInfo* owner = committed_.find_backend(backend.type);
      owner != nullptr && !replaces(backend, *owner)) {
    backend.replaced_by = owner->plugin;  // registered, shown, but the incumbent stays
  }
  pending_.backends.push_back(std::move(backend));
  return {};
}

std::string PluginRegistration::add_device(const bp_device_desc& d) {
  DeviceInfo device;
  device.device = Device(copy(d.type), d.index);
  device.plugin = manifest_.name;
  device.name = copy(d.name);
  device.vendor = copy(d.vendor);
  device.uuid = copy(d.uuid);
  device.pci_bus_id = copy(d.pci_bus_id);
  device.arch = copy(d.arch);
  if (d.compute_capability_major >= 0) {
    device.compute_capability =
        ComputeCapability{d.compute_capability_major, std::max(0, d.compute_capability_minor)};
  }
  device.physical_index = d.physical_index;
  device.memory_total = d.memory_total;
  device.capabilities = d.capabilities;
  device.simulated = d.simulated != 0;
  device.visibility_variable = copy(d.visibility_variable);
  if (d.property_count > 0 && d.properties == nullptr) {
    return "add_device " + device.device.str() + ": properties is NULL";
  }
  for (size_t i = 0; i < d.property_count; ++i) {
    std::string error;
    device.properties.push_back(read_property(d.properties[i], error));
    if (!error.empty()) return "add_device " + device.device.str() + ": " + error;
  }
  if (std::string reason = check_device(device); !reason.empty()) return reason;
  ++devices_per_type_[device.device.type()];
  // Devices of a backend that another one replaces are checked but not kept.
  if (pending_.find_backend(device.device.type()) == nullptr) return {};
  pending_.devices.push_back(std::move(device));
  return {};
}

std::string PluginRegistration::check_kernel(const KernelInfo& kernel) {
  const bool type_registered =
      std::any_of(pending_.backends.begin(), pending_.backends.end(),
                  [&](const BackendInfo& b) { return b.type == kernel.device_type; });
  if (type_registered) return {};
  return "kernel " + kernel.op + "/" + kernel.implementation + ": device type '" +
         kernel.device_type + "' must be registered by this plugin first";
}

std::string PluginRegistration::add_layer_kernel(const bp_layer_kernel_desc& d) {
  KernelMappingEntry entry;
  entry.layer = copy(d.layer);
  entry.device_key = copy(d.device_key);
  entry.source = manifest_.name;
  const std::string label = "layer kernel for '" + entry.layer + "' on '" + entry.device_key + "'";
  const bool key_registered =
      std::any_of(pending_.backends.begin(), pending_.backends.end(),
                  [&](const BackendInfo& b) { return b.hub_key == entry.device_key; });
  if (!key_registered) {
    return label +
           ": the device key must be the Hub key of a device type this plugin registered first";
  }
  if (d.repo == nullptr || d.kernel_layer == nullptr) {
    return label + ": repo and kernel_layer are required";
  }
  try {
    entry.mode = KernelMode::from_bits(d.mode);
    entry.kernel = LayerKernelRef::parse(copy(d.repo) + ":" + copy(d.kernel_layer));
    if (d.revision != nullptr) entry.kernel.revision = copy(d.revision);
    if (d.version > 0) entry.kernel.version = d.version;
    if (d.min_capability >= 0 || d.max_capability >= 0) {
      entry.capability = CapabilityRange{std::max(0, d.min_capability),
                                         d.max_capability >= 0 ? d.max_capability : INT_MAX};
    }
    KernelMapping check;  // the mapping's own rules: names, ranges only on cuda and rocm
    check.add(entry);
  } catch (const InvalidArgument& e) {
    return label + ": " + e.what();
  }
  for (const KernelMappingEntry& e : pending_.layer_kernels) {
    if (e.layer == entry.layer && e.device_key == entry.device_key && e.mode == entry.mode &&
        e.capability.has_value() == entry.capability.has_value() &&
        (!e.capability || (e.capability->min == entry.capability->min &&
                           e.capability->max == entry.capability->max))) {
      return label + " registered twice for mode " + entry.mode.str();
    }
  }
  pending_.layer_kernels.push_back(std::move(entry));
  return {};
}

bool replaces(const BackendInfo& challenger, const BackendInfo& incumbent) {
  if (challenger.simulated != incumbent.simulated) return challenger.simulated;
  return challenger.available && !incumbent.available;
}

std::string PluginRegistration::check_device_type(const BackendInfo& backend) const {
  const std::string& type = backend.type;
  if (!is_valid_device_type_name(type)) {
    return "device type name '" + type + "' must be letters and '_' only";
  }
  const std::vector<std::string>& listed = manifest_.device_types;
  if (std::find(listed.begin(), listed.end(), type) == listed.end()) {
    return "device type '" + type + "' is not in the manifest's device_types [" +
           internal::join(listed) + "]";
  }
  const std::vector<std::string> owners = reserved_type_owners(type);
  if (!owners.empty() && std::find(owners.begin(), owners.end(), manifest_.name) == owners.end()) {
    return "device type '" + type + "' is reserved for the plugins " + internal::join(owners);
  }
  for (const BackendInfo& b : pending_.backends) {
    if (b.type == type) return "device type '" + type + "' registered twice";
  }
  if (const BackendInfo* owner = committed_.find_backend(type)) {
    if (replaces(backend, *owner) || replaces(*owner, backend)) return {};
    return "device type '" + type + "' is already provided by plugin '" + owner->plugin + "'";
  }
  if (!backend.available && backend.unavailable_reason.empty()) {
    return "device type '" + type + "' is unavailable but the plugin gives no reason";
  }
  if (backend.training_priority < 0) {
    return "device type '" + type + "' has a negative training priority";
  }
  return {};
}

std::string PluginRegistration::check_device(const DeviceInfo& device) const {
  const std::string label = "device " + device.device.str();
  const std::string& type = device.device.type();
  const auto registered = std::find_if(pending_.backends.begin(), pending_.backends.end(),
                                       [&](const BackendInfo& b) { return b.type == type; });
  if (registered == pending_.backends.end()) {
    return label + ": its type must be registered by this plugin first";
  }
  const BackendInfo* backend = &*registered;
  if (!backend->available) {
    return label + ": its backend is registered as unavailable (" + backend->unavailable_reason +
           ")";
  }
  const int index = *device.device.index();
  const auto counted = devices_per_type_.find(type);
  const int expected = counted == devices_per_type_.end() ? 0 : counted->second;
  if (index != expected) {
    return label + ": indices must be registered in order from 0; expected " + type + ":" +
           std::to_string(expected);
  }
  if (type == "cpu" && index != 0) return label + ": cpu has a single device, cpu:0";
  if (device.name.empty()) return label + ": name must not be empty";
  for (size_t i = 0; i < device.properties.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (device.properties[i].name == device.properties[j].name) {
        return label + ": property '" + device.properties[i].name + "' given twice";
      }
    }
  }
  return {};
}

}  // namespace backplane::detail
