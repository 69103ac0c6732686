// Where manifests are looked for, and which ones are found, in order.
#pragma once

#include <backplane/runtime/runtime.hpp>

#include <filesystem>
#include <vector>

#include "plugin_host/logger.hpp"

namespace backplane::detail {

// options.plugin_path when given; else options.add_plugin_path, then the default folder.
std::vector<std::filesystem::path> plugin_search_path(const RuntimeOptions& options);

// Manifest files (*.json) in search order: each folder's in file-name order, a file entry as
// itself. Missing entries are logged and skipped; a manifest reached twice is listed once.
std::vector<std::filesystem::path> find_manifests(const std::vector<std::filesystem::path>& path,
                                                  const Logger& logger);

}  // namespace backplane::detail
