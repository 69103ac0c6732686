// What every loaded plugin registered, in load order. Built once by Runtime::open, then frozen.
#pragma once

#include <backplane/device_info.hpp>

#include <vector>

namespace backplane::detail {

struct Registry {
  std::vector<BackendInfo> backends;
  std::vector<DeviceInfo> devices;

  const BackendInfo* find_backend(const std::string& type) const {
    for (const BackendInfo& b : backends) {
      if (b.type == type) return &b;
    }
    return nullptr;
  }
};

}  // namespace backplane::detail
