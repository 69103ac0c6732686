#include <backplane/error.hpp>
#include <backplane/hub/lock.hpp>
#include <backplane/hub/variant.hpp>
#include <backplane/internal/checked_json.hpp>
#include <backplane/internal/files.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <array>
#include <memory>
#include <system_error>

#include "files.hpp"
#include "hashing.hpp"

namespace backplane::hub {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// One SHA-256 computation, written as the lock file records it ("sha256:<hex>").
class Sha256 {
 public:
  void update(const void* data, size_t size) { digester_.update(data, size); }
  void update(std::string_view text) { digester_.update(text); }
  std::string finish() { return "sha256:" + detail::hex(digester_.finish()); }

 private:
  detail::Digester digester_{"sha256"};
};

// Streams one file into both digests: the file's own (content only) and the variant's
// (path NUL size NUL content; `path` already holds the path and its NUL).
uint64_t hash_file(const fs::path& file, std::string path, Sha256& own, Sha256& variant) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  struct stat status {};
  if (fd < 0 || ::fstat(fd, &status) != 0) {
    const std::string reason = std::error_code(errno, std::generic_category()).message();
    if (fd >= 0) ::close(fd);
    throw InvalidArgument(file.string() + ": " + reason);
  }
  const auto size = static_cast<uint64_t>(status.st_size);
  path += std::to_string(size);
  path += '\0';
  variant.update(path);
  uint64_t read_bytes = 0;
  try {
    read_bytes = detail::stream_file(fd, file.string(), [&](const char* data, size_t n) {
      own.update(data, n);
      variant.update(data, n);
    });
  } catch (...) {
    ::close(fd);
    throw;
  }
  ::close(fd);
  if (read_bytes != size) {
    throw InvalidArgument(file.string() + ": changed while it was being hashed");
  }
  return size;
}

}  // namespace

VariantDigest digest_variant(const fs::path& variant_folder, const fs::path& link_root) {
  VariantDigest out;
  Sha256 variant;
  for (const std::string& relative : detail::package_files(variant_folder, link_root)) {
    Sha256 own;
    FileDigest file;
    file.path = relative;
    // package_files let a link through only into link_root: hash what it points at.
    const fs::path path =
        link_root.empty() ? variant_folder / relative : fs::canonical(variant_folder / relative);
    file.size = hash_file(path, relative + '\0', own, variant);
    file.sha256 = own.finish();
    out.files.push_back(std::move(file));
  }
  out.sha256 = variant.finish();
  return out;
}

const LockedRepo* LockFile::find(const RepoId& repo) const {
  auto it = repos.find(repo.str());
  return it == repos.end() ? nullptr : &it->second;
}

