#include <backplane/error.hpp>
#include <backplane/hub/trust.hpp>

#include <stdlib.h>

#include <algorithm>

namespace backplane::hub {

bool TrustPolicy::trusts(const RepoId& repo) const {
  if (allow_all) return true;
  const std::string id = repo.str();
  return std::any_of(publishers.begin(), publishers.end(),
                     [&](const std::string& p) { return p == repo.org || p == id; });
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
                          "' is not a publisher; expected an org name (backplane), a repo id "
                          "(kernels-community/activation) or * for every publisher");
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
