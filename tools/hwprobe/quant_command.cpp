// hwprobe quant: which quantization methods transformers can use on each device of this (or a
// simulated) machine, and why not (core/include/backplane/model/quantization_support.hpp).
#include <backplane/model/device_map.hpp>
#include <backplane/model/quantization_support.hpp>

#include <algorithm>
#include <iostream>

#include <nlohmann/json.hpp>

#include "command.hpp"

namespace po = boost::program_options;

namespace hwprobe {

namespace {

using OrderedJson = nlohmann::ordered_json;

OrderedJson rows_json(const std::vector<backplane::QuantMethodSupport>& rows) {
  OrderedJson out = OrderedJson::array();
  for (const backplane::QuantMethodSupport& r : rows) {
    out.push_back({{"method", r.method},
                   {"on_load", backplane::to_string(r.on_load)},
                   {"pre_quantized", backplane::to_string(r.pre_quantized)},
                   {"planned", r.planned},
                   {"why", r.why},
                   {"needs", r.needs}});
  }
  return out;
}

std::string pad(const std::string& text, size_t width) {
  return text + std::string(text.size() < width ? width - text.size() : 1, ' ');
}

// `label`: the device, or a run of alike devices ("cuda:0-7").
void print_rows(const std::string& label, const backplane::DeviceInfo& device, bool offload,
                const std::vector<backplane::QuantMethodSupport>& rows) {
  std::cout << label;
  if (!device.name.empty()) std::cout << " (" << device.name;
  if (device.compute_capability) {
    std::cout << (device.name.empty() ? " (" : ", ") << "compute capability "
              << device.compute_capability->str();
  }
  if (!device.name.empty() || device.compute_capability) std::cout << ")";
  std::cout << (offload ? ": where a device_map offloads to" : "") << "\n";
  std::cout << pad("METHOD", 20) << pad("ON LOAD", 13) << pad("PRE-QUANTIZED", 15)
            << pad("PLANNED", 9) << "WHY\n";
  for (const backplane::QuantMethodSupport& r : rows) {
    std::cout << pad(r.method, 20) << pad(backplane::to_string(r.on_load), 13)
              << pad(backplane::to_string(r.pre_quantized), 15) << pad(r.planned ? "yes" : "no", 9)
              << r.why << " (needs " << r.needs << ")\n";
  }
}

// `b` follows `a`: the next index of the same type, name and compute capability.
bool alike(const backplane::DeviceInfo& a, const backplane::DeviceInfo& b) {
  const bool same_cc = a.compute_capability.has_value() == b.compute_capability.has_value() &&
                       (!a.compute_capability || *a.compute_capability == *b.compute_capability);
  return a.device.type() == b.device.type() && a.name == b.name && same_cc &&
         b.device.index().value_or(0) == a.device.index().value_or(0) + 1;
}

}  // namespace

int run_quant(const std::vector<std::string>& args) {
  CommonOptions common;
  std::string device_text;
  po::options_description description("Options");
  description.add_options()("device", po::value(&device_text)->value_name("DEVICE"),
                            "one device (\"cuda:1\", \"cpu\"); default: every device");
  add_common_options(description, common);
  po::variables_map vm;
  if (!parse_command_or_help(args, description, "",
                             "hwprobe quant [--device DEVICE] [--json] [--sim NAME|FILE]", vm)) {
    return kExitOk;
  }
  const backplane::Runtime runtime = open_runtime(common);
  std::vector<backplane::DeviceInfo> devices;
  try {
    devices = chosen_devices(
        runtime, vm.count("device") ? std::optional<std::string>(device_text) : std::nullopt);
  } catch (const backplane::Error& e) {
    std::cerr << "hwprobe quant: " << e.what() << "\n";  // a device that is not here
    return kExitUsage;
  }
  // torch's view of the machine: the planning accelerator, torch.cuda, torch.xpu.
  const backplane::QuantMachine machine = backplane::quant_machine(
      runtime.devices(), backplane::plan_hardware(runtime).accelerator_type);
  OrderedJson json_devices = OrderedJson::array();
  for (size_t i = 0; i < devices.size(); ++i) {
    const backplane::DeviceInfo& device = devices[i];
    const backplane::QuantDevice facts{device.device.type(), device.compute_capability,
                                       device.device.str()};
    const std::vector<backplane::QuantMethodSupport> rows =
        backplane::quantization_support(facts, machine);
    const bool offload = facts.type == "cpu" && machine.accelerator.has_value();
    if (common.json) {
      json_devices.push_back(
          {{"device", device.device.str()},
           {"compute_capability", device.compute_capability
                                      ? OrderedJson(device.compute_capability->str())
                                      : OrderedJson(nullptr)},
           {"offload", offload},
           {"methods", rows_json(rows)}});
    } else {
      // Consecutive devices of one type, name and compute capability share a table.
      size_t last = i;
      while (last + 1 < devices.size() && alike(devices[last], devices[last + 1])) ++last;
      std::string label = device.device.str();
      if (last > i) label += "-" + std::to_string(devices[last].device.index().value_or(0));
      if (i > 0) std::cout << "\n";
      print_rows(label, device, offload, rows);
      i = last;
    }
  }
  if (common.json) {
    OrderedJson out = {
        {"accelerator", machine.accelerator ? OrderedJson(machine.accelerator->type) : nullptr},
        {"devices", json_devices}};
    std::cout << out.dump(2) << "\n";
  }
  return kExitOk;
}

}  // namespace hwprobe
