// NVIDIA: CUDA_DEVICE_ORDER and CUDA_VISIBLE_DEVICES.
// Sources: CUDA programming guide, "CUDA Environment Variables"; PyTorch torch/cuda/__init__.py
// (_parse_visible_devices, _transform_uuid_to_ordinals, _device_count_nvml) and its test vectors
// in test/test_cuda_nvml_based_avail.py.
#include <backplane/rules/visibility.hpp>

#include "text.hpp"

#include <algorithm>
#include <set>

namespace backplane {

using visibility_detail::all_indices;
using visibility_detail::join;
using visibility_detail::quoted;
using visibility_detail::visible_summary;

namespace {

constexpr const char* kVisible = "CUDA_VISIBLE_DEVICES";
constexpr const char* kOrder = "CUDA_DEVICE_ORDER";

std::string prefix(std::string_view value) {
  return std::string(kVisible) + "=" + quoted(value) + ": ";
}

bool starts_with(std::string_view text, std::string_view start) {
  return text.substr(0, start.size()) == start;
}

}  // namespace

int cuda_cores_per_multiprocessor(int major, int minor) {
  switch (major) {
    case 1:
      return 8;
    case 2:
      return minor == 0 ? 32 : 48;
    case 3:
      return 192;
    case 5:
      return 128;
    case 6:
      return minor == 0 ? 64 : 128;
    case 7:
      return 64;
    case 8:
      return minor == 0 ? 64 : 128;
    default:
      return major <= 0 ? 0 : 128;
  }
}

long long cuda_speed_estimate(const PhysicalDevice& device) {
  const long long multiprocessors = std::max(device.multiprocessors, 0);
  const long long clock = std::max(device.clock_mhz, 0);
  const long long cores = cuda_cores_per_multiprocessor(device.compute_capability_major,
                                                        device.compute_capability_minor);
  return multiprocessors * cores * clock;
}

Visibility cuda_order(const std::vector<PhysicalDevice>& devices,
                      std::optional<std::string_view> cuda_device_order) {
  Visibility out;
  const auto pci = visibility_detail::pci_addresses(devices, kOrder);
  std::vector<int> order = all_indices(static_cast<int>(devices.size()));

  const bool pci_order = cuda_device_order && *cuda_device_order == "PCI_BUS_ID";
  if (!cuda_device_order) {
    out.notes.push_back(std::string(kOrder) +
                        " is unset, so CUDA orders devices FASTEST_FIRST (the default)");
  } else if (*cuda_device_order == "PCI_BUS_ID" || *cuda_device_order == "FASTEST_FIRST") {
    out.variable = kOrder;
    out.notes.push_back(std::string(kOrder) + "=" + quoted(*cuda_device_order));
  } else {
    out.notes.push_back(std::string(kOrder) + "=" + quoted(*cuda_device_order) +
                        " is neither FASTEST_FIRST nor PCI_BUS_ID (the names are case-sensitive); "
                        "CUDA ignores it and orders devices FASTEST_FIRST");
  }

  if (pci_order) {
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return pci[a] < pci[b]; });
    out.notes.push_back("PCI_BUS_ID orders devices by ascending PCI bus id: " + join(order));
  } else {
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
      const long long speed_a = cuda_speed_estimate(devices[a]);
      const long long speed_b = cuda_speed_estimate(devices[b]);
      if (speed_a != speed_b) return speed_a > speed_b;
      return pci[a] < pci[b];
    });
    std::string ranking;
    for (int i : order) {
      ranking += (ranking.empty() ? "" : ", ") + std::to_string(i) + " (" +
                 std::to_string(cuda_speed_estimate(devices[i])) + ")";
    }
    out.notes.push_back(
        "FASTEST_FIRST orders devices by multiprocessors x cores per multiprocessor x clock MHz, "
        "ties by PCI bus id: " +
        (ranking.empty() ? std::string("none") : ranking));
  }
  out.physical = std::move(order);
  return out;
}

