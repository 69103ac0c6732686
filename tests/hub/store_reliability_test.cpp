// The store under concurrency and faults (README "Reliability"): writers racing each other,
// a replace landing while a locked load checks and opens, sparse archives, a full disk, and
// the inputs that must be refused rather than misread.
#include <backplane/error.hpp>
#include <backplane/hub/errors.hpp>
#include <backplane/hub/store.hpp>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mount.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>

#include "hub_testing.hpp"
#include "test_package_op.h"

// fsync as the hub library calls it, recorded: this executable's definition comes before the C
// library's for the libraries it loads. What was flushed is read back from /proc/self/fd.
namespace {
std::mutex g_synced_mutex;
std::vector<std::string> g_synced;
}  // namespace

extern "C" __attribute__((visibility("default"))) int fsync(int fd) {
  std::error_code ec;
  const std::string path =
      std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(fd), ec).string();
  {
    const std::lock_guard<std::mutex> lock(g_synced_mutex);
    g_synced.push_back(path);
  }
  return static_cast<int>(::syscall(SYS_fsync, fd));
}

namespace backplane::hub {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::TempFolder;

// The path of a file this process has open whose name ends with `suffix`, or "".
std::string open_file_ending_with(const std::string& suffix) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc/self/fd", ec)) {
    const std::string target = fs::read_symlink(entry.path(), ec).string();
    if (!ec && target.size() >= suffix.size() &&
        target.compare(target.size() - suffix.size(), suffix.size(), suffix) == 0) {
      return target;
    }
  }
  return {};
}

class StoreReliabilityTest : public ::testing::Test {
 protected:
  // A package folder for `repo` built from `library`, with `extra` files beside it.
  fs::path make_package(const std::string& name, const std::string& repo,
                        const char* library = HUB_TEST_PACKAGE_GOOD) {
    const fs::path package = sources_.path() / name;
    testing::write_variant(package, variant_, library, testing::test_metadata(repo));
    return package;
  }
  fs::path variant_folder(const fs::path& package) const { return package / "build" / variant_; }
  fs::path store_root() const { return store_.path() / "store"; }
  Store store() const { return Store(store_root()); }

