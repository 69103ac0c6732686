// kernel-hub list [--json]
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iostream>

#include "command.hpp"

namespace po = boost::program_options;

namespace kernel_hub {

int run_list(const std::vector<std::string>& args) {
  CommonOptions common;
  po::options_description description("Options");
  add_common_options(description, common);
  po::variables_map vm;
  if (!parse_command_or_help(args, description, "", "kernel-hub list [--json]", vm)) {
    return kExitOk;
  }
  const backplane::hub::Store store = open_store();
  const std::vector<backplane::hub::InstalledPackage> packages = store.list();
  if (common.json) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& p : packages) {
      out.push_back(
          {{"repo", p.repo.str()},
           {"revision", p.revision},
           {"folder", p.folder.string()},
           {"variants", p.variants},
           {"local", p.local},
           {"hf_cache", p.hf_cache},
           {"commit", p.commit.empty() ? nlohmann::json(nullptr) : nlohmann::json(p.commit)}});
    }
    nlohmann::json caches = nlohmann::json::array();
    for (size_t i = 1; i < store.hf_caches().size(); ++i)
      caches.push_back(store.hf_caches()[i].string());
    std::cout << nlohmann::json{{"store", store.root().string()},
                                {"hf_caches", caches},
                                {"packages", out}}
                     .dump(2)
              << "\n";
    return kExitOk;
  }
  std::cout << "Store " << store.root().string() << "\n";
  for (size_t i = 1; i < store.hf_caches().size(); ++i) {
    std::cout << "Hugging Face cache " << store.hf_caches()[i].string() << "\n";
  }
  if (packages.empty()) {
    std::cout << "  (no packages)\n";
    return kExitOk;
  }
  size_t repo_width = 4, revision_width = 8;
  for (const auto& p : packages) {
    repo_width = std::max(repo_width, p.repo.str().size());
    revision_width = std::max(revision_width, p.revision.size());
  }
  auto pad = [](const std::string& s, size_t width) {
    return s + std::string(width - s.size() + 2, ' ');
  };
  std::cout << "  " << pad("REPO", repo_width) << pad("REVISION", revision_width) << "VARIANTS\n";
  for (const auto& p : packages) {
    std::string variants;
    for (const std::string& v : p.variants) variants += (variants.empty() ? "" : " ") + v;
    if (p.local) variants += (variants.empty() ? "" : " ") + ("(local: " + p.folder.string() + ")");
    if (p.hf_cache) {
      variants += (variants.empty() ? "" : " ") + ("(hf-cache: " + p.commit.substr(0, 12) + ")");
    }
    std::cout << "  " << pad(p.repo.str(), repo_width) << pad(p.revision, revision_width)
              << variants << "\n";
  }
  return kExitOk;
}

}  // namespace kernel_hub
