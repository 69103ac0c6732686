// What every hwprobe command shares: the common options, opening the runtime, and
// parsing a command's own arguments. Each command lives in its own <name>_command.cpp.
#pragma once

#include <backplane/backplane.hpp>

#include <boost/program_options.hpp>

#include <optional>
#include <string>
#include <vector>

#include "command_line.hpp"

namespace hwprobe {

// Exit codes, Command and parse_command_or_help: shared with the other tools
// (tools/common/command_line.hpp).
using namespace backplane::tools;

// --json, --log LEVEL, --sim NAME|FILE, --isolate, --help: taken by every command.
struct CommonOptions {
  bool json = false;
  bool isolate = false;
  std::string log_level;
  std::string sim;
};

// Adds the common options to `description`, bound to `common`.
void add_common_options(boost::program_options::options_description& description,
                        CommonOptions& common);

// Applies --sim (RuntimeOptions::sim_topology), --log and --isolate, then opens the runtime.
backplane::Runtime open_runtime(const CommonOptions& common);

// --device DEVICE's device, or every device when it is not given (`device` empty). Throws
// backplane::Error for a device that is not here; the caller refuses it as bad input.
std::vector<backplane::DeviceInfo> chosen_devices(const backplane::Runtime& runtime,
                                                  const std::optional<std::string>& device);

// The commands, in the order `hwprobe --help` lists them. The first, "report", runs when the
// first word is not a command name.
const std::vector<Command>& commands();

int run_report(const std::vector<std::string>& args);
int run_parse(const std::vector<std::string>& args);
int run_plugins(const std::vector<std::string>& args);
int run_select(const std::vector<std::string>& args);
int run_plan(const std::vector<std::string>& args);
int run_attention(const std::vector<std::string>& args);
int run_estimate(const std::vector<std::string>& args);
int run_quant(const std::vector<std::string>& args);

}  // namespace hwprobe
