// Plugin files and folders others could write are refused (RuntimeOptions::
// strict_plugin_permissions, BACKPLANE_INSECURE_PLUGINS=1 to allow), and so is a relative
// library_path that leaves its manifest's folder through ".." or a symbolic link.
#include <backplane/runtime/runtime.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "plugin_folder.hpp"

namespace backplane::testing {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

// A plugin folder holding its own copy of the good fake plugin, named by a relative path.
class PluginPermissions : public ::testing::Test {
 protected:
  void SetUp() override {
    library = dir.path() / "libfake_good.so";
    fs::copy_file(fake_library("good"), library);
    manifest = dir.add_manifest("fake_good", "libfake_good.so", {"fakeaccel"});
  }

  PluginStatus status(bool strict = true) {
    RuntimeOptions options = dir.options();
    options.strict_plugin_permissions = strict;
    const Runtime rt = Runtime::open(options);
    const PluginInfo& info = plugin_named(rt, "fake_good");
    error = info.error;
    return info.status;
  }

  PluginFolder dir;
  fs::path library;
  fs::path manifest;
  std::string error;
};

TEST_F(PluginPermissions, OwnerOnlyWritableLoads) {
  EXPECT_EQ(status(), PluginStatus::kLoaded) << error;
}

struct Loosened {
  const char* name;
  enum { kFolder, kLibrary, kManifest } what;
  fs::perms perms;
  const char* reason;  // after "refused: <folder|file> <path> "
};

TEST_F(PluginPermissions, WorldWritableFilesAndFoldersAreRefusedUnlessAllowed) {
  const Loosened table[] = {
      {"folder", Loosened::kFolder, fs::perms(0777), "is writable by every user (mode 0777)"},
      {"library", Loosened::kLibrary, fs::perms(0757), "is writable by every user (mode 0757)"},
      {"manifest", Loosened::kManifest, fs::perms(0646), "is writable by every user (mode 0646)"},
  };
  for (const Loosened& row : table) {
    const fs::path target = row.what == Loosened::kFolder    ? dir.path()
                            : row.what == Loosened::kLibrary ? library
                                                             : manifest;
    const fs::perms before = fs::status(target).permissions();
    fs::permissions(target, row.perms);
    EXPECT_EQ(status(), PluginStatus::kFailed) << row.name;
    const std::string kind = row.what == Loosened::kFolder ? "folder " : "file ";
    EXPECT_THAT(error,
                HasSubstr("refused: " + kind + fs::canonical(target).string() + " " + row.reason))
        << row.name;
    EXPECT_THAT(error, HasSubstr("set BACKPLANE_INSECURE_PLUGINS=1 to load it anyway"));
    EXPECT_EQ(status(/*strict=*/false), PluginStatus::kLoaded) << row.name << ": " << error;
    fs::permissions(target, before);
  }
  EXPECT_EQ(status(), PluginStatus::kLoaded) << error;
}

TEST_F(PluginPermissions, AStickyWorldWritableFolderAboveIsAccepted) {
  // As /tmp: others may add entries but not replace ours. The folder itself stays 0700.
  const fs::path parent = dir.path().parent_path();
  ASSERT_TRUE((fs::status(parent).permissions() & fs::perms::sticky_bit) != fs::perms::none)
      << parent << " is expected to be a sticky folder such as /tmp";
  EXPECT_EQ(status(), PluginStatus::kLoaded) << error;
}

TEST_F(PluginPermissions, FilesOwnedByAnotherUserAreRefused) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give a file to another user";
  ASSERT_EQ(::chown(library.c_str(), 65534, 65534), 0);
  EXPECT_EQ(status(), PluginStatus::kFailed);
  EXPECT_THAT(error, HasSubstr("file " + fs::canonical(library).string() +
                               " is owned by uid 65534, neither root nor the user running this "
                               "process (uid 0)"));
  EXPECT_EQ(status(/*strict=*/false), PluginStatus::kLoaded) << error;
}

// The library_path rule, each case in a folder of its own.
struct Location {
  const char* name;
  const char* library_path;  // written into the manifest
  const char* link;          // when set: a symbolic link of this name in the folder ...
  bool link_outside;         // ... to the fake plugin's library, else to a copy beside it
  const char* reason;        // empty: loads
};

TEST(PluginLibraryLocation, RelativePathsStayInTheManifestFolder) {
  const Location table[] = {
      {"plain", "libfake_good.so", nullptr, false, ""},
      {"subfolder", "sub/../libfake_good.so", nullptr, false, ""},
      {"dotdot", "../libfake_good.so", nullptr, false,
       "bad manifest: library_path \"../libfake_good.so\" leaves the manifest's folder"},
      {"dotdot_back_in", "sub/../../x/libfake_good.so", nullptr, false,
       "leaves the manifest's folder"},
      {"link_inside", "linked.so", "linked.so", false, ""},
      {"link_outside", "linked.so", "linked.so", true, "through a symbolic link, outside"},
  };
  for (const Location& row : table) {
    PluginFolder dir;
    fs::copy_file(fake_library("good"), dir.path() / "libfake_good.so");
    fs::create_directory(dir.path() / "sub");
    if (row.link != nullptr) {
      fs::create_symlink(row.link_outside ? fake_library("good") : dir.path() / "libfake_good.so",
                         dir.path() / row.link);
    }
    dir.add_manifest("fake_good", row.library_path, {"fakeaccel"});
    const Runtime rt = dir.open();
    // A refused manifest is named by its file: the only record either way.
    ASSERT_EQ(rt.plugins().size(), 1u) << row.name;
    const PluginInfo& info = rt.plugins()[0];
    if (std::string(row.reason).empty()) {
      EXPECT_EQ(info.status, PluginStatus::kLoaded) << row.name << ": " << info.error;
    } else {
      EXPECT_EQ(info.status, PluginStatus::kFailed) << row.name;
      EXPECT_THAT(info.error, HasSubstr(row.reason)) << row.name;
    }
  }
}

TEST(PluginLibraryLocation, AnAbsolutePathMayPointAnywhere) {
  PluginFolder dir;
  dir.add_manifest("fake_good", fake_library("good"), {"fakeaccel"});
  const Runtime rt = dir.open();
  EXPECT_EQ(plugin_named(rt, "fake_good").status, PluginStatus::kLoaded) << describe(rt);
}

}  // namespace
}  // namespace backplane::testing
