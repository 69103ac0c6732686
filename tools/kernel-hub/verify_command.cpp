// kernel-hub verify LOCKFILE | org/repo [--revision R] [--json]
#include <backplane/error.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <iostream>

#include "command.hpp"

namespace po = boost::program_options;
using nlohmann::json;

namespace kernel_hub {

namespace {

// A kernel-builder variant against its own digest; the problems, or why it cannot be checked.
std::vector<std::string> digest_problems(const backplane::hub::InstalledPackage& p,
                                         const std::string& variant) {
  const auto folder = p.folder / "build" / variant;
  try {
    const auto m = backplane::hub::read_kernel_builder_metadata(folder);
    if (!m.digest) return {folder.string() + ": metadata.json has no digest"};
    std::vector<std::string> out;
    for (const std::string& v : backplane::hub::kernel_builder_digest_problems(
             folder, *m.digest, p.link_root.empty() ? folder : p.link_root)) {
      out.push_back(folder.string() + ": " + v);
    }
    return out;
  } catch (const backplane::Error& e) {
    return {e.what()};
  }
}

struct Check {
  std::string repo, revision, variant;
  std::vector<std::string> problems;
  bool unchecked = false;  // nothing to check it against
};

// Every variant of a repo's revisions (or of the one asked) against what it carries: a
// kernel-builder build's digest; this project's builds carry none.
std::vector<Check> check_repo(const backplane::hub::Store& store,
                              const backplane::hub::RepoId& repo,
                              const std::optional<std::string>& revision) {
  std::vector<Check> out;
  std::vector<backplane::hub::InstalledPackage> packages;
  if (revision) {
    packages.push_back(store.locate(repo, revision));
  } else {
    packages = store.find(repo);
    if (packages.empty()) store.locate(repo, std::nullopt);  // NotFound, naming where it looked
  }
  for (const auto& p : packages) {
    for (const std::string& variant : p.variants) {
      Check c{repo.str(), p.revision, variant, {}, false};
      if (backplane::hub::is_kernel_builder_variant(p.folder / "build" / variant)) {
        c.problems = digest_problems(p, variant);
      } else {
        c.unchecked = true;
      }
      out.push_back(std::move(c));
    }
  }
  return out;
}

std::vector<Check> check_lock(const backplane::hub::Store& store,
                              const backplane::hub::LockFile& lock, const std::string& file) {
  std::vector<Check> out;
  for (const auto& [id, locked] : lock.repos) {
    const auto repo = backplane::hub::RepoId::parse(id, file);
    if (locked.variants.empty()) {  // the kernels library's format: a commit
      try {
        const backplane::hub::InstalledPackage p = store.locate(repo, locked.revision);
        for (const std::string& variant : p.variants) {
          Check c{id, locked.revision, variant, {}, false};
          if (backplane::hub::is_kernel_builder_variant(p.folder / "build" / variant)) {
            c.problems = digest_problems(p, variant);
          } else {
            c.problems.push_back(variant +
                                 ": a backplane build, whose files a commit lock does "
                                 "not record (kernel-hub lock writes one that does)");
          }
          out.push_back(std::move(c));
        }
      } catch (const backplane::Error& e) {
        out.push_back({id, locked.revision, "", {e.what()}, false});
      }
      continue;
    }
    for (const auto& [variant, locked_variant] : locked.variants) {
      Check c{id, locked.revision, variant, {}, false};
      try {
        const backplane::hub::InstalledPackage p = store.locate(repo, locked.revision);
        const auto folder = p.folder / "build" / variant;
        if (std::find(p.variants.begin(), p.variants.end(), variant) == p.variants.end()) {
          c.problems.push_back(folder.string() + ": missing");
        } else {
          for (const std::string& d : backplane::hub::lock_differences(
                   locked_variant, backplane::hub::digest_variant(folder, p.link_root))) {
            c.problems.push_back(folder.string() + "/" + d);
          }
        }
      } catch (const backplane::Error& e) {
        c.problems.push_back(e.what());
      }
      out.push_back(std::move(c));
    }
  }
  return out;
}

}  // namespace

int run_verify(const std::vector<std::string>& args) {
  CommonOptions common;
  std::string revision;
  po::options_description description("Options");
  description.add_options()("revision", po::value(&revision)->value_name("R"),
                            "with org/repo: only this revision");
  add_common_options(description, common);
  po::variables_map vm;
  if (!parse_command_or_help(
          args, description, "words",
          "kernel-hub verify LOCKFILE | org/repo [--revision R] [--json]\n\n"
          "LOCKFILE (this project's format, or the kernels library's): hashes every locked\n"
          "variant and compares it with the lock, naming each file that differs; a commit lock\n"
          "checks each kernel-builder build against its own digest. org/repo: checks each\n"
          "kernel-builder build against its metadata.json digest (this project's builds carry\n"
          "none: unchecked). Exit 1 when anything differs or is missing.",
          vm)) {
    return kExitOk;
  }
  const std::string word = single_word(vm, "LOCKFILE or org/repo");
  std::error_code ec;
  const bool is_file = std::filesystem::exists(word, ec);
  std::vector<Check> checks;
  std::string subject;
  if (!is_file && word.find('/') != std::string::npos && word.front() != '/' &&
      word.rfind("./", 0) != 0) {
    const auto repo = backplane::hub::RepoId::parse(word, "verify");
    checks = check_repo(open_store(), repo,
                        revision.empty() ? std::nullopt : std::optional<std::string>(revision));
    subject = "repo";
  } else {
    if (!revision.empty())
      throw backplane::InvalidArgument("--revision is used only with org/repo");
    checks = check_lock(open_store(false), backplane::hub::LockFile::read(word), word);
    subject = "lock";
  }
  bool ok = true;
  json results = json::array();
  for (const Check& c : checks) {
    ok = ok && c.problems.empty();
    results.push_back({{"repo", c.repo},
                       {"revision", c.revision},
                       {"variant", c.variant},
                       {"ok", c.problems.empty()},
                       {"checked", !c.unchecked},
                       {"problems", c.problems}});
    if (!common.json) {
      std::cout << (!c.problems.empty() ? "MISMATCH  "
                    : c.unchecked       ? "unchecked "
                                        : "ok        ")
                << c.repo << "@" << c.revision << " " << c.variant
                << (c.unchecked ? " (a backplane build: verify it against a lock)" : "") << "\n";
      for (const std::string& p : c.problems) std::cout << "  " << p << "\n";
    }
  }
  if (common.json) {
    std::cout << json{{subject, word}, {"ok", ok}, {"variants", results}}.dump(2) << "\n";
  }
  return ok ? kExitOk : kExitFailure;
}

}  // namespace kernel_hub
