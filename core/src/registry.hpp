// What every loaded plugin registered, in load order. Built once by Runtime::open, then frozen.
#pragma once

#include <backplane/rules/kernel_mapping.hpp>
#include <backplane/runtime/device_info.hpp>
#include <backplane/runtime/kernels.hpp>

#include <algorithm>
#include <vector>

#include "plugin_host/registrar.hpp"

namespace backplane::detail {

struct Registry {
  std::vector<BackendInfo> backends;
  std::vector<DeviceInfo> devices;
  std::vector<RegisteredKernel> kernels;
  std::vector<KernelMappingEntry> layer_kernels;  // default substitutions, in load order

  // The active backend of a type (not replaced by another); nullptr when none.
  const BackendInfo* find_backend(const std::string& type) const {
    for (const BackendInfo& b : backends) {
      if (b.type == type && b.replaced_by.empty()) return &b;
    }
    return nullptr;
  }

  // Adds one plugin's registrations. A backend that takes the place of an active one of the same
  // type marks it replaced and drops its devices; a backend registered as replaced brings none.
  void commit(Registry&& registered) {
    for (BackendInfo& backend : registered.backends) {
      if (backend.replaced_by.empty()) {
        for (BackendInfo& old : backends) {
          if (old.type == backend.type && old.replaced_by.empty()) old.replaced_by = backend.plugin;
        }
        devices.erase(
            std::remove_if(devices.begin(), devices.end(),
                           [&](const DeviceInfo& d) { return d.device.type() == backend.type; }),
            devices.end());
      }
      backends.push_back(std::move(backend));
    }
    for (DeviceInfo& device : registered.devices) devices.push_back(std::move(device));
    for (RegisteredKernel& kernel : registered.kernels) kernels.push_back(std::move(kernel));
    for (KernelMappingEntry& entry : registered.layer_kernels) {
      layer_kernels.push_back(std::move(entry));
    }
  }
};

}  // namespace backplane::detail
