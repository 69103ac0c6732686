// The main() of every command-line tool: --help, --version, choosing the command by its first
// word, and turning what the command throws into a message on stderr and an exit code (2 for
// bad usage or input, 1 for any other failure).
#pragma once

#include <string>
#include <vector>

#include "command_line.hpp"

namespace backplane::tools {

struct Tool {
  const char* name;  // "hwprobe"
  const std::vector<Command>* commands;
  // Run when the first word is an option or there is none (hwprobe's report); nullptr: the tool
  // needs a command, and without one prints its help and exits 2.
  const Command* default_command = nullptr;
  const char* help_footer;  // after the command list in --help
  // Whether an input error names the command ("kernel-hub install: ...") or only the tool.
  bool errors_name_the_command = true;
};

int run_tool(const Tool& tool, int argc, char** argv);

}  // namespace backplane::tools
