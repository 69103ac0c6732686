#include "files.hpp"

#include <backplane/error.hpp>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <sstream>
#include <system_error>

namespace backplane::hub::detail {
namespace fs = std::filesystem;

bool is_small_number(std::string_view text) {
  return !text.empty() && text.size() <= 9 &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::vector<std::string> package_files(const fs::path& root) {
  std::vector<std::string> files;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, fs::directory_options::none, ec), end;
  if (ec) throw InvalidArgument(root.string() + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) throw InvalidArgument(root.string() + ": " + ec.message());
    const fs::file_status status = it->symlink_status(ec);
    const std::string relative = it->path().lexically_relative(root).generic_string();
    if (fs::is_symlink(status)) {
      throw InvalidArgument(it->path().string() +
                            ": a kernel package holds only regular files and folders; this is a "
                            "symbolic link");
    }
    if (fs::is_directory(status)) continue;
    if (!fs::is_regular_file(status)) {
      throw InvalidArgument(it->path().string() +
                            ": a kernel package holds only regular files and folders; this is a "
                            "special file");
    }
    files.push_back(relative);
  }
  if (ec) throw InvalidArgument(root.string() + ": " + ec.message());
  std::sort(files.begin(), files.end());
  return files;
}

void copy_package_tree(const fs::path& from, const fs::path& to) {
  for (const std::string& relative : package_files(from)) {
    const fs::path target = to / relative;
    std::error_code ec;
    fs::create_directories(target.parent_path(), ec);
    if (!ec) fs::copy_file(from / relative, target, fs::copy_options::none, ec);
    if (ec) {
      throw Error("cannot copy " + (from / relative).string() + " into the store: " + ec.message());
    }
  }
}

std::vector<std::string> subfolders(const fs::path& folder) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_symlink(ec) && it->is_directory(ec)) names.push_back(it->path().filename());
  }
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

fs::path lock_file_of(const fs::path& folder) {
  return fs::path(folder.string() + ".lock");
}

// An open, exclusively flocked lock file, or -1 when another process holds it (or it cannot be
// opened).
int try_lock(const fs::path& file, bool create) {
  const int fd =
      ::open(file.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0), 0600);
  if (fd < 0) return -1;
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

StagingFolder::StagingFolder(const fs::path& parent, const std::string& prefix) {
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) throw Error("cannot create " + parent.string() + ": " + ec.message());
  std::string pattern = (parent / (prefix + "XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw Error("cannot create a folder in " + parent.string() + ": " +
                std::error_code(errno, std::generic_category()).message());
  }
  path_ = pattern;
  lock_fd_ = try_lock(lock_file_of(path_), true);
  if (lock_fd_ < 0) {
    const std::string why = std::error_code(errno, std::generic_category()).message();
    fs::remove(path_, ec);
    throw Error("cannot lock " + lock_file_of(path_).string() + ": " + why);
  }
}

StagingFolder::~StagingFolder() {
  std::error_code ec;
  fs::remove_all(path_, ec);
  fs::remove(lock_file_of(path_), ec);  // before the unlock: a sweeper never sees it unheld
  ::close(lock_fd_);
}

size_t sweep_stale_staging(const fs::path& parent, int64_t unlocked_grace_seconds) {
  size_t removed = 0;
  std::error_code ec;
  for (const std::string& name : subfolders(parent)) {
    const fs::path folder = parent / name;
    const fs::path lock = lock_file_of(folder);
    const int fd = try_lock(lock, false);
    if (fd >= 0) {  // its owner is gone
      fs::remove_all(folder, ec);
      if (!ec) ++removed;
      fs::remove(lock, ec);
      ::close(fd);
      continue;
    }
    if (fs::symlink_status(lock, ec).type() != fs::file_type::not_found) continue;  // held
    struct stat st {};
    if (::lstat(folder.c_str(), &st) != 0) continue;
    if (::time(nullptr) - st.st_mtime < unlocked_grace_seconds) continue;  // being set up
    fs::remove_all(folder, ec);
    if (!ec) ++removed;
  }
  return removed;
}

}  // namespace backplane::hub::detail
