// Whose kernel packages may load without a lock: transformers' allow_all_kernels and the
// `kernels` library's trusted publishers, plus this project's own packages. A package locked in
// kernels.lock loads when its hash matches, trusted or not; an unlocked one only when
// TrustPolicy::decide says so.
//
// A package names its own repo id (metadata.json), so a name alone proves nothing. The project's
// org (`backplane`) is therefore never trusted by name: a package that claims it loads without a
// lock only when its files are exactly those of a package this build produced, as listed with
// their hashes in <lib>/backplane/trusted-packages.json beside libbackplane-hub (written by the
// build; whoever can change that file can change the library itself). Other orgs are trusted by
// name only when the user says so (BACKPLANE_TRUSTED_KERNELS), and the decision says that it
// rests on the package's own claim.
#pragma once

#include <backplane/export.hpp>
#include <backplane/hub/repo_id.hpp>

#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::hub {

// The kernel packages one build of backplane produced: per repo id and variant, the SHA-256
// ("sha256:<hex>") of every file, by path relative to the variant folder.
struct BACKPLANE_API TrustedPackages {
  using Files = std::map<std::string, std::string>;
  std::map<std::string, std::map<std::string, Files>> repos;  // "org/repo" -> variant -> files
  std::filesystem::path source;  // the file read; empty when none
  std::string error;             // why the file could not be read; then repos is empty

  // {"format": 1, "packages": {"backplane/rmsnorm": {"<variant>": {"<path>": "sha256:..."}}}}.
  // Throws InvalidArgument naming `source` and the field.
  static TrustedPackages parse(std::string_view text, const std::filesystem::path& source);
  // <folder of libbackplane-hub>/backplane/trusted-packages.json, read once per process; empty
  // when the file is missing (a build without in-tree packages).
  static std::shared_ptr<const TrustedPackages> of_this_build();
  static std::filesystem::path default_file();

  // "backplane/activation, backplane/rmsnorm" or "none".
  std::string names() const;
};

struct TrustDecision {
  bool trusted = false;
  // Why, in words for a person, to follow "kernel package org/repo@rev (variant) ": which rule
  // trusted it, or why not and what would be accepted.
  std::string reason;
};

struct BACKPLANE_API TrustPolicy {
  // Org names ("acme") and repo ids ("kernels-community/activation") trusted by name.
  std::vector<std::string> publishers;
  bool allow_all = false;  // every publisher (allow_all_kernels)
  // The packages this build produced; nullptr trusts none of them.
  std::shared_ptr<const TrustedPackages> own_packages = TrustedPackages::of_this_build();

  // Whether `repo` is trusted by name (publishers, allow_all). The project org never is.
  bool trusts(const RepoId& repo) const;
  // Whether the variant in `variant_folder` of `repo` may load without a lock, and why. Hashes
  // the folder's files only when the repo is one of own_packages'.
  TrustDecision decide(const RepoId& repo, const std::string& variant,
                       const std::filesystem::path& variant_folder) const;
  // Adds one entry: an org, a repo id, or "*" (allow_all). Throws InvalidArgument naming
  // `source` and the accepted forms; the project org and its repos are refused, since their
  // trust rests on hashes, not names.
  void add(std::string_view entry, std::string_view source);
  // The default plus BACKPLANE_TRUSTED_KERNELS: entries separated by ',' ("org1,org2/repo",
  // "*" for all). Read with secure_getenv; a malformed value throws naming the variable.
  static TrustPolicy from_environment();
  // "acme, org2/repo", "every publisher" or "no publisher" (by name).
  std::string str() const;
};

}  // namespace backplane::hub
