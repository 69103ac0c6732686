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

std::vector<std::string> package_files(const fs::path& root, const fs::path& link_root) {
  std::vector<std::string> files;
  std::error_code ec;
  fs::path links_inside;
  if (!link_root.empty()) {
    links_inside = fs::canonical(link_root, ec);
    if (ec) throw InvalidArgument(link_root.string() + ": " + ec.message());
  }
  fs::recursive_directory_iterator it(root, fs::directory_options::none, ec), end;
  if (ec) throw InvalidArgument(root.string() + ": " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) throw InvalidArgument(root.string() + ": " + ec.message());
    fs::file_status status = it->symlink_status(ec);
    const std::string relative = it->path().lexically_relative(root).generic_string();
    if (fs::is_symlink(status)) {
      if (links_inside.empty()) {
        throw InvalidArgument(it->path().string() +
                              ": a kernel package holds only regular files and folders; this is "
                              "a symbolic link");
      }
      // A Hugging Face cache: snapshot files are links into the repository's blobs/.
      const fs::path target = fs::canonical(it->path(), ec);
      const fs::path inside = ec ? fs::path() : target.lexically_relative(links_inside);
      if (ec || inside.empty() || *inside.begin() == "..") {
        throw InvalidArgument(it->path().string() + ": a link out of " + links_inside.string() +
                              (ec ? "" : " (to " + target.string() + ")"));
      }
      status = fs::status(target, ec);
      if (!fs::is_regular_file(status)) {
        throw InvalidArgument(it->path().string() + ": a link to something other than a file");
      }
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

namespace {

std::string errno_text() {
  return std::error_code(errno, std::generic_category()).message();
}

// Writes all of `size` bytes; false with errno set when it cannot.
bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// One file copied. std::filesystem::copy_file reports a full disk as "Input/output error" (its
// sendfile path); this says what the system said.
void copy_file_checked(const fs::path& from, const fs::path& to) {
  const auto fail = [&](const std::string& why) {
    throw Error("cannot copy " + from.string() + " into the store: " + why);
  };
  const int in = ::open(from.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (in < 0) fail(errno_text());
  struct stat st {};
  if (::fstat(in, &st) != 0) {
    const std::string why = errno_text();
    ::close(in);
    fail(why);
  }
  const int out =
      ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, st.st_mode & 0777);
  if (out < 0) {
    const std::string why = errno_text();
    ::close(in);
    fail(why);
  }
  std::vector<char> buffer(1 << 16);
  std::string why;
  while (why.empty()) {
    const ssize_t n = ::read(in, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) why = errno_text();
    if (n <= 0) break;
    if (!write_all(out, buffer.data(), static_cast<size_t>(n))) why = errno_text();
  }
  if (::close(out) != 0 && why.empty()) why = errno_text();
  ::close(in);
  if (!why.empty()) fail(why);
}

void sync_path(const fs::path& path, int flags) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | flags);
  if (fd < 0 || ::fsync(fd) != 0) {
    const std::string why = errno_text();
    if (fd >= 0) ::close(fd);
    throw Error("cannot flush " + path.string() + " to disk: " + why);
  }
  ::close(fd);
}

}  // namespace

void copy_package_tree(const fs::path& from, const fs::path& to) {
  for (const std::string& relative : package_files(from)) {
    const fs::path target = to / relative;
    std::error_code ec;
    fs::create_directories(target.parent_path(), ec);
    if (ec) {
      throw Error("cannot copy " + (from / relative).string() + " into the store: " + ec.message());
    }
    copy_file_checked(from / relative, target);
  }
}

void sync_folder(const fs::path& folder) {
  sync_path(folder, O_DIRECTORY);
}

void sync_tree(const fs::path& root) {
  std::error_code ec;
  std::vector<fs::path> folders{root};
  for (fs::recursive_directory_iterator it(root, fs::directory_options::none, ec), end;
       !ec && it != end; it.increment(ec)) {
    const fs::file_status status = it->symlink_status(ec);
    if (fs::is_directory(status)) {
      folders.push_back(it->path());
    } else if (fs::is_regular_file(status)) {
      sync_path(it->path(), 0);
    }
  }
  if (ec) throw Error("cannot flush " + root.string() + " to disk: " + ec.message());
  for (const fs::path& folder : folders) sync_folder(folder);
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

// An existing lock file, opened and exclusively flocked, or -1 when another process holds it
// (or it cannot be opened).
int try_lock(const fs::path& file) {
  const int fd = ::open(file.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW);
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
    throw Error("cannot create a folder in " + parent.string() + ": " + errno_text());
  }
  path_ = pattern;
  // The lock file is locked before it has its name: a sweeper that can lock a lock file knows
  // its owner is gone. (Locked after it was named, a sweep in between took live installs.)
  std::string unnamed = (parent / ".lock-XXXXXX").string();
  lock_fd_ = ::mkostemp(unnamed.data(), O_CLOEXEC);
  std::string why;
  if (lock_fd_ < 0) {
    why = errno_text();
  } else if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0 ||
             ::rename(unnamed.c_str(), lock_file_of(path_).c_str()) != 0) {
    why = errno_text();
    ::unlink(unnamed.c_str());
    ::close(lock_fd_);
  }
  if (!why.empty()) {
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
    const int fd = try_lock(lock);
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
  // Lock files of installs that died before naming them: unlocked and past the grace.
  for (fs::directory_iterator it(parent, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename();
    if (name.rfind(".lock-", 0) != 0 || !it->is_regular_file(ec)) continue;
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) != 0 ||
        ::time(nullptr) - st.st_mtime < unlocked_grace_seconds) {
      continue;
    }
    const int fd = try_lock(it->path());
    if (fd < 0) continue;
    std::error_code ignored;
    fs::remove(it->path(), ignored);
    ::close(fd);
  }
  return removed;
}

void check_store_root(const fs::path& root) {
  std::error_code ec;
  const fs::file_status status = fs::status(root, ec);
  const std::string what = "the kernel store " + root.string();
  const std::string which =
      " (BACKPLANE_HUB_CACHE, else the XDG or home cache, names the folder packages are "
      "installed in)";
  if (ec && ec != std::errc::no_such_file_or_directory) {
    throw InvalidArgument(what + ": " + ec.message() + which);
  }
  if (fs::exists(status) && !fs::is_directory(status)) {
    throw InvalidArgument(what + " is not a folder" + which);
  }
}

StoreLock::StoreLock(const fs::path& root, Mode mode) {
  const fs::path file = root / ".lock";
  if (mode == Mode::kExclusive) {
    std::error_code ec;
    fs::create_directories(root, ec);
    if (ec) throw Error("cannot create the kernel store " + root.string() + ": " + ec.message());
    fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw Error("cannot lock the kernel store: " + file.string() + ": " + errno_text());
  } else {
    fd_ = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd_ < 0 && errno == ENOENT) {
      fd_ = ::open(file.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    }
    if (fd_ < 0) return;  // a store nobody wrote with this version, and not ours to write
  }
  while (::flock(fd_, mode == Mode::kExclusive ? LOCK_EX : LOCK_SH) != 0) {
    if (errno == EINTR) continue;
    const std::string why = errno_text();
    ::close(fd_);
    throw Error("cannot lock the kernel store: " + file.string() + ": " + why);
  }
}

StoreLock::~StoreLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace backplane::hub::detail
