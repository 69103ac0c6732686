#include <backplane/error.hpp>
#include <backplane/hub/repo_id.hpp>

#include <algorithm>

namespace backplane::hub {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '_' || c == '-';
}

}  // namespace

bool RepoId::is_valid_part(std::string_view part) {
  if (part.empty() || part.size() > 96) return false;
  if (!std::all_of(part.begin(), part.end(), is_name_char)) return false;
  if (part.front() == '.' || part.front() == '-' || part.back() == '.' || part.back() == '-') {
    return false;
  }
  return part.find("..") == std::string_view::npos && part.find("--") == std::string_view::npos;
}

RepoId RepoId::parse(std::string_view text, std::string_view source) {
  const size_t slash = text.find('/');
  if (slash != std::string_view::npos && text.find('/', slash + 1) == std::string_view::npos) {
    RepoId id{std::string(text.substr(0, slash)), std::string(text.substr(slash + 1))};
    if (is_valid_part(id.org) && is_valid_part(id.name)) return id;
  }
  throw InvalidArgument(std::string(source) + ": '" + std::string(text) +
                        "' is not a kernel repository id; expected org/repo, each part 1-96 "
                        "characters of A-Z a-z 0-9 . _ - (not starting or ending with . or -, "
                        "no .. or --), e.g. kernels-community/activation");
}

void check_revision(std::string_view revision, std::string_view source) {
  const bool ok = !revision.empty() && revision.size() <= 128 && revision.front() != '.' &&
                  std::all_of(revision.begin(), revision.end(), is_name_char);
  if (!ok) {
    throw InvalidArgument(std::string(source) + ": revision '" + std::string(revision) +
                          "' is not accepted; a revision is a branch, tag or commit of 1-128 "
                          "characters of A-Z a-z 0-9 . _ - not starting with '.' (no '/')");
  }
}

}  // namespace backplane::hub
