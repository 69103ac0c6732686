#include "command.hpp"

#include <backplane/runtime/sim_topology.hpp>

#include <cstdlib>
#include <iostream>

namespace po = boost::program_options;

namespace hwprobe {

void add_common_options(po::options_description& description, CommonOptions& common) {
  description.add_options()("json", po::bool_switch(&common.json), "print JSON instead of text")(
      "log", po::value(&common.log_level)->value_name("LEVEL"),
      "error|warn|info|debug: why each plugin was taken or skipped (overrides BACKPLANE_LOG)")(
      "sim", po::value(&common.sim)->value_name("NAME|FILE"),
      "simulate a topology: a shipped one by name (h100x8, mi300x8, ...) or a JSON file (as "
      "BACKPLANE_SIM_TOPOLOGY)")(
      "isolate", po::bool_switch(&common.isolate),
      "probe each plugin in a child process first; one that crashes, hangs or exits in init is "
      "reported as failed (as BACKPLANE_ISOLATE=1; timeout: BACKPLANE_ISOLATE_TIMEOUT, 10 s)")(
      // Not bound: parse_command_or_help reads it from the parsed words.
      "help,h", po::bool_switch(), "show this help");
}

backplane::Runtime open_runtime(const CommonOptions& common) {
  backplane::RuntimeOptions options = backplane::RuntimeOptions::from_environment();
  // A topology asked for and not brought up is an error (Runtime::open), never the real machine.
  if (!common.sim.empty())
    options.sim_topology = backplane::resolve_sim_topology(common.sim, "--sim").string();
  if (!common.log_level.empty()) {
    options.log_level = backplane::parse_log_level(common.log_level, "--log");
  }
  if (common.isolate) options.isolate = true;
  return backplane::Runtime::open(options);
}

std::vector<backplane::DeviceInfo> chosen_devices(const backplane::Runtime& runtime,
                                                  const std::optional<std::string>& device) {
  if (!device) return runtime.devices();
  return {runtime.device(runtime.parse_device(*device))};
}

const std::vector<Command>& commands() {
  static const std::vector<Command> list = {
      {"report", "backends, devices and plugins found on this machine (the default)", &run_report},
      {"parse", "parse device strings (\"cuda:0\", \"cpu\") into type and index", &run_parse},
      {"plugins", "the plugin search path and what became of each manifest", &run_plugins},
      {"select", "the device training, inference or pipeline() would use, and why", &run_select},
      {"plan", "where from_pretrained(device_map=...) puts each module of a model", &run_plan},
      {"estimate", "what a model needs in memory, as accelerate estimate-memory prints it",
       &run_estimate},
      {"attention", "which attention kernel each attn_implementation value runs, and why",
       &run_attention},
      {"quant", "which quantization methods transformers can use on each device, and why not",
       &run_quant},
  };
  return list;
}

}  // namespace hwprobe