namespace {

// A file's path as digest_variant writes it: relative, '/'-separated, no '.', '..' or empty
// part.
bool is_package_path(const std::string& path) {
  if (path.empty() || path.find('\\') != std::string::npos) return false;
  size_t start = 0;
  while (start <= path.size()) {
    const size_t end = std::min(path.find('/', start), path.size());
    const std::string part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

}  // namespace

namespace {

// A git object id, as the `kernels` library's KernelLock takes it: 40 or 64 hex digits (either
// case; kept in lowercase, as huggingface_hub names snapshots).
std::optional<std::string> commit_id(const json& v) {
  if (!v.is_string()) return std::nullopt;
  std::string s = v.get<std::string>();
  if (s.size() != 40 && s.size() != 64) return std::nullopt;
  for (char& c : s) {
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return std::nullopt;
  }
  return s;
}

LockFile parse_kernels_lock(const json& root, const std::string& source) {
  LockFile lock;
  lock.format = LockFile::Format::kKernels;
  for (size_t i = 0; i < root.size(); ++i) {
    const std::string where = source + ": [" + std::to_string(i) + "]";
    const json& entry = root[i];
    auto fail = [&](const std::string& field, const std::string& what) {
      throw InvalidArgument(where + "." + field + ": " + what +
                            "; the kernels library's lock entries are {\"dependency\": "
                            "{\"repo-id\": ..., \"version\": N | \"revision\": ...}, \"lock\": "
                            "{\"commit\": ...}}");
    };
    if (!entry.is_object() || !entry.contains("dependency") || !entry["dependency"].is_object()) {
      fail("dependency", "must be an object");
    }
    const json& dependency = entry["dependency"];
    if (!dependency.contains("repo-id") || !dependency["repo-id"].is_string()) {
      fail("dependency.repo-id", "must be a string");
    }
    const std::string repo = dependency["repo-id"].get<std::string>();
    RepoId::parse(repo, where + ".dependency.repo-id");
    const bool has_version = dependency.contains("version"),
               has_revision = dependency.contains("revision");
    if (has_version == has_revision) {
      fail("dependency", "needs one of version and revision (they are mutually exclusive)");
    }
    LockedRepo locked;
    if (has_version) {
      if (!dependency["version"].is_number_unsigned()) {
        fail("dependency.version", "must be a non-negative integer");
      }
      locked.requested = "v" + std::to_string(dependency["version"].get<uint64_t>());
    } else {
      if (!dependency["revision"].is_string()) fail("dependency.revision", "must be a string");
      locked.requested = dependency["revision"].get<std::string>();
    }
    if (!entry.contains("lock") || !entry["lock"].is_object()) fail("lock", "must be an object");
    const std::optional<std::string> commit =
        entry["lock"].contains("commit") ? commit_id(entry["lock"]["commit"]) : std::nullopt;
    if (!commit) fail("lock.commit", "must be a git object id (40 or 64 hex digits)");
    locked.commit = *commit;
    locked.revision = *commit;
    if (auto it = lock.repos.find(repo); it != lock.repos.end()) {
      throw InvalidArgument(where + ": locks " + repo + " a second time (" + locked.requested +
                            " beside " + it->second.requested +
                            "); a process loads one revision of a repository");
    }
    lock.repos[repo] = std::move(locked);
  }
  return lock;
}

}  // namespace

std::string LockFile::dump_kernels() const {
  json out = json::array();
  for (const auto& [repo, locked] : repos) {
    if (locked.commit.empty()) {
      throw InvalidArgument(repo + "@" + locked.revision +
                            " has no commit, which the kernels library's lock format records; "
                            "lock a revision that is a commit (a Hugging Face cache snapshot, or "
                            "a package installed with --revision <commit>)");
    }
    json dependency = {{"repo-id", repo}};
    const std::string& asked = locked.requested.empty() ? locked.revision : locked.requested;
    if (asked.size() > 1 && asked[0] == 'v' &&
        asked.find_first_not_of("0123456789", 1) == std::string::npos && asked.size() < 12) {
      dependency["version"] = std::stoull(asked.substr(1));
    } else {
      dependency["revision"] = asked;
    }
    out.push_back({{"dependency", dependency}, {"lock", {{"commit", locked.commit}}}});
  }
  return out.dump(2) + "\n";
}

LockFile LockFile::parse(std::string_view text, const std::string& source) {
  auto fail = [&](const std::string& field, const std::string& what) {
    throw InvalidArgument(source + ": " + field + ": " + what);
  };
  auto is_hash = [](const json& v) {
    if (!v.is_string()) return false;
    const std::string s = v.get<std::string>();
    return s.size() == 71 && s.rfind("sha256:", 0) == 0 &&
           s.find_first_not_of("0123456789abcdef", 7) == std::string::npos;
  };
  const json root = parse_checked_json(text, source);
  if (root.is_array()) return parse_kernels_lock(root, source);
  if (!root.is_object()) fail("the top level", "must be an object");
  if (!root.contains("format") || root["format"] != kLockFormat) {
    fail("format", "must be " + std::to_string(kLockFormat));
  }
  if (!root.contains("kernels") || !root["kernels"].is_object()) {
    fail("kernels", "must be an object of \"org/repo\": {...}");
  }
  LockFile lock;
  for (const auto& [repo, entry] : root["kernels"].items()) {
    const std::string where = "kernels." + repo;
    RepoId::parse(repo, source + ": kernels");
    if (!entry.is_object()) fail(where, "must be an object");
    LockedRepo locked;
    if (!entry.contains("revision") || !entry["revision"].is_string()) {
      fail(where + ".revision", "must be a string");
    }
    locked.revision = entry["revision"].get<std::string>();
    check_revision(locked.revision, source + ": " + where + ".revision");
    if (!entry.contains("variants") || !entry["variants"].is_object()) {
      fail(where + ".variants", "must be an object of \"variant\": {...}");
    }
    for (const auto& [name, variant] : entry["variants"].items()) {
      const std::string vwhere = where + ".variants." + name;
      try {
        BuildVariant::parse(name);  // a folder name under build/, never a path out of it
      } catch (const InvalidArgument& e) {
        fail(vwhere, std::string("is not a build variant: ") + e.what());
      }
      if (!variant.is_object()) fail(vwhere, "must be an object");
      LockedVariant lv;
      if (!variant.contains("hash") || !is_hash(variant["hash"])) {
        fail(vwhere + ".hash", "must be \"sha256:\" and 64 lowercase hex digits");
      }
      lv.sha256 = variant["hash"].get<std::string>();
      if (!variant.contains("files") || !variant["files"].is_object()) {
        fail(vwhere + ".files", "must be an object of \"path\": \"sha256:...\"");
      }
      for (const auto& [path, hash] : variant["files"].items()) {
        if (!is_package_path(path)) {
          fail(vwhere + ".files." + path,
               "must be a relative path inside the variant ('/'-separated, no '.', '..' or "
               "empty parts)");
        }
        if (!is_hash(hash)) {
          fail(vwhere + ".files." + path, "must be \"sha256:\" and 64 lowercase hex digits");
        }
        lv.files[path] = hash.get<std::string>();
      }
      locked.variants[name] = std::move(lv);
    }
    lock.repos[repo] = std::move(locked);
  }
  return lock;
}

LockFile LockFile::read(const fs::path& file) {
  return parse(internal::read_bounded_file(file, 64u << 20, file.string()), file.string());
}

std::string LockFile::dump() const {
  json kernels = json::object();
  for (const auto& [repo, locked] : repos) {
    json variants = json::object();
    for (const auto& [name, variant] : locked.variants) {
      variants[name] = {{"hash", variant.sha256}, {"files", variant.files}};
    }
    kernels[repo] = {{"revision", locked.revision}, {"variants", variants}};
  }
  return json{{"format", kLockFormat}, {"kernels", kernels}}.dump(2) + "\n";
}

std::vector<std::string> file_differences(const std::map<std::string, std::string>& expected,
                                          const VariantDigest& found, std::string_view expected_as,
                                          std::string_view list) {
  const std::string as(expected_as);
  std::vector<std::string> out;
  std::map<std::string, std::string> present;
  for (const FileDigest& f : found.files) present[f.path] = f.sha256;
  for (const auto& [path, hash] : expected) {
    auto it = present.find(path);
    if (it == present.end()) {
      out.push_back(path + ": missing (" + as + " " + hash + ")");
    } else if (it->second != hash) {
      out.push_back(path + ": content differs (" + as + " " + hash + ", found " + it->second + ")");
    }
  }
  for (const auto& [path, hash] : present) {
    if (!expected.count(path)) {
      out.push_back(path + ": not in " + std::string(list) + " (found " + hash + ")");
    }
  }
  return out;
}

std::vector<std::string> lock_differences(const LockedVariant& locked, const VariantDigest& found) {
  std::vector<std::string> out = file_differences(locked.files, found);
  if (out.empty() && locked.sha256 != found.sha256) {
    out.push_back("the variant digest differs (locked " + locked.sha256 + ", found " +
                  found.sha256 + ") although every file matches");
  }
  return out;
}

LockedVariant to_locked(const VariantDigest& digest) {
  LockedVariant locked;
  locked.sha256 = digest.sha256;
  for (const FileDigest& f : digest.files) locked.files[f.path] = f.sha256;
  return locked;
}

}  // namespace backplane::hub
