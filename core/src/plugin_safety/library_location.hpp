// Where a manifest's library_path may point: anywhere when absolute (by design: a vendor's
// manifest may name its installed library), but in or below the manifest's folder when relative,
// so that a manifest dropped into a plugin folder cannot pull in a library from elsewhere
// through ".." or a symbolic link. Owned by the core; not part of the public API.
#pragma once

#include <filesystem>
#include <string>

namespace backplane::detail {

// Why the relative `library_path` leaves its manifest's folder by its words alone (".."); empty
// when it stays inside.
std::string relative_library_escape_reason(const std::filesystem::path& library_path);

// Why `library` (manifest_folder / a relative library_path), once symbolic links are resolved,
// is not in or below `manifest_folder`, resolved the same way; empty when it is, or when it does
// not exist (the loader then says it is not found).
std::string resolved_library_escape_reason(const std::filesystem::path& manifest_folder,
                                           const std::filesystem::path& library);

}  // namespace backplane::detail
