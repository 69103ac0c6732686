// hwprobe select --for training|inference|pipeline: which device a program would use, by the
// rules of Transformers and Accelerate (core/include/backplane/rules/selection.hpp), and why.
#include <backplane/rules/selection.hpp>

#include <iostream>

#include <nlohmann/json.hpp>

#include "command.hpp"

namespace po = boost::program_options;

namespace hwprobe {

namespace {

nlohmann::json selection_json(const backplane::Selection& s) {
  nlohmann::json devices = nlohmann::json::array();
  for (const backplane::Device& d : s.devices) devices.push_back(d.str());
  auto optional = [](const std::optional<std::string>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
  };
  return {{"device", s.device.str()},
          {"devices", devices},
          {"collective_backend", optional(s.collective_backend)},
          {"rank", s.rank},
          {"local_rank", s.local_rank},
          {"world_size", s.world_size},
          {"mixed_precision", optional(s.mixed_precision)},
          {"reason", s.reason}};
}

void print_text(const backplane::Selection& s) {
  std::string devices;
  for (const backplane::Device& d : s.devices) devices += (devices.empty() ? "" : " ") + d.str();
  std::cout << "device:             " << s.device << "\n"
            << "devices:            " << devices << "\n"
            << "collective backend: " << s.collective_backend.value_or("none") << "\n"
            << "rank:               " << s.rank << " (local " << s.local_rank << ") of "
            << s.world_size << "\n"
            << "mixed precision:    " << s.mixed_precision.value_or("none") << "\n"
            << "reason:             " << s.reason << "\n";
}

}  // namespace

int run_select(const std::vector<std::string>& args) {
  CommonOptions common;
  std::string purpose;
  bool use_cpu = false;
  std::string device_map;
  std::string device;
  std::string backend;
  po::options_description description("Options");
  description.add_options()("for", po::value(&purpose)->value_name("WHAT"),
                            "training | inference | pipeline (required)")(
      "use-cpu", po::bool_switch(&use_cpu), "training: TrainingArguments(use_cpu=True)")(
      "device-map", po::value(&device_map)->value_name("VALUE"),
      "inference, pipeline: auto, balanced, balanced_low_0, sequential, a device string, an "
      "accelerator index, or a JSON object {module: device}")(
      "device", po::value(&device)->value_name("VALUE"),
      "training: the device to use (as BACKPLANE_DEVICE); pipeline: pipeline(device=...), an "
      "int or a device string")("backend", po::value(&backend)->value_name("NAME"),
                                "training: the collective backend asked for (ddp_backend)");
  add_common_options(description, common);
  po::variables_map vm;
  if (!parse_command_or_help(
          args, description, "",
          "hwprobe select --for training|inference|pipeline [--use-cpu] [--device-map VALUE] "
          "[--device VALUE] [--backend NAME] [--json] [--sim NAME|FILE]",
          vm)) {
    return kExitOk;
  }
  auto refuse = [](const std::string& message) {
    std::cerr << "hwprobe select: " << message << "\n";
    return kExitUsage;
  };
  if (purpose != "training" && purpose != "inference" && purpose != "pipeline") {
    return refuse(purpose.empty()
                      ? "--for is required: training, inference or pipeline"
                      : "--for '" + purpose + "' is not one of training, inference, pipeline");
  }
  const bool training = purpose == "training";
  if (training && vm.count("device-map"))
    return refuse("--device-map is for inference or pipeline");
  if (!training && (use_cpu || vm.count("backend"))) {
    return refuse("--use-cpu and --backend are for training");
  }
  if (purpose == "inference" && vm.count("device")) {
    return refuse("--device is for training or pipeline; inference takes --device-map");
  }

  const backplane::Runtime runtime = open_runtime(common);
  backplane::Selection selection;
  try {
    std::optional<backplane::DeviceMapRequest> request;
    if (vm.count("device-map")) {
      request = backplane::parse_device_map(device_map, runtime);
    }
    if (training) {
      backplane::TrainingOptions options;
      options.use_cpu = use_cpu;
      if (vm.count("device")) options.device = device;
      if (vm.count("backend")) options.backend = backend;
      selection = backplane::select_training_device(runtime, options);
    } else if (purpose == "inference") {
      selection = backplane::select_inference_device(runtime, request);
    } else {
      backplane::PipelineOptions options;
      if (vm.count("device")) options.device = device;
      options.device_map = request;
      selection = backplane::select_pipeline_device(runtime, options);
    }
  } catch (const backplane::Error& e) {
    // A device that is not here is as much bad input as a malformed one.
    return refuse(e.what());
  }
  if (common.json) {
    std::cout << selection_json(selection).dump(2) << "\n";
  } else {
    print_text(selection);
  }
  return kExitOk;
}

}  // namespace hwprobe
