#include "command.hpp"

#include <backplane/error.hpp>

#include <iostream>

namespace po = boost::program_options;

namespace kernel_hub {

void add_common_options(po::options_description& description, CommonOptions& common) {
  description.add_options()("json", po::bool_switch(&common.json), "print JSON instead of text")(
      // Not bound: parse_command_or_help reads it from the parsed words.
      "help,h", po::bool_switch(), "show this help");
}

backplane::hub::Store open_store(bool with_local_kernels) {
  return backplane::hub::Store(backplane::hub::default_store_root(),
                               with_local_kernels ? backplane::hub::LocalKernels::from_environment()
                                                  : backplane::hub::LocalKernels{});
}

std::string single_word(const po::variables_map& vm, const char* what) {
  const std::vector<std::string> words = positional_words(vm, "words");
  if (words.size() != 1) {
    throw backplane::InvalidArgument("expected one " + std::string(what) + ", got " +
                                     std::to_string(words.size()) + " words");
  }
  return words.front();
}

const std::vector<Command>& commands() {
  static const std::vector<Command> list = {
      {"install", "install a kernel package from a folder or an archive", &run_install},
      {"list", "the installed packages and local folders", &run_list},
      {"show", "one repository: revisions, variants, functions and layers", &run_show},
      {"resolve", "which build variant a device would load, and why", &run_resolve},
      {"lock", "write kernels.lock for the repositories a config names", &run_lock},
      {"verify", "check installed packages against kernels.lock", &run_verify},
      {"remove", "remove a repository (or one revision) from the store", &run_remove},
  };
  return list;
}

}  // namespace kernel_hub
