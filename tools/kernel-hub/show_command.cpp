// kernel-hub show org/repo [--json]
#include <backplane/error.hpp>

#include <nlohmann/json.hpp>

#include <iostream>

#include "command.hpp"

namespace po = boost::program_options;
using nlohmann::json;

namespace kernel_hub {
namespace {

json function_json(const backplane::hub::PackageFunction& f) {
  json j = {{"name", f.name}, {"op", f.op}, {"device_type", f.device_type}, {"dtypes", f.dtypes}};
  j["min_compute_capability"] =
      f.min_compute_capability ? json(f.min_compute_capability->str()) : json(nullptr);
  j["max_head_dim"] = f.max_head_dim;
  return j;
}

// Whether the variant loads without a lock under BACKPLANE_TRUSTED_KERNELS, and why.
json trust_json(const backplane::hub::InstalledPackage& p, const std::string& variant,
                const backplane::hub::TrustPolicy& policy) {
  if (p.local) {
    return {{"without_lock", true},
            {"reason", "a local folder (BACKPLANE_LOCAL_KERNELS) is the user's own"}};
  }
  try {
    const backplane::hub::TrustDecision d =
        policy.decide(p.repo, variant, p.folder / "build" / variant);
    return {{"without_lock", d.trusted}, {"reason", d.reason}};
  } catch (const backplane::Error& e) {
    return {{"without_lock", false}, {"reason", std::string("cannot be checked: ") + e.what()}};
  }
}

// A kernel-builder build: its metadata, whether its files match its digest, its extension.
void kernel_builder_json(const backplane::hub::InstalledPackage& p, const std::string& variant,
                         json& j) {
  const auto folder = p.folder / "build" / variant;
  const auto m = backplane::hub::read_kernel_builder_metadata(folder);
  j["format"] = "kernel-builder";
  j["name"] = m.name;
  j["op_namespace"] = m.id;
  j["version"] = std::to_string(m.version);
  j["license"] = m.license;
  j["backend"] = m.backend;
  j["archs"] = m.archs;
  j["python_depends"] = m.python_depends;
  json depends = json::array();
  for (const auto& d : m.kernel_depends) depends.push_back(d.repo_id + "@" + d.version);
  j["kernel_depends"] = depends;
  std::error_code ec;
  j["signed"] = std::filesystem::is_regular_file(folder / "metadata.json.sigstore", ec);
  json digest = nullptr;
  if (m.digest) {
    const std::vector<std::string> problems = backplane::hub::kernel_builder_digest_problems(
        folder, *m.digest, p.link_root.empty() ? folder : p.link_root);
    digest = {{"algorithm", m.digest->algorithm},
              {"files", m.digest->files.size()},
              {"ok", problems.empty()},
              {"problems", problems}};
  }
  j["digest"] = digest;
  try {
    j["extension"] = backplane::hub::kernel_builder_extension(folder).filename().string();
  } catch (const backplane::Error&) {
    j["extension"] = nullptr;  // a Python-only build
  }
  j["error"] = nullptr;
}

json variant_json(const backplane::hub::InstalledPackage& p, const std::string& variant,
                  const backplane::hub::TrustPolicy& policy) {
  json j = {{"variant", variant}, {"trust", trust_json(p, variant, policy)}};
  if (backplane::hub::is_kernel_builder_variant(p.folder / "build" / variant)) {
    try {
      kernel_builder_json(p, variant, j);
    } catch (const backplane::Error& e) {
      j["format"] = "kernel-builder";
      j["error"] = e.what();
    }
    return j;
  }
  j["format"] = "backplane";
  try {
    const auto m = backplane::hub::read_metadata(p.folder / "build" / variant / "metadata.json");
    json functions = json::array(), layers = json::array();
    for (const auto& f : m.functions) functions.push_back(function_json(f));
    for (const auto& l : m.layers) {
      layers.push_back(
          {{"name", l.name}, {"function", l.function}, {"has_backward", l.has_backward}});
    }
    j["version"] = m.version;
    j["license"] = m.license;
    j["abi_version"] = m.abi_version();
    j["backend"] = m.backend;
    j["backend_version"] = m.backend_version ? json(m.backend_version->str()) : json(nullptr);
    j["archs"] = m.archs;
    j["library"] = m.library;
    j["functions"] = functions;
    j["layers"] = layers;
    j["error"] = nullptr;
  } catch (const backplane::Error& e) {
    j["error"] = e.what();
  }
  return j;
}

void print_variant(const json& v) {
  std::cout << "  " << v["variant"].get<std::string>() << "\n";
  const json& trust = v["trust"];
  std::cout << "    loads without a lock: "
            << (trust["without_lock"].get<bool>() ? "yes, " : "no, it ")
            << trust["reason"].get<std::string>() << "\n";
  if (!v["error"].is_null()) {
    std::cout << "    error: " << v["error"].get<std::string>() << "\n";
    return;
  }
  if (v["format"] == "kernel-builder") {
    std::string archs;
    for (const auto& a : v["archs"]) archs += " " + a.get<std::string>();
    std::cout << "    kernel-builder build of " << v["name"].get<std::string>() << ", version "
              << v["version"].get<std::string>() << ", license " << v["license"].get<std::string>()
              << ", backend " << v["backend"].get<std::string>() << ", archs"
              << (archs.empty() ? " (any)" : archs) << "\n";
    std::cout << "    ops in namespace " << v["op_namespace"].get<std::string>() << ", extension "
              << (v["extension"].is_null() ? "none (Python only)"
                                           : v["extension"].get<std::string>())
              << (v["signed"].get<bool>() ? ", signed (metadata.json.sigstore)" : ", unsigned")
              << "\n";
    const json& digest = v["digest"];
    if (digest.is_null()) {
      std::cout << "    digest: none (its files cannot be checked)\n";
    } else {
      std::cout << "    digest: " << digest["algorithm"].get<std::string>() << " over "
                << digest["files"].get<size_t>() << " files, "
                << (digest["ok"].get<bool>() ? "every file matches" : "MISMATCH") << "\n";
      for (const auto& problem : digest["problems"]) {
        std::cout << "      - " << problem.get<std::string>() << "\n";
      }
    }
    return;
  }
  std::string archs;
  for (const auto& a : v["archs"]) archs += " " + a.get<std::string>();
  std::cout << "    version " << v["version"].get<std::string>() << ", license "
            << v["license"].get<std::string>() << ", ABI " << v["abi_version"].get<std::string>()
            << ", backend " << v["backend"].get<std::string>()
            << (v["backend_version"].is_null() ? "" : " " + v["backend_version"].get<std::string>())
            << ", archs" << (archs.empty() ? " (any)" : archs) << "\n";
  for (const auto& f : v["functions"]) {
    std::string dtypes;
    for (const auto& d : f["dtypes"]) dtypes += " " + d.get<std::string>();
    std::cout << "    function " << f["name"].get<std::string>() << ": "
              << f["op"].get<std::string>() << " on " << f["device_type"].get<std::string>()
              << (dtypes.empty() ? "" : ";" + dtypes)
              << (f["min_compute_capability"].is_null()
                      ? ""
                      : "; compute capability >= " + f["min_compute_capability"].get<std::string>())
              << "\n";
  }
  for (const auto& l : v["layers"]) {
    std::cout << "    layer " << l["name"].get<std::string>() << " -> "
              << l["function"].get<std::string>()
              << (l["has_backward"].get<bool>() ? " (with backward)" : "") << "\n";
  }
}

}  // namespace

int run_show(const std::vector<std::string>& args) {
  CommonOptions common;
  po::options_description description("Options");
  add_common_options(description, common);
  po::variables_map vm;
  if (!parse_command_or_help(args, description, "words", "kernel-hub show org/repo [--json]", vm)) {
    return kExitOk;
  }
  const auto repo = backplane::hub::RepoId::parse(single_word(vm, "org/repo"), "show");
  const backplane::hub::Store store = open_store();
  const auto found = store.find(repo);
  if (found.empty()) store.locate(repo, std::nullopt);  // throws NotFound, naming where it looked
  const backplane::hub::TrustPolicy policy = backplane::hub::TrustPolicy::from_environment();
  json revisions = json::array();
  for (const auto& p : found) {
    json variants = json::array();
    for (const std::string& v : p.variants) variants.push_back(variant_json(p, v, policy));
    revisions.push_back({{"revision", p.revision},
                         {"folder", p.folder.string()},
                         {"local", p.local},
                         {"hf_cache", p.hf_cache},
                         {"commit", p.commit.empty() ? json(nullptr) : json(p.commit)},
                         {"variants", variants}});
  }
  if (common.json) {
    std::cout << json{{"repo", repo.str()}, {"revisions", revisions}}.dump(2) << "\n";
    return kExitOk;
  }
  for (const auto& r : revisions) {
    std::cout << repo.str() << "@" << r["revision"].get<std::string>() << " ("
              << r["folder"].get<std::string>() << (r["local"].get<bool>() ? ", local" : "")
              << (r["hf_cache"].get<bool>() ? ", Hugging Face cache" : "") << ")\n";
    for (const auto& v : r["variants"]) print_variant(v);
  }
  return kExitOk;
}

}  // namespace kernel_hub
