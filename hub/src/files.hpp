// File helpers for the hub: reading bounded files, walking a package tree, staging folders.
// Internal to libbackplane-hub.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::hub::detail {

// 1-9 decimal digits.
bool is_small_number(std::string_view text);

// The whole file, refused (InvalidArgument naming the file) when missing or above `max_bytes`.
std::string read_small_file(const std::filesystem::path& file, uint64_t max_bytes);

// Writes `text` to `file` through a temporary file in the same folder and a rename, so a
// reader sees the old content or the new, never a part.
void write_file_atomically(const std::filesystem::path& file, std::string_view text);

// Regular files under `root`, as sorted relative paths with '/' separators. A package holds
// only regular files and folders: a symbolic link or a special file throws InvalidArgument
// naming it.
std::vector<std::string> package_files(const std::filesystem::path& root);

// Copies the regular files and folders under `from` into `to` (which must exist), by the rules
// of package_files.
void copy_package_tree(const std::filesystem::path& from, const std::filesystem::path& to);

// Names of the folders directly in `folder` (not links), sorted; empty when it is missing.
std::vector<std::string> subfolders(const std::filesystem::path& folder);

// A new folder `parent`/`prefix`XXXXXX (mkdtemp); `parent` is created when missing.
std::filesystem::path make_temp_folder(const std::filesystem::path& parent,
                                       const std::string& prefix);

// Removes a folder tree on destruction unless released.
class FolderGuard {
 public:
  explicit FolderGuard(std::filesystem::path path) : path_(std::move(path)) {}
  ~FolderGuard();
  FolderGuard(const FolderGuard&) = delete;
  FolderGuard& operator=(const FolderGuard&) = delete;
  void release() { path_.clear(); }

 private:
  std::filesystem::path path_;
};

}  // namespace backplane::hub::detail
