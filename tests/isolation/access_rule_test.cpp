// The plugin file rule (white box: core/src/plugin_safety), table-tested: which owners and modes
// are refused for a process running as uid 1000, and the library_path escape by ".." alone.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <string>

#include "plugin_safety/library_location.hpp"
#include "plugin_safety/permissions.hpp"

namespace backplane::detail {
namespace {

struct Access {
  const char* name;
  mode_t mode;
  uid_t owner;
  bool group_is_owners_alone;
  std::string reason;  // empty: safe
};

TEST(PluginAccessRule, OnlyTheOwnerAndRootMayWrite) {
  const uid_t euid = 1000;
  const Access table[] = {
      {"own file 0644", S_IFREG | 0644, 1000, false, ""},
      {"own file 0755", S_IFREG | 0755, 1000, false, ""},
      {"root's file", S_IFREG | 0644, 0, false, ""},
      {"root's folder", S_IFDIR | 0755, 0, false, ""},
      {"another user's file", S_IFREG | 0644, 1001, false,
       "X is owned by uid 1001, neither root nor the user running this process (uid 1000)"},
      {"another user's sticky folder", S_IFDIR | 01777, 1001, false,
       "X is owned by uid 1001, neither root nor the user running this process (uid 1000)"},
      {"world-writable file", S_IFREG | 0646, 1000, false,
       "X is writable by every user (mode 0646)"},
      {"world-writable folder", S_IFDIR | 0777, 0, false,
       "X is writable by every user (mode 0777)"},
      {"sticky world-writable folder (/tmp)", S_IFDIR | 01777, 0, false, ""},
      {"sticky bit on a file does not help", S_IFREG | 01666, 1000, false,
       "X is writable by every user (mode 1666)"},
      {"group-writable, shared group", S_IFREG | 0664, 1000, false,
       "X is writable by its group (mode 0664) whose members are not just its owner"},
      {"group-writable, the owner's private group", S_IFREG | 0664, 1000, true, ""},
      {"group-writable folder, private group", S_IFDIR | 0775, 1000, true, ""},
      {"private group, but world-writable", S_IFDIR | 0777, 1000, true,
       "X is writable by every user (mode 0777)"},
  };
  for (const Access& row : table) {
    EXPECT_EQ(
        unsafe_access_reason(FileAccess{row.mode, row.owner, row.group_is_owners_alone}, euid, "X"),
        row.reason)
        << row.name;
  }
}

TEST(PluginAccessRule, RootTrustsOnlyItself) {
  EXPECT_EQ(unsafe_access_reason(FileAccess{S_IFREG | 0644, 1000, false}, 0, "X"),
            "X is owned by uid 1000, neither root nor the user running this process (uid 0)");
  EXPECT_EQ(unsafe_access_reason(FileAccess{S_IFREG | 0644, 0, false}, 0, "X"), "");
}

TEST(LibraryLocationRule, DotDotLeavesTheFolder) {
  const struct {
    const char* path;
    bool escapes;
  } table[] = {
      {"lib.so", false},        {"sub/lib.so", false}, {"./lib.so", false},
      {"sub/../lib.so", false}, {"../lib.so", true},   {"sub/../../lib.so", true},
      {"./../x/lib.so", true},  {"..", true},          {".", true},
      {"sub/./../..", true},
  };
  for (const auto& row : table) {
    EXPECT_EQ(relative_library_escape_reason(row.path).empty(), !row.escapes) << row.path;
  }
  EXPECT_EQ(relative_library_escape_reason("../lib.so"),
            "library_path \"../lib.so\" leaves the manifest's folder; a relative library_path "
            "must name a file in or below it (or be an absolute path)");
}

}  // namespace
}  // namespace backplane::detail
