// Who could have written a plugin: the rule behind RuntimeOptions::strict_plugin_permissions.
// A plugin runs with the host's rights, so its library, its manifest and every folder above
// them must be writable only by their owner, and owned by root or the user running the host
// (as sshd's StrictModes). Owned by the core; not part of the public API.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

namespace backplane::detail {

// What the rule needs to know about one file or folder.
struct FileAccess {
  mode_t mode = 0;  // st_mode
  uid_t owner = 0;
  // The file's group is its owner's private group: the owner's primary group, named after the
  // owner, with no other members (Debian's default), so group-writable means owner-writable.
  bool group_is_owners_alone = false;
};

// Why `access` lets someone other than its owner and root write it, or whose owner is not
// trusted by a process running as `euid`; empty when it is safe. `what` names it.
std::string unsafe_access_reason(const FileAccess& access, uid_t euid, const std::string& what);

// Checks `path` and every folder above it (after resolving symbolic links) with stat(2).
// Returns the first reason found, naming the file or folder; empty when all are safe.
std::string unsafe_path_reason(const std::filesystem::path& path);

}  // namespace backplane::detail
