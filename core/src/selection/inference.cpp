// The device a loaded model starts on (transformers modeling_utils.py from_pretrained with
// accelerate utils/modeling.py get_max_memory) and the device of a pipeline (transformers
// pipelines/base.py Pipeline.__init__).
#include <backplane/error.hpp>
#include <backplane/rules/selection.hpp>

#include <algorithm>
#include <limits>

#include "common.hpp"

namespace backplane {

namespace {

using selection_detail::single_quoted;

const DeviceInfo* find_info(const std::vector<DeviceInfo>& devices, const Device& device) {
  const Device lookup(device.type(), device.index().value_or(0));
  for (const DeviceInfo& info : devices) {
    if (info.device == lookup) return &info;
  }
  return nullptr;
}

void finish(Selection& selection, const std::vector<DeviceInfo>& devices) {
  if (selection.devices.empty()) selection.devices.push_back(selection.device);
  if (selection.device.type() != "cpu") {
    selection.mixed_precision = mixed_precision_advice(find_info(devices, selection.device));
  }
}

// The devices automatic placement covers: one accelerator type, then cpu (or mps in its place).
std::vector<Device> automatic_coverage(const std::vector<BackendInfo>& backends,
                                       const std::vector<DeviceInfo>& devices,
                                       std::string& reason) {
  std::vector<Device> covered;
  const std::vector<const BackendInfo*> accelerators =
      selection_detail::automatic_accelerators(backends, devices);
  if (!accelerators.empty()) {
    const std::string& type = accelerators.front()->type;
    for (const DeviceInfo* info : selection_detail::devices_of(devices, type)) {
      covered.push_back(info->device);
    }
    reason += type + " devices";
    if (accelerators.size() > 1) {
      reason +=
          " (Accelerate's get_max_memory takes one accelerator type, in the order npu, mlu, "
          "musa, xpu, hpu, cuda; here also ";
      for (size_t i = 1; i < accelerators.size(); ++i) {
        reason += (i > 1 ? ", " : "") + accelerators[i]->type;
      }
      reason += ")";
    }
  }
  const BackendInfo* mps = selection_detail::find_backend(backends, "mps");
  const bool use_mps =
      mps && mps->automatic_placement && selection_detail::is_available(backends, devices, "mps");
  if (use_mps) {
    covered.push_back(Device("mps"));
    reason += covered.size() > 1 ? ", then mps (in place of cpu)" : "mps";
  } else {
    covered.push_back(Device("cpu"));
    reason += covered.size() > 1 ? ", then cpu" : "cpu only";
  }
  if (covered.size() == 1 && !use_mps) {
    std::string named;
    for (const BackendInfo& backend : backends) {
      if (backend.accelerator && !backend.automatic_placement && backend.replaced_by.empty() &&
          selection_detail::is_available(backends, devices, backend.type)) {
        named += (named.empty() ? "" : ", ") + backend.type;
      }
    }
    reason += named.empty() ? ": no accelerator that automatic placement covers"
                            : ": automatic placement does not cover " + named +
                                  "; name the device instead (device_map=\"" +
                                  named.substr(0, named.find(',')) + "\")";
  }
  return covered;
}

// An index in device_map: the accelerator type automatic placement would use.
Device accelerator_index(const std::vector<BackendInfo>& backends,
                         const std::vector<DeviceInfo>& devices, int index,
                         const std::string& what) {
  const std::vector<const BackendInfo*> accelerators =
      selection_detail::automatic_accelerators(backends, devices);
  if (accelerators.empty()) {
    throw Unavailable(what + " names accelerator " + std::to_string(index) +
                      ", but no available accelerator is covered by automatic placement; name "
                      "the device instead (e.g. 'cpu' or 'neuron:0')");
  }
  const Device device(accelerators.front()->type, index);
  selection_detail::require_device(backends, devices, device, what + ":");
  return device;
}

Device resolve_target(const std::vector<BackendInfo>& backends,
                      const std::vector<DeviceInfo>& devices, const DeviceMapTarget& target,
                      const std::string& what) {
  if (target.kind == DeviceMapTarget::Kind::kIndex) {
    return accelerator_index(backends, devices, target.index, what);
  }
  const Device& device = target.device;
  selection_detail::require_device(backends, devices, device, what + ":");
  if (device.type() == "cpu" || device.type() == "mps" || device.type() == "meta") return device;
  return Device(device.type(), device.index().value_or(0));
}

// check_and_set_device_map: device_map="cuda" becomes f"cuda:{LOCAL_RANK or 0}", so each process
// of a launched run loads on its own GPU. Only the exact string "cuda" does this.
DeviceMapTarget cuda_at_local_rank(const DeviceMapTarget& target, const EnvLookup& env,
                                   std::string& note) {
  if (target.kind != DeviceMapTarget::Kind::kDevice || target.device.type() != "cuda" ||
      target.device.has_index()) {
    return target;
  }
  const std::optional<std::string> text = env("LOCAL_RANK");
  if (!text) return target;
  const std::optional<long long> local_rank = selection_detail::python_int(*text);
  if (!local_rank) {
    throw InvalidArgument("Environment variable LOCAL_RANK=" + single_quoted(*text) +
                          " is not an integer (transformers reads it for device_map=\"cuda\")");
  }
  if (*local_rank < 0) {
    // transformers builds "cuda:-1" first, and torch.device refuses it.
    throw InvalidArgument(
        "When passing device_map as a string, the value needs to be a device name (e.g. cpu, "
        "cuda:0) or 'auto', 'balanced', 'balanced_low_0', 'sequential' but found cuda:" +
        std::to_string(*local_rank) + ".");
  }
  if (*local_rank > std::numeric_limits<int>::max()) {
    throw InvalidArgument("Environment variable LOCAL_RANK=" + single_quoted(*text) +
                          " is too large for a local rank");
  }
  DeviceMapTarget resolved = target;
  resolved.device = Device("cuda", static_cast<int>(*local_rank));
  note = " (device_map=\"cuda\" means cuda:LOCAL_RANK, LOCAL_RANK=" + std::to_string(*local_rank) +
         ")";
  return resolved;
}

}  // namespace

Selection select_inference_device(const std::vector<BackendInfo>& backends,
                                  const std::vector<DeviceInfo>& devices,
                                  const std::optional<DeviceMapRequest>& device_map,
                                  const EnvLookup& env) {
  Selection selection;
  if (!device_map) {
    selection.reason = "no device_map: from_pretrained loads the model on cpu";
    finish(selection, devices);
    return selection;
  }
  const std::string what = "device_map=" + single_quoted(device_map->str());
  if (device_map->is_strategy()) {
    std::string reason = what + ": automatic placement covers ";
    selection.devices = automatic_coverage(backends, devices, reason);
    selection.device = selection.devices.front();
    selection.reason = reason + "; the planner decides which module goes where";
    finish(selection, devices);
    return selection;
  }
  std::string local_rank_note;
  for (const auto& [module, value] : device_map->modules) {
    if (value.kind == DeviceMapTarget::Kind::kDisk) continue;
    const DeviceMapTarget target = device_map->kind == DeviceMapKind::kDevice
                                       ? cuda_at_local_rank(value, env, local_rank_note)
                                       : value;
    const std::string entry = device_map->kind == DeviceMapKind::kExplicit
                                  ? "device_map entry " + single_quoted(module)
                                  : what;
    const Device device = resolve_target(backends, devices, target, entry);
    if (std::find(selection.devices.begin(), selection.devices.end(), device) ==
        selection.devices.end()) {
      selection.devices.push_back(device);
    }
  }
  if (selection.devices.empty()) {
    selection.devices.push_back(Device("cpu"));
    selection.reason = what + ": every module is offloaded to disk; cpu runs them";
  } else if (device_map->kind == DeviceMapKind::kExplicit) {
    selection.reason = what +
                       ": the first module's device (a pipeline takes the first device of "
                       "hf_device_map)";
  } else {
    selection.reason =
        what + ": the whole model on " + selection.devices.front().str() + local_rank_note;
  }
  selection.device = selection.devices.front();
  finish(selection, devices);
  return selection;
}

Selection select_pipeline_device(const std::vector<BackendInfo>& backends,
                                 const std::vector<DeviceInfo>& devices,
                                 const PipelineOptions& options, const EnvLookup& env) {
  if (options.device && options.device_map) {
    throw InvalidArgument(
        "Both `device` and `device_map` are specified. `device` will override `device_map`. You "
        "will most likely encounter unexpected behavior. Please remove `device` and keep "
        "`device_map`.");
  }
  if (options.device_map) {
    Selection selection = select_inference_device(backends, devices, options.device_map, env);
    selection.reason = "pipeline(device_map=...): the model's first device; " + selection.reason;
    return selection;
  }
  Selection selection;
  const std::string text = options.device.value_or("0");
  const bool integer = !text.empty() &&
                       std::all_of(text.begin() + (text[0] == '-' ? 1 : 0), text.end(),
                                   [](char c) { return c >= '0' && c <= '9'; }) &&
                       text != "-";
  const std::string what = options.device ? "device=" + text : std::string("no device");
  if (!integer) {
    // pipelines/base.py checks only xpu and hpu before torch.device(device).
    for (const char* type : {"xpu", "hpu"}) {
      if (text.find(type) != std::string::npos &&
          !selection_detail::is_available(backends, devices, type)) {
        throw InvalidArgument(text + " is not available, you should use device=\"cpu\" instead");
      }
    }
    Device device("cpu");
    try {
      device = parse_device(text, selection_detail::known_types(backends));
    } catch (const InvalidArgument& e) {
      throw InvalidArgument("device=" + single_quoted(text) + ": " + e.what());
    }
    selection_detail::require_device(backends, devices, device,
                                     "device=" + single_quoted(text) + ":");
    selection.device = device;
    selection.reason = "device=" + single_quoted(text) + " names the device";
    finish(selection, devices);
    return selection;
  }
  if (text[0] == '-') {
    selection.reason = what + ": a negative device means cpu";
    finish(selection, devices);
    return selection;
  }
  int index = 0;
  try {
    index = std::stoi(text);
  } catch (const std::exception&) {
    throw InvalidArgument("device=" + text + " is too large for a device index");
  }
  for (const char* type : {"mlu", "musa", "cuda", "npu", "hpu", "xpu", "mps"}) {
    if (!selection_detail::is_available(backends, devices, type)) continue;
    const Device device(type, index);
    selection_detail::require_device(backends, devices, device, what + " (" + device.str() + "):");
    selection.device = device;
    selection.reason = (options.device ? what : "no device: pipeline() uses device 0") +
                       std::string(
                           ", and an int means the first available of mlu, musa, cuda, "
                           "npu, hpu, xpu, mps: ") +
                       device.str();
    finish(selection, devices);
    return selection;
  }
  selection.reason = (options.device ? what : "no device: pipeline() uses device 0") +
                     std::string(
                         ", but none of mlu, musa, cuda, npu, hpu, xpu, mps is available: "
                         "cpu");
  finish(selection, devices);
  return selection;
}

}  // namespace backplane
