// The device a training process uses (transformers training_args.py
// TrainingArguments._setup_devices; accelerate state.py PartialState: default_device,
// _prepare_backend, set_device).
#include <backplane/error.hpp>
#include <backplane/rules/selection.hpp>

#include <algorithm>
#include <cctype>

#include "common.hpp"

namespace backplane {

namespace {

using selection_detail::single_quoted;

// transformers utils/generic.py strtobool (Accelerate's str_to_bool reads the same words).
bool truth_value(const std::string& variable, const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* word : {"y", "yes", "t", "true", "on", "1"}) {
    if (lower == word) return true;
  }
  for (const char* word : {"n", "no", "f", "false", "off", "0"}) {
    if (lower == word) return false;
  }
  throw InvalidArgument(variable + "=" + single_quoted(text) + ": invalid truth value " +
                        single_quoted(lower) +
                        "; expected one of y, yes, t, true, on, 1 or n, no, f, false, off, 0");
}

// The type (and maybe index) a rule chose, before any launch is applied.
struct Choice {
  std::string type = "cpu";
  std::optional<int> index;  // only from an explicit device string
  bool automatic = false;    // chosen by training priority
  std::string reason;
};

std::optional<Choice> explicit_device(const std::vector<BackendInfo>& backends,
                                      const std::vector<DeviceInfo>& devices,
                                      const TrainingOptions& options, const EnvLookup& env) {
  std::optional<std::string> text;
  std::string source;
  if (options.device) {
    text = options.device;
    source = "device";
  } else if ((text = env("BACKPLANE_DEVICE"))) {
    source = "BACKPLANE_DEVICE";
  } else if ((text = env("ACCELERATE_TORCH_DEVICE"))) {
    source = "ACCELERATE_TORCH_DEVICE";
  } else {
    return std::nullopt;
  }
  std::optional<Device> device;
  try {
    device = parse_device(*text, selection_detail::known_types(backends));
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(source + "=" + single_quoted(*text) + ": " + e.what());
  }
  selection_detail::require_device(backends, devices, *device,
                                   source + "=" + single_quoted(*text) + ":");
  Choice choice;
  choice.type = device->type();
  choice.index = device->index();
  choice.reason =
      source + "=" + single_quoted(*text) + " names the device" +
      (source == "ACCELERATE_TORCH_DEVICE" ? " (Accelerate's PartialState takes it as the device)"
                                           : "");
  return choice;
}

Choice automatic_device(const std::vector<BackendInfo>& backends,
                        const std::vector<DeviceInfo>& devices) {
  std::vector<const BackendInfo*> candidates;
  for (const BackendInfo& backend : backends) {
    if (backend.training_priority <= 0 || !backend.replaced_by.empty()) continue;
    if (!selection_detail::is_available(backends, devices, backend.type)) continue;
    candidates.push_back(&backend);
  }
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const BackendInfo* a, const BackendInfo* b) {
                     return a->training_priority < b->training_priority;
                   });
  Choice choice;
  choice.automatic = true;
  if (candidates.empty()) {
    choice.reason =
        "no available backend is chosen automatically for training, so cpu "
        "(transformers _setup_devices falls back to cpu)";
    return choice;
  }
  choice.type = candidates.front()->type;
  std::string order;
  for (const BackendInfo* backend : candidates) {
    order += (order.empty() ? "" : ", ") + backend->type + " " +
             std::to_string(backend->training_priority);
  }
  choice.reason = (choice.type == "cpu" ? std::string("no accelerator is available for training, "
                                                      "so cpu (training order: ")
                                        : choice.type +
                                              " is the first available backend in training "
                                              "order (") +
                  order +
                  "; transformers _setup_devices: mps, xpu, mlu, musa, npu, hpu, neuron, tpu, "
                  "cuda, then cpu)";
  return choice;
}

}  // namespace

