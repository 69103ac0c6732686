// kernel-hub-torch: the kernel-hub commands that need LibTorch (kernel-hub ops runs it).
//   kernel-hub-torch ops org/repo [--revision R] [--lock FILE] [--json]
// Resolves the variant for this LibTorch on cpu (backplane::torch::system_facts), checks it as
// Store::load does (lock or trust, the kernel-builder digest), opens it (TorchExtension) and
// lists the operator schemas it registered.
#include <backplane/error.hpp>
#include <backplane/torch/extension.hpp>

#include <nlohmann/json.hpp>

#include <iostream>

#include "command.hpp"
#include "dispatch.hpp"

namespace po = boost::program_options;
using nlohmann::json;

namespace kernel_hub {
namespace {

int run_torch_ops(const std::vector<std::string>& args) {
  CommonOptions common;
  std::string revision, lock_file;
  po::options_description description("Options");
  description.add_options()("revision", po::value(&revision)->value_name("R"),
                            "the revision (default: main, or the only one installed)")(
      "lock", po::value(&lock_file)->value_name("FILE"),
      "the kernels.lock to check it against (else its publisher must be trusted)");
  add_common_options(description, common);
  po::variables_map vm;
  if (!parse_command_or_help(
          args, description, "words",
          "kernel-hub ops org/repo [--revision R] [--lock FILE] [--json]\n\n"
          "Loads the kernel-builder Torch build of org/repo that this LibTorch would use on cpu\n"
          "(its lock or trust and its digest checked first) and lists the operator schemas it\n"
          "registered.",
          vm)) {
    return kExitOk;
  }
  const auto repo = backplane::hub::RepoId::parse(single_word(vm, "org/repo"), "ops");
  const backplane::hub::Store store = open_store();
  std::optional<backplane::hub::LockFile> lock;
  backplane::hub::LoadOptions options = trusted_load_options(lock_file, lock);
  if (!revision.empty()) options.revision = revision;
  const auto ext = backplane::torch::load_hub_extension(store, repo, options);
  const std::string variant = ext->folder().filename().string();
  // The revision loaded: the one asked, else the lock's, else the store's default.
  const backplane::hub::LockedRepo* locked = lock ? lock->find(repo) : nullptr;
  const std::string at = !revision.empty()   ? revision
                         : locked != nullptr ? locked->revision
                                             : store.locate(repo, std::nullopt).revision;
  if (common.json) {
    std::cout << json{{"repo", repo.str()},
                      {"revision", at},
                      {"variant", variant},
                      {"library", ext->library().string()},
                      {"namespace", ext->metadata().id},
                      {"ops", ext->schemas()}}
                     .dump(2)
              << "\n";
  } else {
    std::cout << repo.str() << "@" << at << " (" << variant << "): " << ext->schemas().size()
              << " ops in " << ext->metadata().id << "\n";
    for (const std::string& schema : ext->schemas()) std::cout << "  " << schema << "\n";
  }
  return kExitOk;
}

const std::vector<Command>& torch_commands() {
  static const std::vector<Command> list = {
      {"ops", "the operator schemas a kernel-builder Torch build registers", &run_torch_ops}};
  return list;
}

}  // namespace
}  // namespace kernel_hub

int main(int argc, char** argv) {
  backplane::tools::Tool tool;
  tool.name = "kernel-hub";
  tool.commands = &kernel_hub::torch_commands();
  tool.help_footer = "Run through `kernel-hub ops`; exit codes as kernel-hub's.\n";
  return backplane::tools::run_tool(tool, argc, argv);
}
