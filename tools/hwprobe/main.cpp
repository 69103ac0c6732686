// hwprobe: what backplane finds on this machine, and why.
//   hwprobe [report] [--json | --explain]   backends, devices, plugins
//   hwprobe COMMAND [ARGS...]               see `hwprobe --help`
// Exit codes: 0 success, 2 bad usage or bad input (message on stderr), 1 any other failure.
#include <backplane/backplane.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "command.hpp"

namespace {

void print_help() {
  std::cout << "Usage: hwprobe [COMMAND] [ARGS...] [OPTIONS]\n\nCommands:\n";
  for (const hwprobe::Command& c : hwprobe::commands()) {
    std::cout << "  " << c.name << std::string(12 - std::string(c.name).size(), ' ') << c.summary
              << "\n";
  }
  std::cout << "\n`hwprobe COMMAND --help` shows a command's options. Every command takes --json,\n"
               "--log LEVEL and --sim NAME|FILE. Exit codes: 0 success, 2 bad usage or input,\n"
               "1 any other failure.\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    print_help();
    return hwprobe::kExitOk;
  }
  if (!args.empty() && args[0] == "--version") {
    std::cout << "hwprobe " << BACKPLANE_VERSION_STRING << "\n";
    return hwprobe::kExitOk;
  }
  const hwprobe::Command* command = &hwprobe::commands().front();  // report
  if (!args.empty() && args[0].rfind("-", 0) != 0) {
    command = nullptr;
    for (const hwprobe::Command& c : hwprobe::commands()) {
      if (args[0] == c.name) command = &c;
    }
    if (command == nullptr) {
      std::string names;
      for (const hwprobe::Command& c : hwprobe::commands()) names += std::string(" ") + c.name;
      std::cerr << "hwprobe: unknown command '" << args[0] << "'; expected one of:" << names
                << "\n";
      return hwprobe::kExitUsage;
    }
    args.erase(args.begin());
  }
  try {
    return command->run(args);
  } catch (const boost::program_options::error& e) {
    std::cerr << "hwprobe " << command->name << ": " << e.what() << "\nTry 'hwprobe "
              << command->name << " --help'.\n";
    return hwprobe::kExitUsage;
  } catch (const backplane::InvalidArgument& e) {
    std::cerr << "hwprobe: " << e.what() << "\n";
    return hwprobe::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "hwprobe: " << e.what() << "\n";
    return hwprobe::kExitFailure;
  }
}