Selection select_training_device(const std::vector<BackendInfo>& backends,
                                 const std::vector<DeviceInfo>& devices,
                                 const TrainingOptions& options, const EnvLookup& env) {
  const Launch launch = detect_launch(env);

  Choice choice;
  if (options.use_cpu) {
    if (options.device) {
      const Device device = parse_device(*options.device, selection_detail::known_types(backends));
      if (device.type() != "cpu") {
        throw InvalidArgument("use_cpu=True contradicts device=" + single_quoted(*options.device) +
                              "; drop one of them");
      }
    }
    choice.reason = "use_cpu=True forces cpu (transformers _setup_devices)";
  } else if (const std::optional<std::string> flag = env("ACCELERATE_USE_CPU");
             flag && truth_value("ACCELERATE_USE_CPU", *flag)) {
    choice.reason = "ACCELERATE_USE_CPU=" + single_quoted(*flag) + " forces cpu (as use_cpu=True)";
  } else if (std::optional<Choice> named = explicit_device(backends, devices, options, env)) {
    choice = *named;
  } else {
    choice = automatic_device(backends, devices);
  }

  const bool mpi_available = options.mpi_available.value_or(false);
  const BackendInfo* backend = selection_detail::find_backend(backends, choice.type);
  // A requested backend must fit even when the run is not distributed.
  const std::optional<std::string> collective =
      collective_backend_for(choice.type, backend, options.backend, mpi_available, launch.mpi);

  Selection selection;
  std::string reason = choice.reason;
  if (launch.launched() && collective) {
    const size_t count =
        std::max<size_t>(1, selection_detail::devices_of(devices, choice.type).size());
    const int index = choice.index ? *choice.index
                                   : static_cast<int>(launch.local_rank % static_cast<int>(count));
    selection.device = Device(choice.type, index);
    selection.collective_backend = collective;
    selection.rank = launch.rank;
    selection.local_rank = launch.local_rank;
    selection.world_size = launch.world_size;
    selection.launcher = launch.launcher;
    std::string sources;
    for (const std::string& source : launch.sources)
      sources += (sources.empty() ? "" : ", ") + source;
    reason += "; launched by " + launch.launcher + " (" + sources + "): ";
    reason += choice.index
                  ? "the named index is kept"
                  : "device " + choice.type + ":(local_rank " + std::to_string(launch.local_rank) +
                        " % " + std::to_string(count) + " devices)";
    reason += ", collective backend " + *collective;
    if (launch.launcher != "torchrun" && choice.type != "cpu") {
      reason +=
          " (Accelerate itself distributes accelerators only under torchrun or accelerate "
          "launch, which set LOCAL_RANK)";
    }
    if (choice.type == "cpu" && choice.automatic) {
      reason +=
          " (Accelerate distributes a CPU run only with use_cpu=True or ACCELERATE_USE_CPU; "
          "without them each Python process would train alone)";
    }
  } else {
    selection.device = choice.index ? Device(choice.type, *choice.index)
                                    : selection_detail::single_process_device(choice.type, 0);
    if (launch.launched()) {
      reason += "; launched by " + launch.launcher + ", but " + choice.type +
                " has no collective backend, so each process trains alone (Accelerate: "
                "DistributedType.NO)";
    }
  }

  // Trainer's n_gpu: one process drives every visible CUDA device through DataParallel.
  if (!selection.collective_backend && choice.automatic && choice.type == "cuda") {
    for (const DeviceInfo* info : selection_detail::devices_of(devices, "cuda")) {
      selection.devices.push_back(info->device);
    }
    if (selection.devices.size() > 1) {
      reason += "; no launcher, so Trainer drives all " + std::to_string(selection.devices.size()) +
                " cuda devices in one process (n_gpu, DataParallel)";
    }
  }
  if (selection.devices.empty()) selection.devices.push_back(selection.device);

  if (selection.device.type() != "cpu" && selection.device.type() != "meta") {
    const Device lookup(selection.device.type(), selection.device.index().value_or(0));
    for (const DeviceInfo& info : devices) {
      if (info.device == lookup) selection.mixed_precision = mixed_precision_advice(&info);
    }
  }
  selection.reason = reason;
  return selection;
}

}  // namespace backplane
