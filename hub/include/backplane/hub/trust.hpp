// Whose kernel packages may load without a lock: transformers' allow_all_kernels and the
// `kernels` library's trusted publishers. A package locked in kernels.lock loads when its hash
// matches, trusted or not; an unlocked one only when its publisher is trusted.
#pragma once

#include <backplane/export.hpp>
#include <backplane/hub/repo_id.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace backplane::hub {

struct BACKPLANE_API TrustPolicy {
  // Org names ("backplane") and repo ids ("kernels-community/activation").
  std::vector<std::string> publishers{kProjectOrg};
  bool allow_all = false;  // every publisher (allow_all_kernels)

  bool trusts(const RepoId& repo) const;
  // Adds one entry: an org, a repo id, or "*" (allow_all). Throws InvalidArgument naming
  // `source` and the accepted forms.
  void add(std::string_view entry, std::string_view source);
  // The default plus BACKPLANE_TRUSTED_KERNELS: entries separated by ',' ("org1,org2/repo",
  // "*" for all). Read with secure_getenv; a malformed value throws naming the variable.
  static TrustPolicy from_environment();
  // "org1, org2/repo" or "every publisher".
  std::string str() const;
};

}  // namespace backplane::hub
