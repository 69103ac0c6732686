// Helpers shared by the selection rules. Internal: no compatibility promise.
#pragma once

#include <backplane/rules/selection.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::selection_detail {

// builtin_device_types() plus every type in the snapshot, in that order, without repeats.
std::vector<std::string> known_types(const std::vector<BackendInfo>& backends);

const BackendInfo* find_backend(const std::vector<BackendInfo>& backends, std::string_view type);

// The snapshot's devices of `type`, in index order.
std::vector<const DeviceInfo*> devices_of(const std::vector<DeviceInfo>& devices,
                                          std::string_view type);

// The device `device` names (index-less: index 0). cpu and meta need no plugin and give null.
// Throws Unavailable when no available backend provides the type (with its reason when one is
// registered), NotFound when the index is beyond the devices, naming those that exist.
const DeviceInfo* require_device(const std::vector<BackendInfo>& backends,
                                 const std::vector<DeviceInfo>& devices, const Device& device,
                                 std::string_view what);

// "cpu" and "mps" as Trainer writes them, and "meta": no index; "type:index" otherwise.
Device single_process_device(const std::string& type, int index);

// Available backends whose plugin declares automatic_placement and that have devices, in the
// order Accelerate's get_max_memory tries them; mps is left out (it replaces cpu instead).
std::vector<const BackendInfo*> automatic_accelerators(const std::vector<BackendInfo>& backends,
                                                       const std::vector<DeviceInfo>& devices);

bool is_available(const std::vector<BackendInfo>& backends, const std::vector<DeviceInfo>& devices,
                  std::string_view type);

// Python's int(text) for base 10: surrounding whitespace, an optional sign, digits with single
// underscores between them. nullopt when int() would raise; values beyond int saturate.
std::optional<long long> python_int(std::string_view text);

// "'value'".
std::string single_quoted(std::string_view text);

}  // namespace backplane::selection_detail
