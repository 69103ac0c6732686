// Hostile kernel-hub files: metadata.json and kernels.lock that nest, repeat keys or are too
// big, and package archives that escape the target, link out of it or inflate without bound.
// Each is refused with an error naming the file and what was wrong; nothing is written outside
// the target, and a good archive still unpacks after.
#include <backplane/hub/archive.hpp>
#include <backplane/hub/lock.hpp>
#include <backplane/hub/metadata.hpp>

#include "hostile_case.hpp"
#include "hub_testing.hpp"

namespace backplane::hub {
namespace {

using hostile::HostileCase;
using testing::Entry;
using testing::Format;
using testing::TempFolder;
using testing::tree;
using testing::write_archive;
using testing::write_file;

std::string nested(int depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

void metadata(const std::string& text) {
  TempFolder folder;
  write_file(folder.path() / "metadata.json", text);
  read_metadata(folder.path() / "metadata.json");
}
void lock(const std::string& text) {
  TempFolder folder;
  write_file(folder.path() / "kernels.lock", text);
  LockFile::read(folder.path() / "kernels.lock");
}

// Unpacks `entries` written as `format` into a fresh target beside which nothing may appear.
void unpack(Format format, const std::vector<Entry>& entries, const ArchiveLimits& limits = {}) {
  TempFolder folder;
  const std::filesystem::path archive = folder.path() / "pkg.archive";
  write_archive(archive, format, entries);
  const std::filesystem::path target = folder.path() / "deep" / "target";
  std::filesystem::create_directories(target);
  try {
    extract_archive(archive, target, limits);
  } catch (...) {
    std::vector<std::string> outside;
    for (const std::string& path : tree(folder.path())) {
      if (path.rfind("deep/target/", 0) != 0) outside.push_back(path);
    }
    EXPECT_EQ(outside, (std::vector<std::string>{"deep", "deep/target", "pkg.archive"}))
        << "something was written outside the target";
    throw;
  }
}

// 8 MiB of zeros, which gzip packs about 1000 times smaller; limits that check the ratio from
// the first MiB on.
const std::vector<Entry> kBomb = {{"pkg/zeros", Entry::kFile, std::string(8u << 20, '\0')}};
ArchiveLimits bomb_limits() {
  ArchiveLimits limits;
  limits.ratio_floor_bytes = 1u << 20;
  return limits;
}

class HostileHubFile : public ::testing::TestWithParam<HostileCase> {};

TEST_P(HostileHubFile, IsRefusedByNameAndGoodArchivesStillUnpack) {
  hostile::expect_refused(GetParam());
  EXPECT_NO_THROW(unpack(Format::kTarGz, {{"pkg/a.txt", Entry::kFile, "text"}}));
}

const HostileCase kCases[] = {
    {"metadata nested 10000 deep", [] { metadata("{\"archs\": " + nested(10000) + "}"); },
     "metadata.json nests objects and arrays deeper than 64 levels"},
    {"metadata duplicate key", [] { metadata(R"({"format": 1, "format": 1})"); },
     "metadata.json has the key 'format' twice in one object; keys must be unique"},
    {"metadata of 2 MiB", [] { metadata(std::string(2u << 20, ' ')); }, "metadata.json"},
    {"lock nested 10000 deep", [] { lock("{\"kernels\": " + nested(10000) + "}"); },
     "kernels.lock nests objects and arrays deeper than 64 levels"},
    {"lock duplicate repo", [] { lock(R"({"format": 1, "kernels": {"a/b": {}, "a/b": {}}})"); },
     "kernels.lock has the key 'a/b' twice in one object; keys must be unique"},
    {"archive path traversal",
     [] {
       unpack(Format::kTarGz, {{"pkg/../../evil", Entry::kFile, "x"}});
     },
     "entry 'pkg/../../evil' has a '..' part, which would leave the target folder"},
    {"archive absolute path",
     [] {
       unpack(Format::kTar, {{"/tmp/evil", Entry::kFile, "x"}});
     },
     "entry '/tmp/evil' has an absolute path"},
    {"archive symlink out",
     [] {
       unpack(Format::kTarGz, {{"pkg/etc", Entry::kSymlink, "../../../etc"}});
     },
     "entry 'pkg/etc' is a symbolic link; links are refused"},
    {"archive hardlink out",
     [] {
       unpack(Format::kTar, {{"pkg/passwd", Entry::kHardlink, "/etc/passwd"}});
     },
     "entry 'pkg/passwd' is a hard link; links are refused"},
    {"zip bomb (tar.gz)", [] { unpack(Format::kTarGz, kBomb, bomb_limits()); },
     "entry 'pkg/zeros' expands to"},
    {"zip bomb (zip)", [] { unpack(Format::kZip, kBomb, bomb_limits()); },
     "refused as a decompression bomb"},
    {"archive over the size bound",
     [] {
       ArchiveLimits limits;
       limits.max_total_bytes = 1000;
       unpack(Format::kTar,
              {{"pkg/a", Entry::kFile, std::string(600, 'a')},
               {"pkg/b", Entry::kFile, std::string(600, 'b')}},
              limits);
     },
     "entry 'pkg/b' is over the limit"},
    {"archive with too many entries",
     [] {
       ArchiveLimits limits;
       limits.max_entries = 2;
       unpack(Format::kTar,
              {{"pkg/a", Entry::kFile, "a"},
               {"pkg/b", Entry::kFile, "b"},
               {"pkg/c", Entry::kFile, "c"}},
              limits);
     },
     "entry 'pkg/c' is past the limit of 2 entries"},
};
INSTANTIATE_TEST_SUITE_P(HubFiles, HostileHubFile, ::testing::ValuesIn(kCases), hostile::case_name);

TEST(HostileHubFile, AnOrdinaryCompressedPackageIsNoBomb) {
  // Text compresses well, but not 200 times: the default limits let it through.
  std::string text;
  for (int i = 0; text.size() < (2u << 20); ++i) text += "line " + std::to_string(i) + "\n";
  ArchiveLimits limits = bomb_limits();
  EXPECT_NO_THROW(unpack(Format::kTarGz, {{"pkg/notes.txt", Entry::kFile, text}}, limits));
}

}  // namespace
}  // namespace backplane::hub
