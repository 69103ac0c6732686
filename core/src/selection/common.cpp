#include "common.hpp"

#include <backplane/error.hpp>

#include <algorithm>
#include <cctype>
#include <limits>

namespace backplane::selection_detail {

std::vector<std::string> known_types(const std::vector<BackendInfo>& backends) {
  std::vector<std::string> types = builtin_device_types();
  for (const BackendInfo& backend : backends) {
    if (std::find(types.begin(), types.end(), backend.type) == types.end()) {
      types.push_back(backend.type);
    }
  }
  return types;
}

const BackendInfo* find_backend(const std::vector<BackendInfo>& backends, std::string_view type) {
  // A replaced backend stays listed; the active one of a type is the one not replaced.
  const BackendInfo* found = nullptr;
  for (const BackendInfo& backend : backends) {
    if (backend.type != type) continue;
    if (backend.replaced_by.empty()) return &backend;
    if (!found) found = &backend;
  }
  return found;
}

std::vector<const DeviceInfo*> devices_of(const std::vector<DeviceInfo>& devices,
                                          std::string_view type) {
  std::vector<const DeviceInfo*> out;
  for (const DeviceInfo& device : devices) {
    if (device.device.type() == type) out.push_back(&device);
  }
  std::sort(out.begin(), out.end(), [](const DeviceInfo* a, const DeviceInfo* b) {
    return a->device.index().value_or(0) < b->device.index().value_or(0);
  });
  return out;
}

bool is_available(const std::vector<BackendInfo>& backends, const std::vector<DeviceInfo>& devices,
                  std::string_view type) {
  const BackendInfo* backend = find_backend(backends, type);
  return backend && backend->available && !devices_of(devices, type).empty();
}

const DeviceInfo* require_device(const std::vector<BackendInfo>& backends,
                                 const std::vector<DeviceInfo>& devices, const Device& device,
                                 std::string_view what) {
  const std::string& type = device.type();
  if (type == "cpu" || type == "meta") {
    // The cpu plugin's device, when the snapshot has one, for the advice that reads it.
    const std::vector<const DeviceInfo*> cpu = devices_of(devices, type);
    return cpu.empty() ? nullptr : cpu.front();
  }
  const BackendInfo* backend = find_backend(backends, type);
  const std::vector<const DeviceInfo*> found = devices_of(devices, type);
  if (!backend) {
    throw Unavailable(std::string(what) + " " + single_quoted(device.str()) +
                      ": no loaded plugin provides " + type + " devices");
  }
  if (!backend->available || found.empty()) {
    throw Unavailable(std::string(what) + " " + single_quoted(device.str()) + ": the " + type +
                      " backend (plugin '" + backend->plugin + "') is unavailable" +
                      (backend->unavailable_reason.empty() ? std::string(": no devices")
                                                           : ": " + backend->unavailable_reason));
  }
  const int index = device.index().value_or(0);
  for (const DeviceInfo* info : found) {
    if (info->device.index().value_or(0) == index) return info;
  }
  std::string names;
  for (const DeviceInfo* info : found) names += (names.empty() ? "" : ", ") + info->device.str();
  throw NotFound(std::string(what) + " " + single_quoted(device.str()) + " does not exist; " +
                 type + " has " + names);
}

Device single_process_device(const std::string& type, int index) {
  if (type == "cpu" || type == "mps" || type == "meta") return Device(type);
  return Device(type, index);
}

std::vector<const BackendInfo*> automatic_accelerators(const std::vector<BackendInfo>& backends,
                                                       const std::vector<DeviceInfo>& devices) {
  // get_max_memory: npu, mlu, (sdaa), musa, xpu, hpu, else cuda.
  static const std::vector<std::string> kOrder = {"npu", "mlu", "sdaa", "musa",
                                                  "xpu", "hpu", "cuda"};
  std::vector<const BackendInfo*> out;
  for (const BackendInfo& backend : backends) {
    if (!backend.replaced_by.empty() || !backend.automatic_placement || !backend.accelerator ||
        backend.type == "mps" || !is_available(backends, devices, backend.type)) {
      continue;
    }
    out.push_back(&backend);
  }
  auto rank = [](const BackendInfo* b) {
    const auto it = std::find(kOrder.begin(), kOrder.end(), b->type);
    return it == kOrder.end() ? kOrder.size() : static_cast<size_t>(it - kOrder.begin());
  };
  std::stable_sort(out.begin(), out.end(), [&](const BackendInfo* a, const BackendInfo* b) {
    if (rank(a) != rank(b)) return rank(a) < rank(b);
    return a->training_priority < b->training_priority;
  });
  return out;
}

// Python's int(text) for base 10: surrounding whitespace, an optional sign, digits with single
// underscores between them. nullopt when int() would raise; values beyond int saturate.
std::optional<long long> python_int(std::string_view text) {
  auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  bool negative = false;
  if (!text.empty() && (text[0] == '+' || text[0] == '-')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  if (text.empty() || text.front() == '_' || text.back() == '_') return std::nullopt;
  long long value = 0;
  constexpr long long kLimit = std::numeric_limits<int>::max();
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '_') {
      if (text[i - 1] == '_') return std::nullopt;
      continue;
    }
    if (c < '0' || c > '9') return std::nullopt;
    value = std::min(value * 10 + (c - '0'), kLimit + 1);
  }
  return negative ? -value : value;
}

std::string single_quoted(std::string_view text) {
  return "'" + std::string(text) + "'";
}

}  // namespace backplane::selection_detail