  // The test package with a 1 GiB file `big` of holes beside the library, installed from a
  // sparse tar (no disk used). Hashing it takes long enough for a replace to land meanwhile;
  // its name sets whether it is hashed before the library and metadata.json or after.
  void install_with_big_file(const std::string& big) {
    const fs::path package = make_package("old", "backplane/scale");
    const int fd = ::open((variant_folder(package) / big).c_str(), O_WRONLY | O_CREAT, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, off_t{1} << 30), 0);
    ::close(fd);
    const fs::path archive = sources_.path() / "old.tar";
    const std::string command = "tar --sparse --format=gnu -C '" + package.string() + "' -cf '" +
                                archive.string() + "' build";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    store().install(archive);
  }
  // A thread that, once this process has a file ending in `suffix` open, replaces the
  // installed package with `package`; what went wrong ends in `error`.
  std::thread replace_when_open(const std::string& suffix, const fs::path& package,
                                std::string& error) const {
    return std::thread([this, suffix, package, &error] {
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      while (open_file_ending_with(suffix).empty()) {
        if (std::chrono::steady_clock::now() > deadline) {
          error = "never saw " + suffix + " open";
          return;
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      try {
        store().install(package, InstallOptions{std::nullopt, true});
      } catch (const std::exception& e) {
        error = e.what();
      }
    });
  }

  TempFolder sources_;
  TempFolder store_;
  const std::string variant_ = testing::host_cpu_variant();
};

// Before: one install's sweep of stale staging folders could take another's lock file in the
// moment between its creation and its flock, and delete a live install ("cannot lock ...:
// Resource temporarily unavailable"); a removal of something not installed could delete the
// repo folder another install had just made ("cannot install into ...: No such file or
// directory"). Each worker owns its revisions, so every call must succeed.
TEST_F(StoreReliabilityTest, ConcurrentWritersAllSucceedAndTheStoreAgreesWithThem) {
  constexpr int kWorkers = 6;
  constexpr int kRounds = 6;
  const std::vector<std::string> repos = {"backplane/scale", "backplane/other"};
  std::vector<fs::path> sources;
  for (const std::string& repo : repos) {
    sources.push_back(make_package(repo.substr(repo.find('/') + 1), repo));
  }
  std::atomic<int> failures{0};
  std::mutex messages_mutex;
  std::vector<std::string> messages;
  auto worker = [&](int w) {
    const Store s = store();
    const std::string revision = "r" + std::to_string(w);
    const RepoId repo = RepoId::parse(repos[w % repos.size()], "test");
    const fs::path& source = sources[w % repos.size()];
    for (int round = 0; round < kRounds; ++round) {
      try {
        s.install(source, InstallOptions{revision, false});
        s.install(source, InstallOptions{revision, true});  // replace
        s.lock_entry(repo, revision);
        // Nothing of this revision of another repo is installed: a no-op that must not touch
        // the folders others are installing into.
        EXPECT_EQ(s.remove(RepoId::parse("backplane/absent", "test"), revision), 0u);
        if (round + 1 < kRounds || w % 2 == 1) {
          EXPECT_EQ(s.remove(repo, revision), 1u);
        }
      } catch (const std::exception& e) {
        ++failures;
        const std::lock_guard<std::mutex> lock(messages_mutex);
        messages.push_back(revision + " round " + std::to_string(round) + ": " + e.what());
        return;
      }
    }
  };
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) threads.emplace_back(worker, w);
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0) << (messages.empty() ? "" : messages.front());

  // Even workers left their revision installed; verify agrees with list.
  std::vector<std::string> listed;
  for (const InstalledPackage& p : store().list())
    listed.push_back(p.repo.str() + "@" + p.revision);
  std::vector<std::string> expected;
  for (int w = 0; w < kWorkers; w += 2) {
    expected.push_back(repos[w % repos.size()] + "@r" + std::to_string(w));
  }
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(listed, expected);
  for (int w = 0; w < kWorkers; w += 2) {
    const LockedRepo locked =
        store().lock_entry(RepoId::parse(repos[w % repos.size()], "test"), "r" + std::to_string(w));
    const VariantDigest source = digest_variant(variant_folder(sources[w % repos.size()]));
    ASSERT_EQ(locked.variants.count(variant_), 1u);
    EXPECT_EQ(locked.variants.at(variant_).sha256, source.sha256);
  }
  EXPECT_TRUE(testing::tree(store_root() / ".staging").empty());
}

