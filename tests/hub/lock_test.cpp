// The variant digest (its canonical form, computed independently here), kernels.lock parsing,
// and the differences a tampered package shows.
#include <backplane/error.hpp>
#include <backplane/hub/lock.hpp>

#include <gtest/gtest.h>
#include <openssl/evp.h>

#include "hub_testing.hpp"

namespace backplane::hub {
namespace {

using testing::TempFolder;
using testing::write_file;

std::string sha256_of(const std::string& bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &size, EVP_sha256(), nullptr);
  std::string out = "sha256:";
  char hex[3];
  for (unsigned int i = 0; i < size; ++i) {
    std::snprintf(hex, sizeof hex, "%02x", digest[i]);
    out += hex;
  }
  return out;
}

TEST(DigestVariant, HashesTheCanonicalFormOfHubReadme) {
  TempFolder folder;
  const std::string binary("\x7f\0ELF", 5);
  write_file(folder.path() / "lib" / "libk.so", binary);
  write_file(folder.path() / "metadata.json", "{}");
  write_file(folder.path() / "b.txt", "");
  std::filesystem::create_directories(folder.path() / "empty" / "folder");  // not hashed

  const VariantDigest d = digest_variant(folder.path());
  // Sorted relative paths; each: path NUL decimal-size NUL content.
  std::string canonical;
  for (const auto& [path, content] : {std::pair<std::string, std::string>{"b.txt", ""},
                                      {"lib/libk.so", binary},
                                      {"metadata.json", "{}"}}) {
    canonical += path;
    canonical += '\0';
    canonical += std::to_string(content.size());
    canonical += '\0';
    canonical += content;
  }
  EXPECT_EQ(d.sha256, sha256_of(canonical));
  ASSERT_EQ(d.files.size(), 3u);
  EXPECT_EQ(d.files[0].path, "b.txt");
  EXPECT_EQ(d.files[0].sha256, sha256_of(""));
  EXPECT_EQ(d.files[1].path, "lib/libk.so");
  EXPECT_EQ(d.files[1].size, 5u);
  EXPECT_EQ(d.files[1].sha256, sha256_of(binary));
  EXPECT_EQ(d.files[2].sha256, sha256_of("{}"));
}

TEST(DigestVariant, RefusesLinksNamingThem) {
  TempFolder folder;
  write_file(folder.path() / "a", "x");
  std::filesystem::create_symlink("a", folder.path() / "link");
  try {
    digest_variant(folder.path());
    ADD_FAILURE() << "accepted";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("link: a kernel package holds only regular files"),
              std::string::npos)
        << e.what();
  }
}

TEST(LockDifferences, NameEachFileThatDiffers) {
  TempFolder folder;
  write_file(folder.path() / "lib.so", "abcdef");
  write_file(folder.path() / "metadata.json", "{}");
  const LockedVariant locked = to_locked(digest_variant(folder.path()));
  EXPECT_TRUE(lock_differences(locked, digest_variant(folder.path())).empty());

  write_file(folder.path() / "lib.so", "abcdeF");  // one byte
  std::vector<std::string> d = lock_differences(locked, digest_variant(folder.path()));
  ASSERT_EQ(d.size(), 1u);
  EXPECT_EQ(d[0].rfind("lib.so: content differs (locked sha256:", 0), 0u) << d[0];

  write_file(folder.path() / "lib.so", "abcdef");
  write_file(folder.path() / "extra.so", "x");
  std::filesystem::remove(folder.path() / "metadata.json");
  d = lock_differences(locked, digest_variant(folder.path()));
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0].rfind("metadata.json: missing", 0), 0u) << d[0];
  EXPECT_EQ(d[1].rfind("extra.so: not in the lock", 0), 0u) << d[1];
}

TEST(LockFile, RoundTripsAndRefusesMalformedFilesNamingTheField) {
  LockFile lock;
  LockedVariant v;
  v.sha256 = "sha256:" + std::string(64, 'a');
  v.files["lib.so"] = "sha256:" + std::string(64, 'b');
  lock.repos["org/repo"] = LockedRepo{"v1", {{"cxx11-cpu-x86_64-linux", v}}};
  const LockFile again = LockFile::parse(lock.dump(), "kernels.lock");
  ASSERT_NE(again.find(RepoId{"org", "repo"}), nullptr);
  EXPECT_EQ(again.find(RepoId{"org", "repo"})->revision, "v1");
  EXPECT_EQ(again.dump(), lock.dump());
  EXPECT_EQ(again.find(RepoId{"org", "other"}), nullptr);

  const std::string hash = "\"sha256:" + std::string(64, 'a') + "\"";
  const std::pair<std::string, std::string> bad[] = {
      {"42", "the top level"},
      // An array is the kernels library's format; its entries are checked as it checks them.
      {"[1]", "[0].dependency: must be an object"},
      {R"({"kernels": {}})", "format"},
      {R"({"format": 1})", "kernels"},
      {R"({"format": 1, "kernels": {"bad": {}}})", "'bad' is not a kernel repository id"},
      {R"({"format": 1, "kernels": {"o/r": {"variants": {}}}})", "kernels.o/r.revision"},
      {R"({"format": 1, "kernels": {"o/r": {"revision": "../x", "variants": {}}}})",
       "kernels.o/r.revision: revision '../x'"},
      {R"({"format": 1, "kernels": {"o/r": {"revision": "v", "variants": {"x": {"hash": "md5:1",
         "files": {}}}}}})",
       "kernels.o/r.variants.x: is not a build variant"},
      {R"({"format": 1, "kernels": {"o/r": {"revision": "v", "variants": {
         "cxx11-cpu-x86_64-linux": {"hash": "md5:1", "files": {}}}}}})",
       "kernels.o/r.variants.cxx11-cpu-x86_64-linux.hash"},
      {R"({"format": 1, "kernels": {"o/r": {"revision": "v", "variants": {
         "cxx11-cpu-x86_64-linux": {"hash": )" +
           hash + R"(, "files": {"f": "sha256:XYZ"}}}}}})",
       "kernels.o/r.variants.cxx11-cpu-x86_64-linux.files.f"},
  };
  for (const auto& [text, why] : bad) {
    SCOPED_TRACE(text);
    try {
      LockFile::parse(text, "my.lock");
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()).rfind("my.lock", 0), 0u) << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace backplane::hub
