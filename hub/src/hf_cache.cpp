#include "hf_cache.hpp"

#include <backplane/internal/files.hpp>

#include <algorithm>
#include <set>
#include <system_error>

#include "files.hpp"

namespace backplane::hub::detail {
namespace fs = std::filesystem;

namespace {

constexpr const char* kPrefixes[] = {"kernels--", "models--"};

// A commit as huggingface_hub names snapshots: 40 (sha-1) or 64 (sha-256) hex digits.
bool is_commit(const std::string& s) {
  return (s.size() == 40 || s.size() == 64) && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

std::string read_ref(const fs::path& file) {
  try {
    std::string text = internal::read_bounded_file(file, 256, file.string());
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ')) {
      text.pop_back();
    }
    return text;
  } catch (const std::exception&) {
    return {};
  }
}

// refs/ may hold nested names (refs/pr/1): every regular file under it, by relative name.
void collect_refs(const fs::path& folder, const std::string& prefix,
                  std::vector<std::pair<std::string, std::string>>& out) {
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = prefix + it->path().filename().string();
    if (it->is_directory(ec)) {
      collect_refs(it->path(), name + "/", out);
    } else if (it->is_regular_file(ec)) {
      out.emplace_back(name, read_ref(it->path()));
    }
  }
}

}  // namespace

std::vector<RepoId> hf_cache_repos(const fs::path& cache) {
  std::set<std::string> seen;
  std::vector<RepoId> out;
  for (const std::string& folder : subfolders(cache)) {
    for (const char* prefix : kPrefixes) {
      if (folder.rfind(prefix, 0) != 0) continue;
      const std::string rest = folder.substr(std::string(prefix).size());
      const size_t separator = rest.find("--");
      if (separator == std::string::npos) continue;
      const std::string org = rest.substr(0, separator), name = rest.substr(separator + 2);
      if (!RepoId::is_valid_part(org) || !RepoId::is_valid_part(name)) continue;
      const RepoId repo{org, name};
      if (seen.insert(repo.str()).second) out.push_back(repo);
    }
  }
  std::sort(out.begin(), out.end(),
            [](const RepoId& a, const RepoId& b) { return a.str() < b.str(); });
  return out;
}

std::vector<HfCachedRevision> hf_cache_revisions(const fs::path& cache, const RepoId& repo) {
  std::vector<HfCachedRevision> out;
  std::set<std::string> revisions;
  for (const char* prefix : kPrefixes) {
    const fs::path repo_folder = cache / (std::string(prefix) + repo.org + "--" + repo.name);
    std::error_code ec;
    if (!fs::is_directory(repo_folder, ec)) continue;
    const fs::path snapshots = repo_folder / "snapshots";
    std::vector<std::pair<std::string, std::string>> refs;
    collect_refs(repo_folder / "refs", "", refs);
    std::sort(refs.begin(), refs.end());
    std::set<std::string> named;
    for (const auto& [ref, commit] : refs) {
      if (!is_commit(commit) || !fs::is_directory(snapshots / commit, ec)) continue;
      named.insert(commit);
      if (revisions.insert(ref).second) {
        out.push_back({ref, commit, snapshots / commit, repo_folder});
      }
    }
    for (const std::string& commit : subfolders(snapshots)) {
      if (!is_commit(commit) || named.count(commit) != 0) continue;
      if (revisions.insert(commit).second) {
        out.push_back({commit, commit, snapshots / commit, repo_folder});
      }
    }
  }
  return out;
}

}  // namespace backplane::hub::detail
