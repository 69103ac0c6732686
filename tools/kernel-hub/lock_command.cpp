// kernel-hub lock CONFIG [-o kernels.lock] [--format backplane|kernels]
// CONFIG (JSON): {"kernels": {"org/repo": "REVISION" | null, ...}}; null takes the revision
// the store would use (main, or the only one installed).
#include <backplane/error.hpp>
#include <backplane/internal/files.hpp>

#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>
#include <sstream>

#include "command.hpp"

namespace po = boost::program_options;
using nlohmann::json;

namespace kernel_hub {
namespace {

std::map<std::string, std::optional<std::string>> read_config(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw backplane::InvalidArgument(file + ": cannot be read");
  std::stringstream text;
  text << in.rdbuf();
  json root;
  try {
    root = json::parse(text.str());
  } catch (const json::parse_error& e) {
    throw backplane::InvalidArgument(file + ": not valid JSON: " + e.what());
  }
  const std::string form = "; expected {\"kernels\": {\"org/repo\": \"REVISION\" or null, ...}}";
  if (!root.is_object() || !root.contains("kernels") || !root["kernels"].is_object() ||
      root["kernels"].empty()) {
    throw backplane::InvalidArgument(file + ": kernels: missing or empty" + form);
  }
  std::map<std::string, std::optional<std::string>> repos;
  for (const auto& [repo, revision] : root["kernels"].items()) {
    backplane::hub::RepoId::parse(repo, file + ": kernels");
    if (revision.is_null()) {
      repos[repo] = std::nullopt;
    } else if (revision.is_string()) {
      backplane::hub::check_revision(revision.get<std::string>(), file + ": kernels." + repo);
      repos[repo] = revision.get<std::string>();
    } else {
      throw backplane::InvalidArgument(file + ": kernels." + repo +
                                       ": must be a revision string or null" + form);
    }
  }
  return repos;
}

}  // namespace

int run_lock(const std::vector<std::string>& args) {
  CommonOptions common;
  std::string output = "kernels.lock", format = "backplane";
  po::options_description description("Options");
  description.add_options()("output,o", po::value(&output)->value_name("FILE"),
                            "where to write the lock (default: kernels.lock)")(
      "format", po::value(&format)->value_name("backplane|kernels"),
      "backplane (default): every file's hash; kernels: the kernels library's format, a commit "
      "per repo (Hugging Face cache snapshots, or revisions that are commits)");
  add_common_options(description, common);
  po::variables_map vm;
  if (!parse_command_or_help(
          args, description, "words",
          "kernel-hub lock CONFIG [-o FILE] [--format backplane|kernels] [--json]\n\n"
          "CONFIG is JSON: {\"kernels\": {\"org/repo\": \"REVISION\" or null, ...}}. Every "
          "variant\n"
          "of each installed revision is hashed (local folders are not used: a lock records\n"
          "installed packages).",
          vm)) {
    return kExitOk;
  }
  const std::string config = single_word(vm, "CONFIG");
  if (format != "backplane" && format != "kernels") {
    throw backplane::InvalidArgument("--format: '" + format +
                                     "' is not a lock format; expected backplane or kernels");
  }
  const backplane::hub::Store store = open_store(false);
  backplane::hub::LockFile lock;
  for (const auto& [id, revision] : read_config(config)) {
    const auto repo = backplane::hub::RepoId::parse(id, config);
    lock.repos[id] = store.lock_entry(repo, revision);
  }
  const std::string text = format == "kernels" ? lock.dump_kernels() : lock.dump();
  // A reader (an install checking against it) sees the old lock or the new, never a part.
  backplane::internal::write_file_atomically(output, text);
  if (common.json) {
    json repos = json::object();
    for (const auto& [id, locked] : lock.repos) {
      json variants = json::object();
      for (const auto& [name, v] : locked.variants) variants[name] = v.sha256;
      repos[id] = {{"revision", locked.revision},
                   {"commit", locked.commit.empty() ? json(nullptr) : json(locked.commit)},
                   {"variants", variants}};
    }
    std::cout << json{{"output", output}, {"format", format}, {"kernels", repos}}.dump(2) << "\n";
  } else {
    for (const auto& [id, locked] : lock.repos) {
      std::cout << "locked " << id << "@" << locked.revision << " (" << locked.variants.size()
                << (locked.variants.size() == 1 ? " variant" : " variants") << ")\n";
    }
    std::cout << "wrote " << output << "\n";
  }
  return kExitOk;
}

}  // namespace kernel_hub
