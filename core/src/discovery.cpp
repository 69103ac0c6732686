#include "discovery.hpp"

#include <backplane/internal/dynamic_library.hpp>

#include <algorithm>
#include <set>
#include <system_error>

namespace backplane {

std::filesystem::path default_plugin_directory() {
  std::error_code ec;
  // The folder of the library this function is compiled into: libbackplane.so.
  std::filesystem::path library =
      internal::library_holding(reinterpret_cast<const void*>(&default_plugin_directory));
  if (library.empty()) return {};
  // The loader reports the path it opened, e.g. ".../bin/../lib/libbackplane.so" via RPATH.
  if (std::filesystem::path canonical = std::filesystem::weakly_canonical(library, ec); !ec) {
    library = canonical;
  }
  return library.parent_path() / "backplane" / "plugins";
}

namespace detail {

std::vector<std::filesystem::path> plugin_search_path(const RuntimeOptions& options) {
  if (options.plugin_path) return *options.plugin_path;
  std::vector<std::filesystem::path> path = options.add_plugin_path;
  if (std::filesystem::path fallback = default_plugin_directory(); !fallback.empty()) {
    path.push_back(fallback);
  }
  return path;
}

std::vector<std::filesystem::path> find_manifests(const std::vector<std::filesystem::path>& path,
                                                  const Logger& logger) {
  std::vector<std::filesystem::path> manifests;
  std::set<std::filesystem::path> seen;
  auto add = [&](const std::filesystem::path& file) {
    std::error_code ec;
    std::filesystem::path key = std::filesystem::weakly_canonical(file, ec);
    if (ec) key = file;
    if (seen.insert(key).second) manifests.push_back(file);
  };
  for (const std::filesystem::path& entry : path) {
    std::error_code ec;
    const auto status = std::filesystem::status(entry, ec);
    if (std::filesystem::is_regular_file(status)) {
      add(entry);
      continue;
    }
    if (!std::filesystem::is_directory(status)) {
      // A folder the user named that is not there is most likely a typo: say so where it is
      // seen by default.
      const bool missing = !std::filesystem::exists(status);
      logger.log(missing ? LogLevel::kWarn : LogLevel::kInfo,
                 "plugin search path entry " + entry.string() +
                     (missing ? " does not exist; skipped (check BACKPLANE_PLUGIN_PATH, "
                                "BACKPLANE_ADD_PLUGIN_PATH or RuntimeOptions::plugin_path)"
                              : " is not a folder or a file; skipped"));
      continue;
    }
    std::vector<std::filesystem::path> files;
    for (std::filesystem::directory_iterator it(entry, ec), end; !ec && it != end;
         it.increment(ec)) {
      std::error_code file_ec;
      if (it->path().extension() == ".json" && it->is_regular_file(file_ec)) {
        files.push_back(it->path());
      }
    }
    if (ec) {
      logger.log(LogLevel::kWarn,
                 "cannot list plugin folder " + entry.string() + ": " + ec.message());
    }
    std::sort(files.begin(), files.end());
    for (const std::filesystem::path& file : files) add(file);
  }
  return manifests;
}

}  // namespace detail
}  // namespace backplane
