#include "registrar.hpp"

#include <backplane/device.hpp>
#include <backplane/error.hpp>
#include <backplane/internal/text.hpp>
#include <backplane/kernel_mapping.hpp>

#include <algorithm>
#include <climits>

#include "abi_struct.hpp"

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

bp_status* refuse(bp_registrar_context* context, bp_status_code code, const std::string& reason) {
  if (context->first_error.empty()) context->first_error = reason;
  return make_status(code, reason);
}

bp_status* add_device_type(bp_registrar_context* context, const bp_device_type_desc* desc) try {
  bp_device_type_desc d;
  if (!read_abi_struct(desc, BP_DEVICE_TYPE_DESC_SIZE_1_0, d)) {
    return refuse(context, BP_INVALID_ARGUMENT,
                  "add_device_type: descriptor is NULL or smaller than ABI 1.0's (" +
                      std::to_string(BP_DEVICE_TYPE_DESC_SIZE_1_0) + " bytes)");
  }
  BackendInfo backend;
  backend.type = copy(d.name);
  backend.plugin = context->manifest->name;
  backend.hub_key = d.hub_key != nullptr ? d.hub_key : backend.type;
  backend.collective_backend = copy(d.collective_backend);
  backend.training_priority = d.training_priority;
  backend.accelerator = (d.flags & BP_TYPE_ACCELERATOR) != 0;
  backend.automatic_placement = (d.flags & BP_TYPE_AUTO_PLACEMENT) != 0;
  backend.available = d.available != 0;
  backend.unavailable_reason = copy(d.unavailable_reason);
  backend.simulated = (d.flags & BP_TYPE_SIMULATED) != 0;
  if (std::string reason = check_device_type(*context, backend); !reason.empty()) {
    return refuse(context, BP_INVALID_ARGUMENT, reason);
  }
  if (const BackendInfo* owner = context->committed->find_backend(backend.type);
      owner != nullptr && !replaces(backend, *owner)) {
    backend.replaced_by = owner->plugin;  // registered, shown, but the incumbent stays
  }
  context->pending.backends.push_back(std::move(backend));
  return nullptr;
} catch (const std::exception& e) {
  return refuse(context, BP_INTERNAL, std::string("add_device_type: ") + e.what());
}

bp_status* add_device(bp_registrar_context* context, const bp_device_desc* desc) try {
  bp_device_desc d;
  if (!read_abi_struct(desc, BP_DEVICE_DESC_SIZE_1_0, d)) {
    return refuse(context, BP_INVALID_ARGUMENT,
                  "add_device: descriptor is NULL or smaller than ABI 1.0's (" +
                      std::to_string(BP_DEVICE_DESC_SIZE_1_0) + " bytes)");
  }
  DeviceInfo device;
  device.device = Device(copy(d.type), d.index);
  device.plugin = context->manifest->name;
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
    return refuse(context, BP_INVALID_ARGUMENT,
                  "add_device " + device.device.str() + ": properties is NULL");
  }
  for (size_t i = 0; i < d.property_count; ++i) {
    std::string error;
    device.properties.push_back(read_property(d.properties[i], error));
    if (!error.empty()) {
      return refuse(context, BP_INVALID_ARGUMENT,
                    "add_device " + device.device.str() + ": " + error);
    }
  }
  if (std::string reason = check_device(*context, device); !reason.empty()) {
    return refuse(context, BP_INVALID_ARGUMENT, reason);
  }
  ++context->devices_per_type[device.device.type()];
  // Devices of a backend that another one replaces are checked but not kept.
  if (context->pending.find_backend(device.device.type()) == nullptr) return nullptr;
  context->pending.devices.push_back(std::move(device));
  return nullptr;
} catch (const std::exception& e) {
  return refuse(context, BP_INTERNAL, std::string("add_device: ") + e.what());
}

