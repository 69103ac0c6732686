// hwprobe [report] [--json | --explain]: backends, devices and plugins.
#include <iostream>

#include "command.hpp"
#include "json_report.hpp"
#include "text_report.hpp"

namespace po = boost::program_options;

namespace hwprobe {

int run_report(const std::vector<std::string>& args) {
  CommonOptions common;
  bool explain = false;
  po::options_description description("Options");
  description.add_options()("explain", po::bool_switch(&explain),
                            "say in words how each device was found and mapped to its index");
  add_common_options(description, common);
  po::variables_map vm;
  if (!parse_command_or_help(args, description, "",
                             "hwprobe [report] [--json | --explain] [--sim NAME|FILE]", vm)) {
    return kExitOk;
  }
  const backplane::Runtime runtime = open_runtime(common);
  if (common.json) {
    std::cout << runtime_json(runtime).dump(2) << "\n";
  } else if (explain) {
    print_explanation(std::cout, runtime);
  } else {
    print_runtime(std::cout, runtime);
  }
  return kExitOk;
}

}  // namespace hwprobe
