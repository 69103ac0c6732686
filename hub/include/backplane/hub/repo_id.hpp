// Names in the kernel hub: repository ids ("org/repo") and revisions. Both become folder names
// in the store, so the rules are strict enough that neither can leave its folder.
#pragma once

#include <backplane/export.hpp>

#include <string>
#include <string_view>

namespace backplane::hub {

// The revision used when none is given (the Hub's default branch).
inline constexpr const char* kDefaultRevision = "main";
// The organization of this project's own kernel packages: trusted only for the packages this
// build produced, by their hashes (trust.hpp), never by name.
inline constexpr const char* kProjectOrg = "backplane";

struct BACKPLANE_API RepoId {
  std::string org;   // "kernels-community"
  std::string name;  // "activation"

  // "org/repo", each part 1-96 characters of A-Z a-z 0-9 '.' '_' '-', not starting or ending
  // with '.' or '-', without ".." or "--" (the Hub's rules). Throws InvalidArgument naming
  // `source` (where the text came from: "--repo", "kernels.lock", ...) and the accepted form.
  static RepoId parse(std::string_view text, std::string_view source);
  // One part (an org or a repo name) by the same rules.
  static bool is_valid_part(std::string_view part);
  std::string str() const { return org + "/" + name; }

  friend bool operator==(const RepoId& a, const RepoId& b) {
    return a.org == b.org && a.name == b.name;
  }
  friend bool operator!=(const RepoId& a, const RepoId& b) { return !(a == b); }
  friend bool operator<(const RepoId& a, const RepoId& b) { return a.str() < b.str(); }
};

// A revision (branch, tag or commit) as the store keeps it: 1-128 characters of A-Z a-z 0-9
// '.' '_' '-', not starting with '.'. A branch name with '/' ("refs/pr/1") is refused: it
// would be a folder path. Throws InvalidArgument naming `source`.
BACKPLANE_API void check_revision(std::string_view revision, std::string_view source);

}  // namespace backplane::hub
