// AMD ROCm: ROCR_VISIBLE_DEVICES, then HIP_VISIBLE_DEVICES / CUDA_VISIBLE_DEVICES.
// Sources: ROCR-Runtime src/core/runtime/amd_filter_device.cpp (RvdFilter) and amd_topology.cpp
// (the listed order is the enumeration order); CLR rocclr/device/rocm/rocdevice.cpp
// (Device::init picks HIP_VISIBLE_DEVICES, else CUDA_VISIBLE_DEVICES, and GPU_DEVICE_ORDINAL only
// for OpenCL); ROCm "GPU isolation techniques"; PyTorch torch/cuda/__init__.py, whose
// _parse_visible_devices raises "HIP_VISIBLE_DEVICES contains more devices than
// ROCR_VISIBLE_DEVICES".
#include <backplane/error.hpp>
#include <backplane/rules/visibility.hpp>

#include "text.hpp"

#include <algorithm>
#include <cctype>

namespace backplane {

using visibility_detail::quoted;

namespace {

constexpr const char* kRocr = "ROCR_VISIBLE_DEVICES";

std::string upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// std::getline tokens: a trailing separator adds no empty token, a leading one does.
std::vector<std::string_view> getline_tokens(std::string_view text) {
  std::vector<std::string_view> tokens = visibility_detail::split_all(text, ',');
  if (!tokens.empty() && tokens.back().empty()) tokens.pop_back();
  return tokens;
}

std::size_t entry_count(std::string_view text) {
  return static_cast<std::size_t>(std::count(text.begin(), text.end(), ',')) + 1;
}

// Step 1: indices into `uuids`, in the listed order.
std::vector<int> rocr_filter(std::string_view value, const std::vector<std::string>& uuids,
                             std::vector<std::string>& notes) {
  const std::string head = std::string(kRocr) + "=" + quoted(value) + ": ";
  const int count = static_cast<int>(uuids.size());
  std::vector<int> visible;
  if (value.empty()) {
    notes.push_back(std::string(kRocr) + " is set but empty, so no device is visible");
    return visible;
  }
  const std::vector<std::string_view> tokens = getline_tokens(value);
  if (tokens.size() > uuids.size()) {
    notes.push_back(head + "only the first " + std::to_string(count) +
                    " entries are read, one per device");
  }
  const std::size_t read = std::min(tokens.size(), uuids.size());
  for (std::size_t t = 0; t < read; ++t) {
    const std::string token = upper(visibility_detail::trim(tokens[t]));
    const std::string entry = quoted(tokens[t]);
    int index = -1;
    if (token.empty()) {
      notes.push_back(head + "entry " + entry + " is empty, so the list ends there");
      break;
    }
    if (token[0] == 'G') {
      if (token.size() < 5 || token.size() > 20) {
        notes.push_back(head + "entry " + entry +
                        " is not a UUID prefix of 5 to 20 characters (GPU-<16 hex digits>), so "
                        "the list ends there");
        break;
      }
      std::vector<int> matches;
      for (int i = 0; i < count; ++i) {
        if (upper(uuids[i]).compare(0, token.size(), token) == 0) matches.push_back(i);
      }
      if (matches.size() != 1) {
        notes.push_back(head + "entry " + entry +
                        (matches.empty() ? " matches no device UUID"
                                         : " matches the UUIDs of devices " +
                                               visibility_detail::join(matches)) +
                        ", so the list ends there");
        break;
      }
      index = matches[0];
    } else {
      const visibility_detail::CInteger number = visibility_detail::read_c_integer(token, 0);
      if (number.length == 0 || number.length != token.size()) {
        notes.push_back(head + "entry " + entry +
                        " is neither a whole number nor a GPU- UUID, so the list ends there");
        break;
      }
      const std::optional<int> checked = visibility_detail::as_index(number, count);
      if ((number.negative && number.magnitude != 0) || !checked) {
        notes.push_back(head + "entry " + entry + " is not one of the " + std::to_string(count) +
                        " devices, so the list ends there");
        break;
      }
      index = *checked;
    }
    if (std::find(visible.begin(), visible.end(), index) != visible.end()) {
      notes.push_back(head + "device " + std::to_string(index) +
                      " is listed again, so the list ends there");
      break;
    }
    visible.push_back(index);
  }
  notes.push_back(head + visibility_detail::visible_summary(visible, "device"));
  return visible;
}

// Step 2: positions in `devices` (the devices step 1 left), in the listed order.
std::vector<int> hip_filter(std::string_view variable, std::string_view value,
                            const std::vector<std::string>& device_uuids,
                            std::vector<std::string>& notes) {
  const std::string head = std::string(variable) + "=" + quoted(value) + ": ";
  const int count = static_cast<int>(device_uuids.size());
  std::vector<int> visible;
  std::size_t pos = 0;
  while (pos < value.size()) {
    std::size_t end = value.find(',', pos);
    if (end == std::string_view::npos) end = value.size();
    const std::string_view entry = value.substr(pos, end - pos);
    std::string text(entry);
    if (text.find("GPU-") != std::string::npos) {
      for (int i = 0; i < count; ++i) {
        if (device_uuids[i].find(text) != std::string::npos) {
          text = std::to_string(i);
          break;
        }
      }
    }
    const visibility_detail::CInteger number = visibility_detail::read_c_integer(text, 10);
    const std::optional<int> index = visibility_detail::as_index(number, count);
    if (number.length == 0 || number.negative || !index || text != std::to_string(*index)) {
      notes.push_back(head + "entry " + quoted(entry) + " is not a plain index below " +
                      std::to_string(count) + " (nor a UUID of one), so the list ends there");
      break;
    }
    if (std::find(visible.begin(), visible.end(), *index) != visible.end()) {
      notes.push_back(head + "index " + text + " is repeated; the repeat is skipped");
    } else {
      visible.push_back(*index);
    }
    pos = end + 1;
  }
  return visible;
}

}  // namespace

Visibility rocm_visible(const RocmVariables& variables, const std::vector<std::string>& uuids) {
  Visibility out;
  const auto& rocr = variables.rocr_visible_devices;
  const auto& hip = variables.hip_visible_devices;
  const auto& cuda = variables.cuda_visible_devices;

  // PyTorch's check, on the raw entry counts, before anything else.
  if (rocr && hip && entry_count(*hip) > entry_count(*rocr)) {
    throw InvalidArgument(
        "HIP_VISIBLE_DEVICES=" + quoted(*hip) + " lists " + std::to_string(entry_count(*hip)) +
        " devices but ROCR_VISIBLE_DEVICES=" + quoted(*rocr) + " lists only " +
        std::to_string(entry_count(*rocr)) +
        "; HIP_VISIBLE_DEVICES indexes the devices ROCR_VISIBLE_DEVICES leaves, so list at most " +
        std::to_string(entry_count(*rocr)) + " (PyTorch refuses this too)");
  }

  std::vector<int> layer = visibility_detail::all_indices(static_cast<int>(uuids.size()));
  if (rocr) {
    out.variable = kRocr;
    layer = rocr_filter(*rocr, uuids, out.notes);
  } else {
    out.notes.push_back(std::string(kRocr) + " is unset, so ROCr enumerates all " +
                        std::to_string(uuids.size()) + " devices");
  }

  const char* chosen = nullptr;
  std::string_view value;
  if (hip && !hip->empty()) {
    chosen = "HIP_VISIBLE_DEVICES";
    value = *hip;
    if (cuda) out.notes.push_back("CUDA_VISIBLE_DEVICES is ignored: HIP_VISIBLE_DEVICES wins");
  } else if (cuda && !cuda->empty()) {
    chosen = "CUDA_VISIBLE_DEVICES";
    value = *cuda;
    if (hip) out.notes.push_back("HIP_VISIBLE_DEVICES is empty, which HIP treats as unset");
  } else if (hip || cuda) {
    out.notes.push_back(
        "HIP_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES are empty or unset; HIP treats empty as "
        "unset, so it keeps every device ROCr enumerates");
  }
  if (chosen != nullptr) {
    std::vector<std::string> layer_uuids;
    for (int physical : layer) layer_uuids.push_back(uuids[physical]);
    const std::vector<int> picked = hip_filter(chosen, value, layer_uuids, out.notes);
    std::vector<int> physical;
    for (int position : picked) physical.push_back(layer[position]);
    layer = std::move(physical);
    out.variable = chosen;
    out.notes.push_back(std::string(chosen) + "=" + quoted(value) + ": " +
                        visibility_detail::visible_summary(layer, "device"));
  }

  if (variables.gpu_device_ordinal) {
    out.notes.push_back("GPU_DEVICE_ORDINAL=" + quoted(*variables.gpu_device_ordinal) +
                        " is ignored: ROCclr reads it for OpenCL only, HIP reads "
                        "HIP_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES");
  }
  out.physical = std::move(layer);
  return out;
}

}  // namespace backplane