CudaVisibleEntries parse_cuda_visible_devices(std::string_view value) {
  CudaVisibleEntries out;
  const std::vector<std::string_view> entries = visibility_detail::split_all(value, ',');

  for (std::string_view uuid_prefix : {std::string_view("GPU-"), std::string_view("MIG-")}) {
    if (!starts_with(value, uuid_prefix)) continue;
    out.notes.push_back(prefix(value) + "starts with " + std::string(uuid_prefix) +
                        ", so its entries are UUID prefixes");
    for (std::string_view entry : entries) {
      const std::string text(entry);
      if (std::find(out.uuid_prefixes.begin(), out.uuid_prefixes.end(), text) !=
          out.uuid_prefixes.end()) {
        out.uuid_prefixes.clear();
        out.notes.push_back(prefix(value) + "entry " + quoted(entry) +
                            " is repeated, so the whole list is empty");
        return out;
      }
      if (!starts_with(entry, uuid_prefix)) {
        out.notes.push_back(prefix(value) + "entry " + quoted(entry) + " does not start with " +
                            std::string(uuid_prefix) + ", so the list ends there");
        break;
      }
      out.uuid_prefixes.push_back(text);
    }
    return out;
  }

  std::set<std::string> seen;  // by digits, so that "1" and "01" are the same index
  for (std::string_view entry : entries) {
    const std::string_view text = visibility_detail::trim(entry);
    const visibility_detail::CInteger number = visibility_detail::read_c_integer(text, 10);
    if (number.length == 0) {
      out.notes.push_back(prefix(value) + "entry " + quoted(entry) +
                          " does not start with a number, so the list ends there");
      break;
    }
    if (number.negative && number.digits != "0") {
      out.notes.push_back(prefix(value) + "entry " + quoted(entry) +
                          " is negative, so the list ends there");
      break;
    }
    if (!seen.insert(number.digits).second) {
      out.ordinals.clear();
      out.notes.push_back(prefix(value) + "index " + number.digits +
                          " is repeated, so the whole list is empty");
      return out;
    }
    if (number.length != text.size() || number.negative || text.front() == '+') {
      out.notes.push_back(prefix(value) + "entry " + quoted(entry) + " is read as " +
                          number.digits +
                          " (like strtoul: a sign, leading digits, the rest "
                          "ignored)");
    }
    out.ordinals.push_back(number.overflow ? ~0ULL : number.magnitude);
  }
  return out;
}

namespace {

std::vector<int> resolve_prefixes(std::string_view value, const std::vector<std::string>& prefixes,
                                  const std::vector<std::string>& uuids,
                                  std::vector<std::string>& notes) {
  std::vector<int> ordinals;
  for (const std::string& candidate : prefixes) {
    std::vector<int> matches;
    for (std::size_t i = 0; i < uuids.size(); ++i) {
      if (starts_with(uuids[i], candidate)) matches.push_back(static_cast<int>(i));
    }
    if (matches.empty()) {
      notes.push_back(prefix(value) + quoted(candidate) +
                      " is the start of no device's UUID, so the list ends there");
      break;
    }
    if (matches.size() > 1) {
      notes.push_back(prefix(value) + quoted(candidate) + " starts the UUIDs of devices " +
                      join(matches) + ", which is ambiguous, so the list ends there");
      break;
    }
    if (std::find(ordinals.begin(), ordinals.end(), matches[0]) != ordinals.end()) {
      notes.push_back(prefix(value) + quoted(candidate) + " names device " +
                      std::to_string(matches[0]) + " a second time, so the whole list is empty");
      return {};
    }
    ordinals.push_back(matches[0]);
  }
  return ordinals;
}

}  // namespace

std::vector<int> cuda_uuids_to_ordinals(const std::vector<std::string>& prefixes,
                                        const std::vector<std::string>& uuids) {
  std::vector<std::string> notes;
  return resolve_prefixes("", prefixes, uuids, notes);
}

Visibility cuda_visible(std::optional<std::string_view> cuda_visible_devices,
                        const std::vector<std::string>& uuids) {
  Visibility out;
  const int count = static_cast<int>(uuids.size());
  if (!cuda_visible_devices) {
    out.physical = all_indices(count);
    out.notes.push_back(std::string(kVisible) + " is unset, so all " + std::to_string(count) +
                        " devices are visible");
    return out;
  }
  const std::string_view value = *cuda_visible_devices;
  out.variable = kVisible;
  if (value.empty()) {
    out.notes.push_back(std::string(kVisible) + " is set but empty, so no device is visible");
    return out;
  }

  CudaVisibleEntries entries = parse_cuda_visible_devices(value);
  out.notes = std::move(entries.notes);
  if (!entries.uuid_prefixes.empty()) {
    out.physical = resolve_prefixes(value, entries.uuid_prefixes, uuids, out.notes);
  } else {
    for (unsigned long long ordinal : entries.ordinals) {
      if (ordinal >= static_cast<unsigned long long>(count)) {
        out.notes.push_back(
            prefix(value) + "index " +
            (ordinal == ~0ULL ? std::string("(too large)") : std::to_string(ordinal)) +
            " is not one of the " + std::to_string(count) + " devices, so the list ends there");
        break;
      }
      out.physical.push_back(static_cast<int>(ordinal));
    }
  }
  out.notes.push_back(prefix(value) + visible_summary(out.physical, "device"));
  return out;
}

}  // namespace backplane
