// hwprobe parse STRING...: device strings into type and index, with c10's errors.
#include <iostream>

#include <nlohmann/json.hpp>

#include "command.hpp"

namespace po = boost::program_options;

namespace hwprobe {

int run_parse(const std::vector<std::string>& args) {
  CommonOptions common;
  po::options_description description("Options");
  add_common_options(description, common);
  po::variables_map vm;
  if (!parse_command_or_help(args, description, "strings", "hwprobe parse STRING... [--json]",
                             vm)) {
    return kExitOk;
  }
  const std::vector<std::string> strings = positional_words(vm, "strings");
  if (strings.empty()) {
    std::cerr << "hwprobe parse: give at least one device string, e.g. hwprobe parse cuda:0\n";
    return kExitUsage;
  }
  const backplane::Runtime runtime = open_runtime(common);
  int status = kExitOk;
  nlohmann::json results = nlohmann::json::array();
  for (const std::string& text : strings) {
    try {
      const backplane::Device device = runtime.parse_device(text);
      const nlohmann::json index = device.index() ? nlohmann::json(*device.index()) : nullptr;
      results.push_back({{"input", text}, {"type", device.type()}, {"index", index}});
      if (!common.json) {
        std::cout << text << "\ttype=" << device.type()
                  << " index=" << (device.index() ? std::to_string(*device.index()) : "none")
                  << "\n";
      }
    } catch (const backplane::InvalidArgument& e) {
      std::cerr << "hwprobe: " << e.what() << "\n";
      results.push_back({{"input", text}, {"error", e.what()}});
      status = kExitUsage;
    }
  }
  if (common.json) std::cout << results.dump(2) << "\n";
  return status;
}

}  // namespace hwprobe
