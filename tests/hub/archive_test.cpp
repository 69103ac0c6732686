// Package archives: tar.gz and zip unpack; every entry that could land outside the target
// folder, every link and special file, and oversize entries are refused, naming the entry, and
// nothing is written outside the target.
#include <backplane/error.hpp>
#include <backplane/hub/archive.hpp>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "hub_testing.hpp"

namespace backplane::hub {
namespace {

using testing::Entry;
using testing::Format;
using testing::read_file;
using testing::TempFolder;
using testing::tree;
using testing::write_archive;

const std::vector<Entry> kPackage = {
    {"./", Entry::kFolder, "", 0755},  // as `tar -C folder -cf x.tar .` writes
    {"pkg", Entry::kFolder, "", 0755},
    {"pkg/build/v/metadata.json", Entry::kFile, "{\"x\": 1}"},
    {"pkg/build/v/libk.so", Entry::kFile,
     std::string("\x7f"
                 "ELF\0\1",
                 6),
     0755},
};

TEST(ExtractArchive, UnpacksTarGzAndZip) {
  for (Format format : {Format::kTarGz, Format::kZip, Format::kTar}) {
    SCOPED_TRACE(static_cast<int>(format));
    TempFolder folder;
    const std::filesystem::path archive = folder.path() / "pkg.archive";
    write_archive(archive, format, kPackage);
    EXPECT_TRUE(is_archive(archive));
    const std::filesystem::path target = folder.path() / "target";
    std::filesystem::create_directory(target);
    extract_archive(archive, target);
    EXPECT_EQ(tree(target),
              (std::vector<std::string>{"pkg", "pkg/build", "pkg/build/v", "pkg/build/v/libk.so",
                                        "pkg/build/v/metadata.json"}));
    EXPECT_EQ(read_file(target / "pkg/build/v/libk.so"), kPackage[3].content);
    EXPECT_EQ(read_file(target / "pkg/build/v/metadata.json"), "{\"x\": 1}");
    struct stat status {};
    ASSERT_EQ(::stat((target / "pkg/build/v/libk.so").c_str(), &status), 0);
    EXPECT_NE(status.st_mode & 0100, 0u);
    ASSERT_EQ(::stat((target / "pkg/build/v/metadata.json").c_str(), &status), 0);
    EXPECT_EQ(status.st_mode & 0111, 0u);
  }
}

TEST(ExtractArchive, IsArchiveSaysNoToOtherFiles) {
  TempFolder folder;
  testing::write_file(folder.path() / "notes.txt", "just text\n");
  EXPECT_FALSE(is_archive(folder.path() / "notes.txt"));
  EXPECT_FALSE(is_archive(folder.path() / "missing.tar.gz"));
  EXPECT_FALSE(is_archive(folder.path()));
}

struct RefusedCase {
  const char* name;
  Entry entry;
  const char* why;
};

TEST(ExtractArchive, RefusesEntriesThatCouldEscapeAndWritesNothingOutside) {
  const std::string absolute =
      (std::filesystem::temp_directory_path() / "backplane-hub-absolute-entry").string();
  const std::vector<RefusedCase> cases = {
      {"dot-dot", {"../x", Entry::kFile, "evil"}, "has a '..' part"},
      {"dot-dot deep", {"pkg/../../x", Entry::kFile, "evil"}, "has a '..' part"},
      {"dot-dot folder", {"pkg/../..", Entry::kFolder, ""}, "has a '..' part"},
      {"absolute", {absolute, Entry::kFile, "evil"}, "has an absolute path"},
      {"symlink out", {"pkg/link", Entry::kSymlink, "../../outside"}, "is a symbolic link"},
      {"symlink absolute", {"pkg/etc", Entry::kSymlink, "/etc"}, "is a symbolic link"},
      {"hard link", {"pkg/h", Entry::kHardlink, "../../etc/passwd"}, "is a hard link"},
      {"device", {"pkg/null", Entry::kCharDevice, ""}, "is a device, FIFO or socket"},
      {"fifo", {"pkg/fifo", Entry::kFifo, ""}, "is a device, FIFO or socket"},
      {"a file as the top itself", {".", Entry::kFile, "x"}, "names the top folder itself"},
      {"twice", {"pkg/build/v/libk.so", Entry::kFile, "again"}, "the archive names it twice"},
  };
  for (const RefusedCase& c : cases) {
    SCOPED_TRACE(c.name);
    TempFolder sandbox;
    const std::filesystem::path archive = sandbox.path() / "archives" / "bad.tar.gz";
    std::filesystem::create_directories(archive.parent_path());
    std::vector<Entry> entries = kPackage;
    entries.push_back(c.entry);
    entries.push_back({"x", Entry::kFile, "after"});
    write_archive(archive, Format::kTarGz, entries);
    const std::filesystem::path target = sandbox.path() / "deep" / "target";
    std::filesystem::create_directories(target);
    try {
      extract_archive(archive, target);
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgument& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("entry '" + c.entry.name), std::string::npos) << message;
      EXPECT_NE(message.find(c.why), std::string::npos) << message;
      EXPECT_NE(message.find(archive.string()), std::string::npos) << message;
    }
    // Outside the target: only what the test made.
    for (const std::string& path : tree(sandbox.path())) {
      EXPECT_TRUE(path.rfind("deep", 0) == 0 || path.rfind("archives", 0) == 0) << path;
    }
    EXPECT_FALSE(std::filesystem::exists(sandbox.path() / "deep" / "x"));
    EXPECT_FALSE(std::filesystem::exists(target / "x"));  // nothing after the refused entry
    EXPECT_FALSE(std::filesystem::exists(absolute));
  }
}

TEST(ExtractArchive, RefusesEntriesPastTheLimits) {
  TempFolder folder;
  const std::filesystem::path archive = folder.path() / "big.tar";
  write_archive(archive, Format::kTar,
                {{"a", Entry::kFile, std::string(100, 'a')}, {"b", Entry::kFile, "bb"}});
  struct Case {
    ArchiveLimits limits;
    const char* why;
  };
  const Case cases[] = {
      {{99, 1000, 10}, "entry 'a' is 100 bytes; the limit is 99"},
      {{1000, 101, 10}, "entry 'b' is over the limit"},
      {{1000, 1000, 1}, "entry 'b' is past the limit of 1 entries"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    TempFolder target;
    try {
      extract_archive(archive, target.path(), c.limits);
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(c.why), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace backplane::hub
