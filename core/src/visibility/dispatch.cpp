// visible_for: the rule for a device type and vendor (docs/device-rules.md §5).
#include <backplane/rules/visibility.hpp>

#include "text.hpp"

namespace backplane {

namespace {

std::optional<std::string> read(const EnvLookup& env, const char* name) {
  return env ? env(name) : std::nullopt;
}

std::optional<std::string_view> view(const std::optional<std::string>& value) {
  if (!value) return std::nullopt;
  return std::string_view(*value);
}

std::vector<std::string> uuids_of(const std::vector<PhysicalDevice>& devices) {
  std::vector<std::string> uuids;
  uuids.reserve(devices.size());
  for (const PhysicalDevice& device : devices) uuids.push_back(device.uuid);
  return uuids;
}

void append(std::vector<std::string>& to, const std::vector<std::string>& notes) {
  to.insert(to.end(), notes.begin(), notes.end());
}

Visibility nvidia(const EnvLookup& env, const std::vector<PhysicalDevice>& devices) {
  const auto order_value = read(env, "CUDA_DEVICE_ORDER");
  const Visibility order = cuda_order(devices, view(order_value));
  std::vector<std::string> ordered_uuids;
  for (int physical : order.physical) ordered_uuids.push_back(devices[physical].uuid);

  const auto visible_value = read(env, "CUDA_VISIBLE_DEVICES");
  const Visibility visible = cuda_visible(view(visible_value), ordered_uuids);

  Visibility out;
  for (int ordinal : visible.physical) out.physical.push_back(order.physical[ordinal]);
  out.variable = visible.variable.empty() ? order.variable : visible.variable;
  append(out.notes, order.notes);
  append(out.notes, visible.notes);
  if (!visible.physical.empty() && out.physical != visible.physical) {
    out.notes.push_back("as physical devices (input order): " +
                        visibility_detail::join(out.physical));
  }
  return out;
}

Visibility intel(const EnvLookup& env, const std::vector<PhysicalDevice>& devices) {
  LevelZeroVariables variables;
  variables.affinity_mask = read(env, "ZE_AFFINITY_MASK");
  variables.flat_device_hierarchy = read(env, "ZE_FLAT_DEVICE_HIERARCHY");
  variables.enable_pci_id_device_order = read(env, "ZE_ENABLE_PCI_ID_DEVICE_ORDER");
  LevelZeroVisibility zero = level_zero_visible(variables, devices);

  Visibility out;
  out.variable = std::move(zero.variable);
  out.notes = std::move(zero.notes);
  for (const LevelZeroDevice& device : zero.devices) {
    out.physical.push_back(device.root);
    out.sub_device.push_back(device.sub_device);
  }
  return out;
}

}  // namespace

Visibility visible_for(std::string_view type, std::string_view vendor, const EnvLookup& env,
                       const std::vector<PhysicalDevice>& devices) {
  const int count = static_cast<int>(devices.size());
  const bool amd = vendor == "amd" || vendor == "rocm";

  if (type == "hip" || type == "rocm" || (type == "cuda" && amd)) {
    RocmVariables variables;
    variables.rocr_visible_devices = read(env, "ROCR_VISIBLE_DEVICES");
    variables.hip_visible_devices = read(env, "HIP_VISIBLE_DEVICES");
    variables.cuda_visible_devices = read(env, "CUDA_VISIBLE_DEVICES");
    variables.gpu_device_ordinal = read(env, "GPU_DEVICE_ORDINAL");
    return rocm_visible(variables, uuids_of(devices));
  }
  if (type == "cuda") {
    Visibility out = nvidia(env, devices);
    if (vendor != "nvidia") {
      out.notes.insert(out.notes.begin(), "vendor " + visibility_detail::quoted(vendor) +
                                              " is not amd or rocm, so NVIDIA's rules apply");
    }
    return out;
  }
  if (type == "xpu") return intel(env, devices);
  if (type == "npu") return ascend_visible(view(read(env, "ASCEND_RT_VISIBLE_DEVICES")), count);
  if (type == "hpu") {
    return index_list_visible("HABANA_VISIBLE_MODULES", view(read(env, "HABANA_VISIBLE_MODULES")),
                              count);
  }
  if (type == "musa") {
    return index_list_visible("MUSA_VISIBLE_DEVICES", view(read(env, "MUSA_VISIBLE_DEVICES")),
                              count);
  }
  if (type == "mlu") {
    const auto cn = read(env, "CN_VISIBLE_DEVICES");
    const auto mlu = read(env, "MLU_VISIBLE_DEVICES");
    return mlu_visible(view(cn), view(mlu), uuids_of(devices));
  }
  if (type == "neuron") {
    return neuron_visible_cores(view(read(env, "NEURON_RT_VISIBLE_CORES")), count);
  }

  Visibility out;
  out.physical = visibility_detail::all_indices(count);
  out.notes.push_back("no visibility variable applies to " + std::string(type) +
                      " devices, so all " + std::to_string(count) + " are visible");
  return out;
}

}  // namespace backplane
