#include "permissions.hpp"

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <system_error>
#include <vector>

namespace backplane::detail {
namespace {

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// getpwuid_r/getgrgid_r with a buffer that grows: thread-safe, unlike getpwuid.
template <class Entry, class Lookup>
bool lookup(Lookup lookup_fn, Entry& entry, std::vector<char>& buffer) {
  buffer.resize(1024);
  for (;;) {
    Entry* found = nullptr;
    const int error = lookup_fn(&entry, buffer.data(), buffer.size(), &found);
    if (error == ERANGE && buffer.size() < (1u << 20)) {
      buffer.resize(buffer.size() * 2);
      continue;
    }
    return error == 0 && found != nullptr;
  }
}

bool group_is_owners_alone(uid_t owner, gid_t group) {
  passwd user{};
  std::vector<char> user_buffer;
  if (!lookup(
          [&](passwd* e, char* b, size_t n, passwd** r) { return getpwuid_r(owner, e, b, n, r); },
          user, user_buffer)) {
    return false;
  }
  ::group entry{};
  std::vector<char> group_buffer;
  if (!lookup(
          [&](::group* e, char* b, size_t n, ::group** r) { return getgrgid_r(group, e, b, n, r); },
          entry, group_buffer)) {
    return false;
  }
  if (user.pw_gid != group || std::strcmp(entry.gr_name, user.pw_name) != 0) return false;
  for (char** member = entry.gr_mem; member != nullptr && *member != nullptr; ++member) {
    if (std::strcmp(*member, user.pw_name) != 0) return false;
  }
  return true;
}

}  // namespace

std::string unsafe_access_reason(const FileAccess& access, uid_t euid, const std::string& what) {
  if (access.owner != 0 && access.owner != euid) {
    return what + " is owned by uid " + std::to_string(access.owner) +
           ", neither root nor the user running this process (uid " + std::to_string(euid) + ")";
  }
  const bool is_folder = S_ISDIR(access.mode);
  // In a sticky folder (/tmp) others may add entries but not replace or rename ours.
  if (is_folder && (access.mode & S_ISVTX) != 0) return {};
  if ((access.mode & S_IWOTH) != 0) {
    return what + " is writable by every user (mode " + octal_mode(access.mode) + ")";
  }
  if ((access.mode & S_IWGRP) != 0 && !access.group_is_owners_alone) {
    return what + " is writable by its group (mode " + octal_mode(access.mode) +
           ") whose members are not just its owner";
  }
  return {};
}

std::string unsafe_path_reason(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::path resolved = std::filesystem::canonical(path, ec);
  if (ec) return "cannot resolve " + path.string() + ": " + ec.message();
  const uid_t euid = ::geteuid();
  std::filesystem::path current = resolved;
  for (;;) {
    struct stat info {};
    if (::stat(current.c_str(), &info) != 0) {
      return "cannot stat " + current.string() + ": " + std::strerror(errno);
    }
    FileAccess access{info.st_mode, info.st_uid, false};
    if ((info.st_mode & S_IWGRP) != 0) {
      access.group_is_owners_alone = group_is_owners_alone(info.st_uid, info.st_gid);
    }
    const std::string what = (S_ISDIR(info.st_mode) ? "folder " : "file ") + current.string();
    if (std::string reason = unsafe_access_reason(access, euid, what); !reason.empty()) {
      return reason;
    }
    if (current == current.root_path()) return {};
    current = current.parent_path();
  }
}

}  // namespace backplane::detail
