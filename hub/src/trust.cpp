#include <backplane/error.hpp>
#include <backplane/hub/lock.hpp>
#include <backplane/hub/trust.hpp>
#include <backplane/internal/checked_json.hpp>
#include <backplane/internal/dynamic_library.hpp>
#include <backplane/internal/files.hpp>

#include <stdlib.h>

#include <algorithm>
#include <system_error>

#include "files.hpp"

namespace backplane::hub {
namespace fs = std::filesystem;

namespace {

bool is_project_org(std::string_view org) {
  return org == kProjectOrg;
}

bool is_hash(const nlohmann::json& v) {
  if (!v.is_string()) return false;
  const std::string s = v.get<std::string>();
  return s.size() == 71 && s.rfind("sha256:", 0) == 0 &&
         s.find_first_not_of("0123456789abcdef", 7) == std::string::npos;
}

}  // namespace

TrustedPackages TrustedPackages::parse(std::string_view text, const fs::path& source) {
  const std::string name = source.string();
  auto fail = [&](const std::string& field, const std::string& what) {
    throw InvalidArgument(name + ": " + field + ": " + what);
  };
  const nlohmann::json root = parse_checked_json(text, name);
  if (!root.is_object()) fail("the top level", "must be an object");
  if (!root.contains("format") || root["format"] != 1) fail("format", "must be 1");
  if (!root.contains("packages") || !root["packages"].is_object()) {
    fail("packages", "must be an object of \"org/repo\": {variant: {path: hash}}");
  }
  TrustedPackages out;
  out.source = source;
  for (const auto& [repo, variants] : root["packages"].items()) {
    RepoId::parse(repo, name + ": packages");
    if (!variants.is_object()) fail("packages." + repo, "must be an object of variants");
    for (const auto& [variant, files] : variants.items()) {
      const std::string where = "packages." + repo + "." + variant;
      if (!files.is_object() || files.empty()) fail(where, "must be an object of path: hash");
      for (const auto& [path, hash] : files.items()) {
        if (!is_hash(hash)) fail(where + "." + path, "must be \"sha256:\" and 64 hex digits");
        out.repos[repo][variant][path] = hash.get<std::string>();
      }
    }
  }
  return out;
}

fs::path TrustedPackages::default_file() {
  // The folder of the library this function is compiled into: libbackplane-hub.so.
  const fs::path holder =
      internal::library_holding(reinterpret_cast<const void*>(&TrustedPackages::default_file));
  if (holder.empty()) return {};
  std::error_code ec;
  fs::path library = fs::weakly_canonical(holder, ec);
  if (ec) library = holder;
  return library.parent_path() / "backplane" / "trusted-packages.json";
}

std::shared_ptr<const TrustedPackages> TrustedPackages::of_this_build() {
  // Read once: the file belongs to the installed library and does not change under it. A file
  // that cannot be read leaves the list empty with the reason, so nothing is trusted by it.
  static const std::shared_ptr<const TrustedPackages> packages = [] {
    auto out = std::make_shared<TrustedPackages>();
    const fs::path file = default_file();
    std::error_code ec;
    if (file.empty() || !fs::exists(file, ec)) return out;
    try {
      *out = parse(internal::read_bounded_file(file, 16u << 20, file.string()), file);
    } catch (const Error& e) {
      out->repos.clear();
      out->source = file;
      out->error = e.what();
    }
    return out;
  }();
  return packages;
}

std::string TrustedPackages::names() const {
  std::string out;
  for (const auto& [repo, variants] : repos) out += (out.empty() ? "" : ", ") + repo;
  return out.empty() ? "none" : out;
}

bool TrustPolicy::trusts(const RepoId& repo) const {
  if (allow_all) return true;
  if (is_project_org(repo.org)) return false;
  const std::string id = repo.str();
  return std::any_of(publishers.begin(), publishers.end(),
                     [&](const std::string& p) { return p == repo.org || p == id; });
}

TrustDecision TrustPolicy::decide(const RepoId& repo, const std::string& variant,
                                  const fs::path& variant_folder) const {
  const std::string id = repo.str();
  std::string own_mismatch;  // why a repo this build produced does not match it
  if (own_packages != nullptr) {
    const auto it = own_packages->repos.find(id);
    if (it != own_packages->repos.end()) {
      const auto files = it->second.find(variant);
      if (files == it->second.end()) {
        own_mismatch = "this build produced no " + variant + " variant of it";
      } else {
        const std::vector<std::string> differences = file_differences(
            files->second, digest_variant(variant_folder), "built", "what this build produced");
        if (differences.empty()) {
          return {true, "its files are exactly those of " + id + " (" + variant +
                            ") as this build produced it (" + own_packages->source.string() + ")"};
        }
        own_mismatch =
            "its files differ from the one this build produced: " + differences.front() +
            (differences.size() > 1 ? " (and " + std::to_string(differences.size() - 1) + " more)"
                                    : std::string());
      }
    }
  }
  if (allow_all) return {true, "every publisher is trusted (BACKPLANE_TRUSTED_KERNELS=*)"};
  if (is_project_org(repo.org)) {
    std::string built = own_packages == nullptr ? "none" : own_packages->names();
    if (own_packages != nullptr && !own_packages->error.empty()) {
      built = "none: " + own_packages->error;
    }
    return {false, "claims the publisher '" + std::string(kProjectOrg) +
                       "', which is trusted only for the packages this build produced, by their "
                       "files' hashes (" +
                       built + ")" + (own_mismatch.empty() ? "" : "; " + own_mismatch) +
                       "; a package that names itself " + std::string(kProjectOrg) +
                       "/... loads otherwise only when locked (kernel-hub lock) or when every "
                       "publisher is allowed (BACKPLANE_TRUSTED_KERNELS=*)"};
  }
  if (trusts(repo)) {
    return {true, "its publisher is trusted by name (" + str() +
                      "); the name is the one its metadata.json gives"};
  }
  return {false, "is not locked and its publisher is not trusted (trusted by name: " + str() +
                     "); lock it (kernel-hub lock), trust it " +
                     "(BACKPLANE_TRUSTED_KERNELS=" + repo.org + " or " + id +
                     "), or allow every publisher (BACKPLANE_TRUSTED_KERNELS=*)"};
}

void TrustPolicy::add(std::string_view entry, std::string_view source) {
  while (!entry.empty() && entry.front() == ' ') entry.remove_prefix(1);
  while (!entry.empty() && entry.back() == ' ') entry.remove_suffix(1);
  if (entry == "*") {
    allow_all = true;
    return;
  }
  const bool valid = entry.find('/') == std::string_view::npos
                         ? RepoId::is_valid_part(entry)
                         : (RepoId::parse(entry, source), true);
  if (!valid) {
    throw InvalidArgument(std::string(source) + ": '" + std::string(entry) +
                          "' is not a publisher; expected an org name (acme), a repo id "
                          "(kernels-community/activation) or * for every publisher");
  }
  if (is_project_org(entry.substr(0, entry.find('/')))) {
    throw InvalidArgument(
        std::string(source) + ": '" + std::string(entry) +
        "' cannot be trusted by name: " + kProjectOrg +
        " packages are trusted by their hashes, as this build produced them; lock another "
        "package that names itself so (kernel-hub lock), or allow every publisher with *");
  }
  if (std::find(publishers.begin(), publishers.end(), entry) == publishers.end()) {
    publishers.emplace_back(entry);
  }
}

TrustPolicy TrustPolicy::from_environment() {
  TrustPolicy policy;
  const char* value = ::secure_getenv("BACKPLANE_TRUSTED_KERNELS");
  if (value == nullptr) return policy;
  const std::string_view text(value);
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view item = text.substr(start, end - start);
    if (item.find_first_not_of(' ') != std::string_view::npos) {
      policy.add(item, "BACKPLANE_TRUSTED_KERNELS");
    }
    start = end + 1;
  }
  return policy;
}

std::string TrustPolicy::str() const {
  if (allow_all) return "every publisher";
  std::string out;
  for (const std::string& p : publishers) out += (out.empty() ? "" : ", ") + p;
  return out.empty() ? "no publisher" : out;
}

}  // namespace backplane::hub
