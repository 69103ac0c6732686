#include "library_location.hpp"

#include <algorithm>
#include <system_error>

namespace backplane::detail {
namespace {

bool is_within(const std::filesystem::path& inner, const std::filesystem::path& folder) {
  const auto [folder_end, inner_at] =
      std::mismatch(folder.begin(), folder.end(), inner.begin(), inner.end());
  return folder_end == folder.end() && inner_at != inner.end();
}

}  // namespace

std::string relative_library_escape_reason(const std::filesystem::path& library_path) {
  const std::filesystem::path normal = library_path.lexically_normal();
  if (normal.empty() || normal == "." || *normal.begin() == "..") {
    return "library_path \"" + library_path.string() +
           "\" leaves the manifest's folder; a relative library_path must name a file in or "
           "below it (or be an absolute path)";
  }
  return {};
}

std::string resolved_library_escape_reason(const std::filesystem::path& manifest_folder,
                                           const std::filesystem::path& library) {
  std::error_code ec;
  if (!std::filesystem::exists(library, ec)) return {};
  const std::filesystem::path folder = std::filesystem::canonical(manifest_folder, ec);
  if (ec) return "cannot resolve the manifest's folder " + manifest_folder.string();
  const std::filesystem::path target = std::filesystem::canonical(library, ec);
  if (ec) return "cannot resolve the library " + library.string() + ": " + ec.message();
  if (!is_within(target, folder)) {
    return "library " + library.string() + " resolves to " + target.string() +
           " through a symbolic link, outside the manifest's folder " + folder.string() +
           "; a relative library_path must stay in or below it (or be an absolute path)";
  }
  return {};
}

}  // namespace backplane::detail
