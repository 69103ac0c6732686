// kernel-hub install PATH_OR_ARCHIVE [--revision R] [--replace]
#include <nlohmann/json.hpp>

#include <iostream>

#include "command.hpp"

namespace po = boost::program_options;

namespace kernel_hub {

int run_install(const std::vector<std::string>& args) {
  CommonOptions common;
  std::string revision;
  bool replace = false;
  std::string repo;
  po::options_description description("Options");
  description.add_options()("revision", po::value(&revision)->value_name("R"),
                            "the revision to install it as (default: main)")(
      "repo", po::value(&repo)->value_name("org/name"),
      "the repository to install it as: needed for a kernel-builder package, whose metadata "
      "names the kernel only")("replace", po::bool_switch(&replace),
                               "replace that revision when it is installed");
  add_common_options(description, common);
  po::variables_map vm;
  if (!parse_command_or_help(
          args, description, "words",
          "kernel-hub install PATH_OR_ARCHIVE [--repo org/name] [--revision R] [--replace] "
          "[--json]\n\n"
          "A folder or an archive (tar, tar.gz, zip, ...) holding build/<variant>/ folders, each\n"
          "with metadata.json and its library: this project's packages, or kernel-builder ones\n"
          "(the Kernel Hub's; give --repo, their digest is checked). Every variant is checked\n"
          "before anything is installed; an archive entry that would land outside the package\n"
          "is refused.",
          vm)) {
    return kExitOk;
  }
  const std::string source = single_word(vm, "PATH_OR_ARCHIVE");
  backplane::hub::InstallOptions options;
  if (!revision.empty()) options.revision = revision;
  options.replace = replace;
  if (!repo.empty()) options.repo = backplane::hub::RepoId::parse(repo, "--repo");
  const backplane::hub::InstalledPackage p = open_store().install(source, options);
  if (common.json) {
    std::cout << nlohmann::json{{"repo", p.repo.str()},
                                {"revision", p.revision},
                                {"folder", p.folder.string()},
                                {"variants", p.variants}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << "installed " << p.repo.str() << "@" << p.revision << " into " << p.folder.string()
              << "\n";
    for (const std::string& v : p.variants) std::cout << "  " << v << "\n";
  }
  return kExitOk;
}

}  // namespace kernel_hub