bool is_kernel_name(const std::string& name) {
  return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

bp_status* add_kernel(bp_registrar_context* context, const bp_kernel_desc* desc) try {
  bp_kernel_desc d;
  if (!read_abi_struct(desc, BP_KERNEL_DESC_SIZE_1_3, d)) {
    return refuse(context, BP_INVALID_ARGUMENT,
                  "add_kernel: descriptor is NULL or smaller than ABI 1.3's (" +
                      std::to_string(BP_KERNEL_DESC_SIZE_1_3) + " bytes)");
  }
  RegisteredKernel kernel;
  kernel.info.op = copy(d.op);
  kernel.info.implementation = copy(d.implementation);
  kernel.info.device_type = copy(d.device_type);
  kernel.info.plugin = context->manifest->name;
  const std::string label = "kernel " + kernel.info.op + "/" + kernel.info.implementation;
  if (!is_kernel_name(kernel.info.op) || !is_kernel_name(kernel.info.implementation)) {
    return refuse(context, BP_INVALID_ARGUMENT,
                  label + ": op and implementation must be 1-64 characters of a-z, 0-9 and '_'");
  }
  const bool type_registered =
      std::any_of(context->pending.backends.begin(), context->pending.backends.end(),
                  [&](const BackendInfo& b) { return b.type == kernel.info.device_type; });
  if (!type_registered) {
    return refuse(context, BP_INVALID_ARGUMENT,
                  label + ": device type '" + kernel.info.device_type +
                      "' must be registered by this plugin first");
  }
  if (d.function == nullptr) {
    return refuse(context, BP_INVALID_ARGUMENT, label + ": function is NULL");
  }
  if (d.min_compute_capability_major >= 0) {
    kernel.info.min_compute_capability = ComputeCapability{
        d.min_compute_capability_major, std::max(0, d.min_compute_capability_minor)};
  }
  if (d.dtype_count > 0 && d.dtypes == nullptr) {
    return refuse(context, BP_INVALID_ARGUMENT, label + ": dtypes is NULL");
  }
  for (size_t i = 0; i < d.dtype_count; ++i) kernel.info.dtypes.push_back(copy(d.dtypes[i]));
  kernel.info.max_head_dim = std::max(0, d.max_head_dim);
  for (const RegisteredKernel& k : context->pending.kernels) {
    if (k.info.op == kernel.info.op && k.info.implementation == kernel.info.implementation &&
        k.info.device_type == kernel.info.device_type) {
      return refuse(context, BP_INVALID_ARGUMENT,
                    label + " registered twice for " + kernel.info.device_type);
    }
  }
  kernel.function = d.function;
  kernel.context = d.context;
  context->pending.kernels.push_back(std::move(kernel));
  return nullptr;
} catch (const std::exception& e) {
  return refuse(context, BP_INTERNAL, std::string("add_kernel: ") + e.what());
}

bp_status* add_layer_kernel(bp_registrar_context* context, const bp_layer_kernel_desc* desc) try {
  bp_layer_kernel_desc d;
  if (!read_abi_struct(desc, BP_LAYER_KERNEL_DESC_SIZE_1_4, d)) {
    return refuse(context, BP_INVALID_ARGUMENT,
                  "add_layer_kernel: descriptor is NULL or smaller than ABI 1.4's (" +
                      std::to_string(BP_LAYER_KERNEL_DESC_SIZE_1_4) + " bytes)");
  }
  KernelMappingEntry entry;
  entry.layer = copy(d.layer);
  entry.device_key = copy(d.device_key);
  entry.source = context->manifest->name;
  const std::string label = "layer kernel for '" + entry.layer + "' on '" + entry.device_key + "'";
  const bool key_registered =
      std::any_of(context->pending.backends.begin(), context->pending.backends.end(),
                  [&](const BackendInfo& b) { return b.hub_key == entry.device_key; });
  if (!key_registered) {
    return refuse(context, BP_INVALID_ARGUMENT,
                  label +
                      ": the device key must be the Hub key of a device type this plugin "
                      "registered first");
  }
  if (d.repo == nullptr || d.kernel_layer == nullptr) {
    return refuse(context, BP_INVALID_ARGUMENT, label + ": repo and kernel_layer are required");
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
    return refuse(context, BP_INVALID_ARGUMENT, label + ": " + e.what());
  }
  for (const KernelMappingEntry& e : context->pending.layer_kernels) {
    if (e.layer == entry.layer && e.device_key == entry.device_key && e.mode == entry.mode &&
        e.capability.has_value() == entry.capability.has_value() &&
        (!e.capability || (e.capability->min == entry.capability->min &&
                           e.capability->max == entry.capability->max))) {
      return refuse(context, BP_INVALID_ARGUMENT,
                    label + " registered twice for mode " + entry.mode.str());
    }
  }
  context->pending.layer_kernels.push_back(std::move(entry));
  return nullptr;
} catch (const std::exception& e) {
  return refuse(context, BP_INTERNAL, std::string("add_layer_kernel: ") + e.what());
}

}  // namespace

bool replaces(const BackendInfo& challenger, const BackendInfo& incumbent) {
  if (challenger.simulated != incumbent.simulated) return challenger.simulated;
  return challenger.available && !incumbent.available;
}

std::string check_device_type(const bp_registrar_context& context, const BackendInfo& backend) {
  const std::string& type = backend.type;
  if (!is_valid_device_type_name(type)) {
    return "device type name '" + type + "' must be letters and '_' only";
  }
  const std::vector<std::string>& listed = context.manifest->device_types;
  if (std::find(listed.begin(), listed.end(), type) == listed.end()) {
    return "device type '" + type + "' is not in the manifest's device_types [" +
           internal::join(listed) + "]";
  }
  const std::vector<std::string> owners = reserved_type_owners(type);
  if (!owners.empty() &&
      std::find(owners.begin(), owners.end(), context.manifest->name) == owners.end()) {
    return "device type '" + type + "' is reserved for the plugins " + internal::join(owners);
  }
  for (const BackendInfo& b : context.pending.backends) {
    if (b.type == type) return "device type '" + type + "' registered twice";
  }
  if (const BackendInfo* owner = context.committed->find_backend(type)) {
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

std::string check_device(const bp_registrar_context& context, const DeviceInfo& device) {
  const std::string label = "device " + device.device.str();
  const std::string& type = device.device.type();
  const auto registered =
      std::find_if(context.pending.backends.begin(), context.pending.backends.end(),
                   [&](const BackendInfo& b) { return b.type == type; });
  if (registered == context.pending.backends.end()) {
    return label + ": its type must be registered by this plugin first";
  }
  const BackendInfo* backend = &*registered;
  if (!backend->available) {
    return label + ": its backend is registered as unavailable (" + backend->unavailable_reason +
           ")";
  }
  const int index = *device.device.index();
  const auto counted = context.devices_per_type.find(type);
  const int expected = counted == context.devices_per_type.end() ? 0 : counted->second;
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

bp_registrar make_registrar(bp_registrar_context* context) {
  bp_registrar registrar{};
  registrar.struct_size = sizeof registrar;
  registrar.context = context;
  registrar.add_device_type = &add_device_type;
  registrar.add_device = &add_device;
  registrar.add_kernel = &add_kernel;
  registrar.add_layer_kernel = &add_layer_kernel;
  return registrar;
}

}  // namespace backplane::detail