// Before: the lock check hashed the variant by path and the load opened the library by path,
// so a replace landing in between loaded a library nobody had checked. Now the replace waits
// for the load: what loads is what was verified (or, had the replace come first, the lock
// check refuses the new files).
TEST_F(StoreReliabilityTest, AReplaceDuringALockedLoadNeverLoadsUncheckedBytes) {
  if (std::system("tar --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "no tar here";
  install_with_big_file("zz.bin");  // hashed last
  if (HasFatalFailure()) return;
  const fs::path new_package = make_package("new", "backplane/scale", HUB_TEST_PACKAGE_SQUARES);
  LockFile lock;
  lock.repos["backplane/scale"] = store().lock_entry(RepoId::parse("backplane/scale", "t"), {});

  std::string replace_error;
  std::thread replacer = replace_when_open("/zz.bin", new_package, replace_error);
  LoadOptions options;
  options.lock = &lock;
  options.lock_source = "test.lock";
  std::optional<LoadedPackage> loaded;
  std::string load_error;
  try {
    loaded = store().load(RepoId::parse("backplane/scale", "t"), SystemFacts::host(), options);
  } catch (const IntegrityError& e) {
    load_error = e.what();  // the replace came first: refused, also right
  }
  replacer.join();
  EXPECT_EQ(replace_error, "");
  if (loaded) {
    const PackageKernel* kernel = loaded->find("scale", "scale_f32");
    ASSERT_NE(kernel, nullptr);
    float value = 1.0f;
    const auto scale = reinterpret_cast<hub_test_scale_fn>(kernel->function);
    EXPECT_EQ(LoadedPackage::take_status(scale(kernel->context, &value, 1, 3.0f)), "");
    EXPECT_EQ(value, 3.0f) << "the library loaded is the replacement (it squares), not the one "
                              "the lock checked";
  } else {
    EXPECT_NE(load_error.find("does not match test.lock"), std::string::npos) << load_error;
  }
}

// Before: `kernel-hub lock` (lock_entry) during a replace hashed part of each tree: the files
// after the one being read when the replace landed came from the new package.
TEST_F(StoreReliabilityTest, ALockRecordsOneInstalledTree) {
  if (std::system("tar --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "no tar here";
  install_with_big_file("aa.bin");  // hashed first: the rest after the replace lands
  if (HasFatalFailure()) return;
  const fs::path new_package = make_package("new", "backplane/scale", HUB_TEST_PACKAGE_SQUARES);
  testing::write_file(variant_folder(new_package) / "aa.bin", "new");
  const RepoId repo = RepoId::parse("backplane/scale", "t");
  const std::string old_hash = store().lock_entry(repo, {}).variants.at(variant_).sha256;
  const std::string new_hash = digest_variant(variant_folder(new_package)).sha256;

  std::string replace_error;
  std::thread replacer = replace_when_open("/aa.bin", new_package, replace_error);
  const LockedRepo locked = store().lock_entry(repo, {});
  replacer.join();
  EXPECT_EQ(replace_error, "");
  const std::string hash = locked.variants.at(variant_).sha256;
  EXPECT_TRUE(hash == old_hash || hash == new_hash)
      << "the lock hashes part of the old package and part of the new";
  EXPECT_EQ(store().lock_entry(repo, {}).variants.at(variant_).sha256, new_hash);
}

// Power loss: every file and folder of the package is flushed while it is still staged, and the
// folder it is renamed into after; a visible package is then whole on disk.
TEST_F(StoreReliabilityTest, AnInstallIsOnDiskBeforeItIsVisible) {
  const fs::path package = make_package("p", "backplane/scale");
  {
    const std::lock_guard<std::mutex> lock(g_synced_mutex);
    g_synced.clear();
  }
  const InstalledPackage installed = store().install(package);
  std::vector<std::string> synced;
  {
    const std::lock_guard<std::mutex> lock(g_synced_mutex);
    synced = g_synced;
  }
  const std::string staging = (store_root() / ".staging").string() + "/install-";
  for (const std::string& relative :
       {std::string("build"), "build/" + variant_, "build/" + variant_ + "/libscale.so",
        "build/" + variant_ + "/metadata.json"}) {
    SCOPED_TRACE(relative);
    EXPECT_TRUE(std::any_of(synced.begin(), synced.end(), [&](const std::string& p) {
      return p.rfind(staging, 0) == 0 && p.size() > relative.size() &&
             p.compare(p.size() - relative.size() - 1, std::string::npos, "/" + relative) == 0;
    })) << "not flushed while staged";
  }
  ASSERT_FALSE(synced.empty());
  EXPECT_EQ(synced.back(), installed.folder.parent_path().string())
      << "the folder renamed into is flushed last";
}

TEST_F(StoreReliabilityTest, RemovingWhatIsNotInstalledTouchesNothing) {
  fs::create_directories(store_root() / "backplane" / "activation");
  EXPECT_EQ(store().remove(RepoId::parse("backplane/activation", "t"), std::string("main")), 0u);
  EXPECT_TRUE(fs::is_directory(store_root() / "backplane" / "activation"));
}

// GNU tar's sparse format: libarchive reads no data for the holes, so an all-hole file came
// out empty. tar -x restores its size; so does the store now.
TEST_F(StoreReliabilityTest, ASparseFileInATarKeepsItsSize) {
  if (std::system("tar --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "no tar here";
  const fs::path package = make_package("sparse", "backplane/scale");
  const fs::path holes = variant_folder(package) / "holes.bin";
  {
    const int fd = ::open(holes.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::ftruncate(fd, 3 << 20), 0);
    ::close(fd);
  }
  const fs::path archive = sources_.path() / "sparse.tar";
  const std::string command = "tar --sparse --format=gnu -C '" + package.string() + "' -cf '" +
                              archive.string() + "' build";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const InstalledPackage installed = store().install(archive);
  const fs::path restored = installed.folder / "build" / variant_ / "holes.bin";
  EXPECT_EQ(fs::file_size(restored), uint64_t{3} << 20);
  EXPECT_EQ(digest_variant(installed.folder / "build" / variant_).sha256,
            digest_variant(variant_folder(package)).sha256);
}

// A store on a full file system says so, from a folder as from an archive, and leaves nothing
// installed. Needs a small tmpfs: root in a mount namespace that allows it.
TEST_F(StoreReliabilityTest, AFullDiskSaysNoSpaceAndInstallsNothing) {
  const fs::path small = store_.path() / "small";
  fs::create_directories(small);
  if (::mount("tmpfs", small.c_str(), "tmpfs", 0, "size=1m") != 0) {
    GTEST_SKIP() << "cannot mount a 1 MiB tmpfs here (" << std::strerror(errno)
                 << "): the full-disk case needs root with CAP_SYS_ADMIN";
  }
  struct Unmount {
    fs::path path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{small};
  const fs::path package = make_package("big", "backplane/scale");
  testing::write_file(variant_folder(package) / "big.bin", std::string(2 << 20, 'x'));
  const fs::path archive = sources_.path() / "big.tar";
  const std::string command =
      "tar -C '" + package.string() + "' -cf '" + archive.string() + "' build";
  ASSERT_EQ(std::system(command.c_str()), 0) << command;
  const Store full(small / "store");
  for (const fs::path& source : {package, archive}) {
    SCOPED_TRACE(source.string());
    try {
      full.install(source);
      ADD_FAILURE() << "installed onto a full disk";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("No space left on device"), std::string::npos)
          << e.what();
    }
    EXPECT_TRUE(full.list().empty());
  }
}

// Before: a store root that is a file, or a path too long to use, listed as "(no packages)".
TEST_F(StoreReliabilityTest, AStoreThatCannotBeOneIsAnErrorNotAnEmptyStore) {
  fs::create_directories(store_root().parent_path());
  testing::write_file(store_root(), "not a folder");
  const std::vector<std::pair<fs::path, std::string>> cases = {
      {store_root(), "is not a folder"},
      {store_.path() / std::string(5000, 'a'), "File name too long"}};
  for (const auto& [root, said] : cases) {
    SCOPED_TRACE(said);
    try {
      Store(root).list();
      ADD_FAILURE() << "listed " << root.string().substr(0, 80) << " as a store";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(said), std::string::npos) << e.what();
    }
    EXPECT_THROW(Store(root).install(make_package("p", "backplane/scale")), InvalidArgument);
  }
}

TEST(LockFileNames, AVariantOrAFileOutsideItsFolderIsRefused) {
  const std::string hash = "sha256:" + std::string(64, 'a');
  auto lock_with = [&](const std::string& variant, const std::string& file) {
    return json{{"format", kLockFormat},
                {"kernels",
                 {{"backplane/scale",
                   {{"revision", "main"},
                    {"variants", {{variant, {{"hash", hash}, {"files", {{file, hash}}}}}}}}}}}}
        .dump();
  };
  const std::string good_variant = testing::host_cpu_variant();
  EXPECT_NO_THROW(LockFile::parse(lock_with(good_variant, "metadata.json"), "kernels.lock"));
  for (const auto& [variant, file] :
       std::vector<std::pair<std::string, std::string>>{{"../../../../etc", "metadata.json"},
                                                        {good_variant, "../../etc/passwd"},
                                                        {good_variant, "/etc/passwd"},
                                                        {good_variant, "a//b"}}) {
    SCOPED_TRACE(variant + " " + file);
    EXPECT_THROW(LockFile::parse(lock_with(variant, file), "kernels.lock"), InvalidArgument);
  }
}

}  // namespace
}  // namespace backplane::hub
