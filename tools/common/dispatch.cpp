#include "dispatch.hpp"

#include <backplane/error.hpp>
#include <backplane/version.hpp>

#include <algorithm>
#include <cstring>
#include <exception>
#include <iostream>

namespace backplane::tools {
namespace {

void print_help(const Tool& tool) {
  std::cout << "Usage: " << tool.name << (tool.default_command ? " [COMMAND]" : " COMMAND")
            << " [ARGS...] [OPTIONS]\n\nCommands:\n";
  size_t width = 0;
  for (const Command& c : *tool.commands) width = std::max(width, std::strlen(c.name));
  for (const Command& c : *tool.commands) {
    std::cout << "  " << c.name << std::string(width + 3 - std::strlen(c.name), ' ') << c.summary
              << "\n";
  }
  std::cout << "\n" << tool.help_footer;
}

}  // namespace

int run_tool(const Tool& tool, int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if ((args.empty() && tool.default_command == nullptr) ||
      (!args.empty() && (args[0] == "--help" || args[0] == "-h"))) {
    print_help(tool);
    return args.empty() ? kExitUsage : kExitOk;
  }
  if (!args.empty() && args[0] == "--version") {
    std::cout << tool.name << " " << BACKPLANE_VERSION_STRING << "\n";
    return kExitOk;
  }
  const Command* command = tool.default_command;
  if (!args.empty() && (args[0].rfind("-", 0) != 0 || command == nullptr)) {
    command = nullptr;
    for (const Command& c : *tool.commands) {
      if (args[0] == c.name) command = &c;
    }
    if (command == nullptr) {
      std::string names;
      for (const Command& c : *tool.commands) names += std::string(" ") + c.name;
      std::cerr << tool.name << ": unknown command '" << args[0] << "'; expected one of:" << names
                << "\n";
      return kExitUsage;
    }
    args.erase(args.begin());
  }
  const std::string prefix = std::string(tool.name) + " " + command->name + ": ";
  const std::string input_prefix =
      tool.errors_name_the_command ? prefix : std::string(tool.name) + ": ";
  try {
    return command->run(args);
  } catch (const boost::program_options::error& e) {
    std::cerr << prefix << e.what() << "\nTry '" << tool.name << " " << command->name
              << " --help'.\n";
    return kExitUsage;
  } catch (const InvalidArgument& e) {
    std::cerr << input_prefix << e.what() << "\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << input_prefix << e.what() << "\n";
    return kExitFailure;
  }
}

}  // namespace backplane::tools
