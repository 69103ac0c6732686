// File helpers for the hub: walking a package tree, staging folders (bounded reads and atomic
// writes are backplane/internal/files.hpp).
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

// Regular files under `root`, as sorted relative paths with '/' separators. A package holds
// only regular files and folders: a symbolic link or a special file throws InvalidArgument
// naming it; with `link_root` (a Hugging Face cache's repository folder), links to files inside
// it count as those files, and a link out of it throws.
std::vector<std::string> package_files(const std::filesystem::path& root,
                                       const std::filesystem::path& link_root = {});

// Copies the regular files and folders under `from` into `to` (which must exist), by the rules
// of package_files.
void copy_package_tree(const std::filesystem::path& from, const std::filesystem::path& to);

// Flushes every file and folder under `root`, and `root` itself, to disk (fsync): what a rename
// then makes visible survives a power loss whole.
void sync_tree(const std::filesystem::path& root);
// Flushes one folder's entries (after a rename into it).
void sync_folder(const std::filesystem::path& folder);

// Names of the folders directly in `folder` (not links), sorted; empty when it is missing.
std::vector<std::string> subfolders(const std::filesystem::path& folder);

// A new folder `parent`/`prefix`XXXXXX (mkdtemp) for one install or removal, removed with
// everything in it on destruction. While it lives, this process holds an flock on
// `<folder>.lock` beside it, so that sweep_stale_staging can tell the folder of a live install
// from the leftover of a process that died mid-way. `parent` is created when missing.
class StagingFolder {
 public:
  StagingFolder(const std::filesystem::path& parent, const std::string& prefix);
  ~StagingFolder();
  StagingFolder(const StagingFolder&) = delete;
  StagingFolder& operator=(const StagingFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int lock_fd_ = -1;
};

// Removes from `parent` the staging folders no live process holds: those whose lock file can
// be locked, and those without one older than `unlocked_grace_seconds` (a folder is made a
// moment before its lock, and a lock file is locked before it is given its name, so a lock file
// that can be locked has lost its owner). Best effort: what cannot be removed stays. Returns how
// many folders went.
size_t sweep_stale_staging(const std::filesystem::path& parent,
                           int64_t unlocked_grace_seconds = 600);

// Throws InvalidArgument when `root` cannot be a kernel store: it is something other than a
// folder, or its path cannot be used (too long, a file on the way). A missing one is fine.
void check_store_root(const std::filesystem::path& root);

// The store's own lock, `<root>/.lock` (flock). Writers hold it exclusively for the moment they
// change what is installed (the rename into place, the rename out of sight, pruning empty
// folders); readers share it while they hash and load, so that what they verified is what they
// load and a lock records one tree. Blocks until granted. A reader of a store nobody has written
// with this version (no .lock, and no right to create one) reads without it.
class StoreLock {
 public:
  enum class Mode { kShared, kExclusive };
  StoreLock(const std::filesystem::path& root, Mode mode);
  ~StoreLock();
  StoreLock(const StoreLock&) = delete;
  StoreLock& operator=(const StoreLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace backplane::hub::detail
