// hwprobe plugins: the search path, and what became of each manifest found on it.
#include <iostream>

#include "command.hpp"
#include "json_report.hpp"
#include "text_report.hpp"

namespace po = boost::program_options;

namespace hwprobe {

int run_plugins(const std::vector<std::string>& args) {
  CommonOptions common;
  po::options_description description("Options");
  add_common_options(description, common);
  po::variables_map vm;
  if (!parse_command_or_help(args, description, "", "hwprobe plugins [--json]", vm)) {
    return kExitOk;
  }
  const backplane::Runtime runtime = open_runtime(common);
  if (common.json) {
    std::cout << plugins_json(runtime).dump(2) << "\n";
  } else {
    print_plugins(std::cout, runtime);
  }
  return kExitOk;
}

}  // namespace hwprobe
