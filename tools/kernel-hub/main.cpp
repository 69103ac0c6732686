// kernel-hub: the local kernel store on the command line.
//   kernel-hub COMMAND [ARGS...]   see `kernel-hub --help`
// Exit codes: 0 success, 2 bad usage or bad input (message on stderr), 1 any other failure.
#include "command.hpp"
#include "dispatch.hpp"

int main(int argc, char** argv) {
  backplane::tools::Tool tool;
  tool.name = "kernel-hub";
  tool.commands = &kernel_hub::commands();
  tool.help_footer =
      "`kernel-hub COMMAND --help` shows a command's options; commands that print data\n"
      "take --json. The store is BACKPLANE_HUB_CACHE (default ~/.cache/backplane/hub);\n"
      "BACKPLANE_LOCAL_KERNELS=org/repo=/path:... serves repositories from folders.\n"
      "Exit codes: 0 success, 2 bad usage or input, 1 any other failure.\n";
  return backplane::tools::run_tool(tool, argc, argv);
}
