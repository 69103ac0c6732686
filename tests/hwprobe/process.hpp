// Runs a program as a child process and captures what it says, for command-line tests.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace testing_support {

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal
  std::string out;
  std::string err;
};

// Runs argv[0] with argv; `env` entries replace or add variables (an empty value unsets the
// variable when `unset_empty` is true).
ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::map<std::string, std::string>& env = {},
                          bool unset_empty = true);

}  // namespace testing_support
