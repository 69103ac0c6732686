// kernel-hub: the local kernel store on the command line.
//   kernel-hub COMMAND [ARGS...]   see `kernel-hub --help`
// Exit codes: 0 success, 2 bad usage or bad input (message on stderr), 1 any other failure.
#include <backplane/backplane.hpp>

#include <iostream>
#include <string>
#include <vector>

#include "command.hpp"

namespace {

void print_help() {
  std::cout << "Usage: kernel-hub COMMAND [ARGS...] [OPTIONS]\n\nCommands:\n";
  for (const kernel_hub::Command& c : kernel_hub::commands()) {
    std::cout << "  " << c.name << std::string(10 - std::string(c.name).size(), ' ') << c.summary
              << "\n";
  }
  std::cout << "\n`kernel-hub COMMAND --help` shows a command's options; commands that print data\n"
               "take --json. The store is BACKPLANE_HUB_CACHE (default ~/.cache/backplane/hub);\n"
               "BACKPLANE_LOCAL_KERNELS=org/repo=/path:... serves repositories from folders.\n"
               "Exit codes: 0 success, 2 bad usage or input, 1 any other failure.\n";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h") {
    print_help();
    return args.empty() ? kernel_hub::kExitUsage : kernel_hub::kExitOk;
  }
  if (args[0] == "--version") {
    std::cout << "kernel-hub " << BACKPLANE_VERSION_STRING << "\n";
    return kernel_hub::kExitOk;
  }
  const kernel_hub::Command* command = nullptr;
  for (const kernel_hub::Command& c : kernel_hub::commands()) {
    if (args[0] == c.name) command = &c;
  }
  if (command == nullptr) {
    std::string names;
    for (const kernel_hub::Command& c : kernel_hub::commands()) names += std::string(" ") + c.name;
    std::cerr << "kernel-hub: unknown command '" << args[0] << "'; expected one of:" << names
              << "\n";
    return kernel_hub::kExitUsage;
  }
  args.erase(args.begin());
  try {
    return command->run(args);
  } catch (const boost::program_options::error& e) {
    std::cerr << "kernel-hub " << command->name << ": " << e.what() << "\nTry 'kernel-hub "
              << command->name << " --help'.\n";
    return kernel_hub::kExitUsage;
  } catch (const backplane::InvalidArgument& e) {
    std::cerr << "kernel-hub " << command->name << ": " << e.what() << "\n";
    return kernel_hub::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "kernel-hub " << command->name << ": " << e.what() << "\n";
    return kernel_hub::kExitFailure;
  }
}
