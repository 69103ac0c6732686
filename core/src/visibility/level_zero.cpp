// Intel Level Zero: ZE_AFFINITY_MASK, ZE_FLAT_DEVICE_HIERARCHY, ZE_ENABLE_PCI_ID_DEVICE_ORDER.
// Sources: intel/compute-runtime shared/source/execution_environment/execution_environment.cpp
// (parseAffinityMask, setDeviceHierarchyMode, sortNeoDevices, comparePciIdBusNumber),
// shared/source/helpers/string_helpers.h (split, toUint32t = std::stoul base 0),
// shared/source/os_interface/debug_env_reader.cpp (numeric flags read with atoll); the Level Zero
// specification ("Device hierarchy", "Affinity Mask"); Intel's "Flattening GPU Tile Hierarchy".
#include <backplane/error.hpp>
#include <backplane/rules/visibility.hpp>

#include "text.hpp"

#include <algorithm>
#include <cstdint>
#include <set>

namespace backplane {

using visibility_detail::quoted;

namespace {

constexpr const char* kMask = "ZE_AFFINITY_MASK";
constexpr const char* kHierarchy = "ZE_FLAT_DEVICE_HIERARCHY";
constexpr const char* kPciOrder = "ZE_ENABLE_PCI_ID_DEVICE_ORDER";

enum class Hierarchy { kFlat, kComposite, kCombined };

int tiles_of(const PhysicalDevice& root) {
  return std::max(root.sub_devices, 1);
}

// compute-runtime's StringHelpers::split: no empty piece after a trailing separator.
std::vector<std::string_view> neo_split(std::string_view text, char separator) {
  std::vector<std::string_view> pieces = visibility_detail::split_all(text, separator);
  if (!pieces.empty() && pieces.back().empty()) pieces.pop_back();
  return pieces;
}

// std::stoul(text, nullptr, 0) truncated to uint32_t, or nullopt where std::stoul throws.
std::optional<std::uint32_t> neo_to_uint32(std::string_view text) {
  const visibility_detail::CInteger number = visibility_detail::read_c_integer(text, 0);
  if (number.length == 0 || number.overflow) return std::nullopt;
  const unsigned long long value = number.negative ? 0ULL - number.magnitude : number.magnitude;
  return static_cast<std::uint32_t>(value);
}

// std::atoll(text) != 0.
bool atoll_nonzero(std::string_view text) {
  const visibility_detail::CInteger number = visibility_detail::read_c_integer(text, 10);
  return number.length != 0 && number.magnitude != 0;
}

}  // namespace

LevelZeroVisibility level_zero_visible(const LevelZeroVariables& variables,
                                       const std::vector<PhysicalDevice>& roots) {
  LevelZeroVisibility out;
  const auto pci = visibility_detail::pci_addresses(roots, kMask);

  // Hierarchy model: exact names only; anything else is the product default, FLAT.
  Hierarchy hierarchy = Hierarchy::kFlat;
  std::string hierarchy_name = "FLAT";
  if (const auto& value = variables.flat_device_hierarchy) {
    if (*value == "FLAT" || *value == "COMPOSITE" || *value == "COMBINED") {
      hierarchy_name = *value;
      hierarchy = *value == "COMPOSITE"  ? Hierarchy::kComposite
                  : *value == "COMBINED" ? Hierarchy::kCombined
                                         : Hierarchy::kFlat;
      out.variable = kHierarchy;
      out.notes.push_back(std::string(kHierarchy) + "=" + quoted(*value) + ": " +
                          (hierarchy == Hierarchy::kComposite
                               ? "each root device is a device, its tiles are sub-devices"
                               : "every tile is a device"));
    } else {
      out.notes.push_back(std::string(kHierarchy) + "=" + quoted(*value) +
                          " is not FLAT, COMPOSITE or COMBINED (the names are case-sensitive); "
                          "the driver ignores it and uses its default, FLAT");
    }
  } else {
    out.notes.push_back(std::string(kHierarchy) +
                        " is unset, so the hierarchy is FLAT (the "
                        "default): every tile is a device");
  }
  const bool tiles_are_devices = hierarchy != Hierarchy::kComposite;

  // Root order: PCI address, discrete first unless ZE_ENABLE_PCI_ID_DEVICE_ORDER says otherwise.
  const bool pure_pci =
      variables.enable_pci_id_device_order && atoll_nonzero(*variables.enable_pci_id_device_order);
  std::vector<int> order = visibility_detail::all_indices(static_cast<int>(roots.size()));
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    if (!pure_pci && roots[a].integrated != roots[b].integrated) return roots[b].integrated;
    return pci[a] < pci[b];
  });
  if (pure_pci) {
    if (out.variable.empty()) out.variable = kPciOrder;
    out.notes.push_back(std::string(kPciOrder) + "=" +
                        quoted(*variables.enable_pci_id_device_order) +
                        ": root devices in PCI order: " + visibility_detail::join(order));
  } else {
    if (variables.enable_pci_id_device_order) {
      out.notes.push_back(std::string(kPciOrder) + "=" +
                          quoted(*variables.enable_pci_id_device_order) +
                          " reads as 0 (like atoll), so it is off");
    }
    out.notes.push_back("root devices, discrete before integrated, then in PCI order: " +
                        visibility_detail::join(order));
  }

  // The flat numbering the mask uses in FLAT and COMBINED: (root, tile), root by root.
  std::vector<std::pair<int, int>> flat;
  for (int root : order) {
    for (int tile = 0; tile < tiles_of(roots[root]); ++tile) flat.emplace_back(root, tile);
  }

  // enabled[root] = tiles of that root the mask keeps; all of them without a mask.
  std::vector<std::set<int>> enabled(roots.size());
  const std::optional<std::string>& mask = variables.affinity_mask;
  const bool masked = mask && !mask->empty() && *mask != "default";
  if (!masked) {
    for (int root : order) {
      for (int tile = 0; tile < tiles_of(roots[root]); ++tile) enabled[root].insert(tile);
    }
    if (mask) {
      out.notes.push_back(std::string(kMask) + "=" + quoted(*mask) + " means no mask");
    }
  } else {
    out.variable = kMask;
    const std::string head = std::string(kMask) + "=" + quoted(*mask) + ": ";
    const int limit = static_cast<int>(tiles_are_devices ? flat.size() : order.size());
    for (std::string_view entry : neo_split(*mask, ',')) {
      const std::vector<std::string_view> parts = neo_split(entry, '.');
      const std::string ignored = head + "entry " + quoted(entry) + " is ignored: ";
      const std::optional<std::uint32_t> index =
          parts.empty() ? std::nullopt : neo_to_uint32(parts[0]);
      if (!index) {
        out.notes.push_back(ignored + "it does not start with a number");
        continue;
      }
      if (*index >= static_cast<std::uint32_t>(limit)) {
        out.notes.push_back(ignored + "there are " + std::to_string(limit) +
                            (tiles_are_devices ? " devices (tiles)" : " root devices"));
        continue;
      }
      if (tiles_are_devices) {
        if (parts.size() > 1) {
          out.notes.push_back(ignored + hierarchy_name +
                              " numbers tiles as devices, so 'device.sub-device' does not apply");
          continue;
        }
        const auto [root, tile] = flat[*index];
        enabled[root].insert(tile);
        continue;
      }
      const int root = order[*index];
      if (parts.size() == 1) {
        for (int tile = 0; tile < tiles_of(roots[root]); ++tile) enabled[root].insert(tile);
        continue;
      }
      const std::optional<std::uint32_t> sub = neo_to_uint32(parts[1]);
      if (!sub) {
        out.notes.push_back(ignored + "its sub-device is not a number");
        continue;
      }
      if (*sub >= static_cast<std::uint32_t>(tiles_of(roots[root]))) {
        out.notes.push_back(ignored + "root device " + std::to_string(*index) + " has " +
                            std::to_string(tiles_of(roots[root])) + " sub-devices");
        continue;
      }
      if (parts.size() == 3) {
        out.notes.push_back(ignored +
                            "the driver accepts 'device.sub-device.engine' entries "
                            "but does nothing with them");
        continue;
      }
      if (parts.size() > 3) {
        throw InvalidArgument(std::string(kMask) + "=" + quoted(*mask) + ": entry " +
                              quoted(entry) +
                              " has more than three parts, which stops the Level Zero driver; "
                              "expected 'device' or 'device.sub-device', such as '0,1.0'");
      }
      enabled[root].insert(static_cast<int>(*sub));
    }
  }

  for (int root : order) {
    const std::set<int>& tiles = enabled[root];
    if (tiles.empty()) continue;
    const bool multi_tile = tiles_of(roots[root]) > 1;
    if (!multi_tile) {
      out.devices.push_back({root, -1, {}});
    } else if (tiles_are_devices) {
      for (int tile : tiles) out.devices.push_back({root, tile, {}});
    } else if (tiles.size() == 1) {
      out.devices.push_back({root, *tiles.begin(), {}});
    } else {
      out.devices.push_back({root, -1, std::vector<int>(tiles.begin(), tiles.end())});
    }
  }

  std::string listing;
  for (const LevelZeroDevice& device : out.devices) {
    listing += (listing.empty() ? "" : ", ") + std::to_string(device.root);
    if (device.sub_device >= 0) listing += "." + std::to_string(device.sub_device);
    if (!device.sub_devices.empty()) {
      std::string subs;
      for (int sub : device.sub_devices) subs += (subs.empty() ? "" : " ") + std::to_string(sub);
      listing += " (sub-devices " + subs + ")";
    }
  }
  out.notes.push_back(out.devices.empty() ? std::string("no device is visible")
                                          : std::to_string(out.devices.size()) + " device" +
                                                (out.devices.size() == 1 ? "" : "s") +
                                                " visible, as root.tile: " + listing);
  if (hierarchy == Hierarchy::kCombined) {
    out.notes.push_back(
        "COMBINED also offers each multi-tile card as a composite device through "
        "zeDeviceGetRootDevice; zeDeviceGet lists the tiles");
  }
  return out;
}

}  // namespace backplane
