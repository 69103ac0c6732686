// kernel-hub verify kernels.lock [--json]
#include <backplane/error.hpp>

#include <nlohmann/json.hpp>

#include <iostream>

#include "command.hpp"

namespace po = boost::program_options;
using nlohmann::json;

namespace kernel_hub {

int run_verify(const std::vector<std::string>& args) {
  CommonOptions common;
  po::options_description description("Options");
  add_common_options(description, common);
  po::variables_map vm;
  if (!parse_command_or_help(
          args, description, "words",
          "kernel-hub verify LOCKFILE [--json]\n\n"
          "Hashes every locked variant in the store and compares it with the lock, naming each\n"
          "file that differs. Exit 1 when anything differs or is missing.",
          vm)) {
    return kExitOk;
  }
  const std::string file = single_word(vm, "LOCKFILE");
  const backplane::hub::LockFile lock = backplane::hub::LockFile::read(file);
  const backplane::hub::Store store = open_store(false);
  bool ok = true;
  json results = json::array();
  for (const auto& [id, locked] : lock.repos) {
    const auto repo = backplane::hub::RepoId::parse(id, file);
    for (const auto& [variant, locked_variant] : locked.variants) {
      json result = {{"repo", id}, {"revision", locked.revision}, {"variant", variant}};
      std::vector<std::string> problems;
      try {
        const backplane::hub::InstalledPackage p = store.locate(repo, locked.revision);
        const auto folder = p.folder / "build" / variant;
        if (std::find(p.variants.begin(), p.variants.end(), variant) == p.variants.end()) {
          problems.push_back(folder.string() + ": missing");
        } else {
          for (const std::string& d : backplane::hub::lock_differences(
                   locked_variant, backplane::hub::digest_variant(folder))) {
            problems.push_back(folder.string() + "/" + d);
          }
        }
      } catch (const backplane::Error& e) {
        problems.push_back(e.what());
      }
      ok = ok && problems.empty();
      result["ok"] = problems.empty();
      result["problems"] = problems;
      results.push_back(result);
      if (!common.json) {
        std::cout << (problems.empty() ? "ok       " : "MISMATCH ") << id << "@" << locked.revision
                  << " " << variant << "\n";
        for (const std::string& p : problems) std::cout << "  " << p << "\n";
      }
    }
  }
  if (common.json) {
    std::cout << json{{"lock", file}, {"ok", ok}, {"variants", results}}.dump(2) << "\n";
  }
  return ok ? kExitOk : kExitFailure;
}

}  // namespace kernel_hub
