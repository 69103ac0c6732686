#include "command.hpp"

#include <backplane/error.hpp>

#include <iostream>

namespace po = boost::program_options;

namespace kernel_hub {

const std::vector<Command>& commands() {
  static const std::vector<Command> list = {
      {"install", "install a kernel package from a folder or an archive", &run_install},
      {"list", "the installed packages and local folders", &run_list},
      {"show", "one repository: revisions, variants, functions and layers", &run_show},
      {"resolve", "which build variant a device would load, and why", &run_resolve},
      {"lock", "write kernels.lock for the repositories a config names", &run_lock},
      {"verify", "check installed packages against kernels.lock, or a repository's digests",
       &run_verify},
      {"ops", "the operator schemas a kernel-builder Torch build registers (LibTorch bridge)",
       &run_ops},
      {"remove", "remove a repository (or one revision) from the store", &run_remove},
  };
  return list;
}

}  // namespace kernel_hub
