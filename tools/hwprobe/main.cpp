// hwprobe: what backplane finds on this machine, and why.
//   hwprobe [report] [--json | --explain]   backends, devices, plugins
//   hwprobe COMMAND [ARGS...]               see `hwprobe --help`
// Exit codes: 0 success, 2 bad usage or bad input (message on stderr), 1 any other failure.
#include "command.hpp"
#include "dispatch.hpp"

int main(int argc, char** argv) {
  backplane::tools::Tool tool;
  tool.name = "hwprobe";
  tool.commands = &hwprobe::commands();
  tool.default_command = &hwprobe::commands().front();  // report
  tool.help_footer =
      "`hwprobe COMMAND --help` shows a command's options. Every command takes --json,\n"
      "--log LEVEL and --sim NAME|FILE. Exit codes: 0 success, 2 bad usage or input,\n"
      "1 any other failure.\n";
  tool.errors_name_the_command = false;
  return backplane::tools::run_tool(tool, argc, argv);
}
