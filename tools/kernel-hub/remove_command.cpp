// kernel-hub remove org/repo [--revision R]
#include <backplane/error.hpp>

#include <nlohmann/json.hpp>

#include <iostream>

#include "command.hpp"

namespace po = boost::program_options;

namespace kernel_hub {

int run_remove(const std::vector<std::string>& args) {
  CommonOptions common;
  std::string revision;
  po::options_description description("Options");
  description.add_options()("revision", po::value(&revision)->value_name("R"),
                            "remove only this revision (default: every revision)");
  add_common_options(description, common);
  po::variables_map vm;
  if (!parse_command_or_help(args, description, "words",
                             "kernel-hub remove org/repo [--revision R] [--json]", vm)) {
    return kExitOk;
  }
  const auto repo = backplane::hub::RepoId::parse(single_word(vm, "org/repo"), "remove");
  std::optional<std::string> only;
  if (!revision.empty()) {
    backplane::hub::check_revision(revision, "--revision");
    only = revision;
  }
  const size_t removed = open_store(false).remove(repo, only);
  if (removed == 0) {
    throw backplane::NotFound(repo.str() + (only ? "@" + *only : std::string()) +
                              " is not installed in the store");
  }
  if (common.json) {
    std::cout << nlohmann::json{{"repo", repo.str()}, {"removed", removed}}.dump(2) << "\n";
  } else {
    std::cout << "removed " << removed << (removed == 1 ? " revision" : " revisions") << " of "
              << repo.str() << "\n";
  }
  return kExitOk;
}

}  // namespace kernel_hub
