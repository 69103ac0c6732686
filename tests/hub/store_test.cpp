// The store: layout, revisions, atomic installs from folders and archives, removal, local
// folders, and loading under the lock and trust rules.
#include <backplane/error.hpp>
#include <backplane/hub/errors.hpp>
#include <backplane/hub/store.hpp>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <ctime>

#include "hub_testing.hpp"
#include "test_package_op.h"

namespace backplane::hub {
namespace {

using nlohmann::json;
using testing::Entry;
using testing::TempFolder;
using testing::tree;

class StoreTest : public ::testing::Test {
 protected:
  // A package folder for `repo` with the host's cpu variant.
  std::filesystem::path make_package(const std::string& name, const std::string& repo,
                                     const json& change = json::object()) {
    const std::filesystem::path package = sources_.path() / name;
    json metadata = testing::test_metadata(repo);
    metadata.merge_patch(change);
    testing::write_variant(package, variant_, HUB_TEST_PACKAGE_GOOD, metadata);
    return package;
  }
  // Load options that trust `repo` at `revision` as a package this build produced: its
  // installed files are the ones listed.
  LoadOptions as_built(const std::string& repo, const std::string& revision = "main") const {
    auto own = std::make_shared<TrustedPackages>();
    const VariantDigest digest =
        digest_variant(store_root() / repo / revision / "build" / variant_);
    for (const FileDigest& f : digest.files) own->repos[repo][variant_][f.path] = f.sha256;
    own->source = "test";
    LoadOptions options;
    options.trust.own_packages = own;
    return options;
  }
  std::filesystem::path store_root() const { return store_.path() / "store"; }
  Store store(LocalKernels local = {}) const { return Store(store_root(), std::move(local)); }
  SystemFacts host() const { return SystemFacts::host(); }
  // What is in the store besides the (empty) staging folder and the store's lock file.
  std::vector<std::string> stored() const {
    std::vector<std::string> out;
    for (const std::string& p : tree(store_root())) {
      if (p != ".staging" && p != ".lock") out.push_back(p);
    }
    return out;
  }

  TempFolder sources_;
  TempFolder store_;
  const std::string variant_ = testing::host_cpu_variant();
};

TEST_F(StoreTest, InstallsAFolderByRepoAndRevision) {
  const InstalledPackage p = store().install(make_package("scale", "backplane/scale"));
  EXPECT_EQ(p.repo.str(), "backplane/scale");
  EXPECT_EQ(p.revision, "main");
  EXPECT_EQ(p.folder, store_root() / "backplane" / "scale" / "main");
  EXPECT_EQ(p.variants, std::vector<std::string>{variant_});
  const std::string v = "backplane/scale/main/build/" + variant_;
  EXPECT_EQ(stored(),
            (std::vector<std::string>{"backplane", "backplane/scale", "backplane/scale/main",
                                      "backplane/scale/main/build", v, v + "/libscale.so",
                                      v + "/metadata.json"}));
  const auto listed = store().list();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].repo.str(), "backplane/scale");
  EXPECT_FALSE(listed[0].local);
  EXPECT_TRUE(store().installed(RepoId{"backplane", "scale"}, std::nullopt));
  EXPECT_TRUE(store().installed(RepoId{"backplane", "scale"}, "main"));
  EXPECT_FALSE(store().installed(RepoId{"backplane", "scale"}, "v2"));
  EXPECT_FALSE(store().installed(RepoId{"backplane", "other"}, std::nullopt));
  // The attention rules ask with a Hub kernel id.
  const std::pair<const char*, bool> ids[] = {
      {"backplane/scale", true},           {"backplane/scale@main", true},
      {"backplane/scale:scale_f32", true}, {"backplane/scale@main:scale_f32", true},
      {"backplane/scale@v2", false},       {"backplane/scale:other_function", false},
      {"backplane/other", false},
  };
  for (const auto& [text, expected] : ids) {
    EXPECT_EQ(store().installed(HubKernelId::parse(text)), expected) << text;
  }
}

TEST_F(StoreTest, DefaultRevisionIsMainThenTheOnlyOne) {
  const RepoId repo{"backplane", "scale"};
  const std::filesystem::path package = make_package("scale", "backplane/scale");
  InstallOptions v1;
  v1.revision = "v1";
  store().install(package, v1);
  EXPECT_EQ(store().locate(repo, std::nullopt).revision, "v1");  // the only one
  store().install(package);
  EXPECT_EQ(store().locate(repo, std::nullopt).revision, "main");
  EXPECT_EQ(store().locate(repo, "v1").revision, "v1");
  EXPECT_EQ(store().remove(repo, std::string("main")), 1u);
  InstallOptions v2;
  v2.revision = "v2";
  store().install(package, v2);
  try {
    store().locate(repo, std::nullopt);
    ADD_FAILURE() << "located";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("several revisions installed (v1, v2)"), std::string::npos)
        << e.what();
  }
  try {
    store().locate(repo, "v3");
    ADD_FAILURE() << "located";
  } catch (const NotFound& e) {
    EXPECT_NE(std::string(e.what()).find("not installed at revision v3; installed: v1, v2"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(store().remove(repo, std::nullopt), 2u);
  EXPECT_EQ(stored(), std::vector<std::string>{});
  EXPECT_THROW(store().locate(repo, std::nullopt), NotFound);
}

TEST_F(StoreTest, ReinstallNeedsReplaceAndSwapsTheWholePackage) {
  const std::filesystem::path package = make_package("scale", "backplane/scale");
  store().install(package);
  testing::write_file(package / "build" / variant_ / "notes.txt", "second build\n");
  EXPECT_THROW(store().install(package), PackageError);
  EXPECT_FALSE(std::filesystem::exists(store_root() / "backplane/scale/main/build" / variant_ /
                                       "notes.txt"));
  InstallOptions replace;
  replace.replace = true;
  store().install(package, replace);
  EXPECT_EQ(
      testing::read_file(store_root() / "backplane/scale/main/build" / variant_ / "notes.txt"),
      "second build\n");
  EXPECT_EQ(tree(store_root() / ".staging"), std::vector<std::string>{});
}

TEST_F(StoreTest, AFailingInstallLeavesNothingBehind) {
  struct Case {
    const char* name;
    std::function<std::filesystem::path()> make;
    const char* why;
  };
  const std::vector<Case> cases = {
      {"second variant has bad metadata",
       [&] {
         const auto package = make_package("two", "backplane/scale");
         json bad = testing::test_metadata();
         bad["functions"][0].erase("op");
         testing::write_variant(package, "noarch-universal", HUB_TEST_PACKAGE_GOOD, bad);
         return package;
       },
       "build/noarch-universal/metadata.json: functions[0].op: is missing"},
      {"variants of two repos",
       [&] {
         const auto package = make_package("mixed", "backplane/scale");
         testing::write_variant(package, "noarch-universal", HUB_TEST_PACKAGE_GOOD,
                                testing::test_metadata("backplane/other"));
         return package;
       },
       "one package is one repo"},
      {"a variant folder that does not parse",
       [&] {
         const auto package = make_package("badname", "backplane/scale");
         std::filesystem::create_directories(package / "build" / "cxx11-gpu-x86_64-linux");
         return package;
       },
       "build/cxx11-gpu-x86_64-linux: build variant"},
      {"a symbolic link in a variant",
       [&] {
         const auto package = make_package("link", "backplane/scale");
         std::filesystem::create_symlink("/etc/passwd", package / "build" / variant_ / "passwd");
         return package;
       },
       "this is a symbolic link"},
      {"no build folder", [&] { return sources_.path(); }, "no build/ folder"},
      {"an archive with an entry outside",
       [&] {
         const auto archive = sources_.path() / "escape.tar.gz";
         testing::write_archive(archive, testing::Format::kTarGz,
                                {{"build/" + variant_ + "/metadata.json", Entry::kFile,
                                  testing::test_metadata().dump()},
                                 {"../../escaped", Entry::kFile, "x"}});
         return archive;
       },
       "entry '../../escaped' has a '..' part"},
      {"an archive without a package",
       [&] {
         const auto archive = sources_.path() / "empty.zip";
         testing::write_archive(archive, testing::Format::kZip,
                                {{"a/readme.txt", Entry::kFile, "x"}, {"b/", Entry::kFolder, ""}});
         return archive;
       },
       "no build/ folder at the top of the archive or in its one top-level folder"},
      {"neither folder nor archive",
       [&] {
         testing::write_file(sources_.path() / "notes.txt", "x");
         return sources_.path() / "notes.txt";
       },
       "neither a folder nor an archive"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::filesystem::path source = c.make();
    try {
      store().install(source);
      ADD_FAILURE() << "installed";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(c.why), std::string::npos) << e.what();
    }
    EXPECT_EQ(stored(), std::vector<std::string>{});
    EXPECT_EQ(tree(store_root() / ".staging"), std::vector<std::string>{});
    EXPECT_FALSE(std::filesystem::exists(store_.path() / "escaped"));
    EXPECT_FALSE(std::filesystem::exists(store_root() / "escaped"));
  }
}

// What a process that died mid-install leaves in .staging goes at the next install; the
// folders of installs still running (their lock held), and a folder made a moment ago whose
// lock is not taken yet, stay.
TEST_F(StoreTest, AnInstallSweepsTheLeftoversOfDeadInstalls) {
  namespace fs = std::filesystem;
  const fs::path staging = store_root() / ".staging";
  fs::create_directories(staging);
  auto leave = [&](const std::string& name, bool with_lock) {
    fs::create_directories(staging / name / "package" / "build");
    testing::write_file(staging / name / "package" / "build" / "partial", "x");
    if (with_lock) testing::write_file(staging / (name + ".lock"), "");
  };
  leave("install-dead00", true);  // its lock file is there and nobody holds it
  leave("install-live00", true);
  leave("install-young0", false);
  leave("install-old000", false);
  const fs::path old = staging / "install-old000";
  const struct timespec times[2] = {{0, UTIME_OMIT}, {::time(nullptr) - 3600, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, old.c_str(), times, 0), 0);
  // Another install's lock: an flock on its own open file, as a live process holds it.
  const int live = ::open((staging / "install-live00.lock").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(live, 0);
  ASSERT_EQ(::flock(live, LOCK_EX | LOCK_NB), 0);

  store().install(make_package("pkg", "backplane/scale"));

  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(staging)) left.push_back(e.path().filename());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left,
            (std::vector<std::string>{"install-live00", "install-live00.lock", "install-young0"}));
  ::close(live);
  const std::vector<std::string> all = stored();
  EXPECT_NE(std::find(all.begin(), all.end(), "backplane/scale/main"), all.end())
      << "the new package is installed";
}

TEST_F(StoreTest, InstallsArchivesWithOrWithoutATopFolder) {
  const std::string metadata = testing::test_metadata().dump();
  const std::string library = testing::read_file(HUB_TEST_PACKAGE_GOOD);
  const std::vector<std::pair<const char*, std::string>> layouts = {{"top", ""},
                                                                    {"folder", "scale-1.0/"}};
  for (const auto& [name, prefix] : layouts) {
    SCOPED_TRACE(name);
    const std::filesystem::path archive = sources_.path() / (std::string(name) + ".tar.gz");
    testing::write_archive(
        archive, testing::Format::kTarGz,
        {{prefix + "README.md", Entry::kFile, "docs are not installed"},
         {prefix + "build/" + variant_ + "/metadata.json", Entry::kFile, metadata},
         {prefix + "build/" + variant_ + "/libscale.so", Entry::kFile, library, 0755}});
    InstallOptions options;
    options.revision = name;
    const InstalledPackage p = store().install(archive, options);
    EXPECT_EQ(p.variants, std::vector<std::string>{variant_});
    EXPECT_EQ(tree(p.folder), (std::vector<std::string>{"build", "build/" + variant_,
                                                        "build/" + variant_ + "/libscale.so",
                                                        "build/" + variant_ + "/metadata.json"}));
    // And what was installed loads.
    LoadOptions load = as_built("backplane/scale", name);
    load.revision = name;
    EXPECT_EQ(store().load(RepoId{"backplane", "scale"}, host(), load).kernels().size(), 1u);
  }
}

TEST_F(StoreTest, LoadingFollowsTheLockAndTrustRules) {
  const RepoId acme{"acme", "scale"};
  store().install(make_package("acme", "acme/scale"));
  const std::filesystem::path variant_folder = store_root() / "acme/scale/main/build" / variant_;
  LockFile lock;
  lock.repos["acme/scale"] =
      LockedRepo{"main", {{variant_, to_locked(digest_variant(variant_folder))}}};

  // Not locked, not trusted.
  LoadOptions options;
  try {
    store().load(acme, host(), options);
    ADD_FAILURE() << "loaded";
  } catch (const PackageError& e) {
    EXPECT_NE(std::string(e.what()).find("acme/scale@main (" + variant_ +
                                         ") is not locked and its publisher is not trusted "
                                         "(trusted by name: no publisher)"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("BACKPLANE_TRUSTED_KERNELS=acme"), std::string::npos);
  }
  // Trusted: by org, by repo id, or all.
  for (const char* entry : {"acme", "acme/scale", "*"}) {
    LoadOptions trusted;
    trusted.trust.add(entry, "test");
    EXPECT_EQ(store().load(acme, host(), trusted).kernels().size(), 1u) << entry;
  }
  // Locked: loads untrusted while the hashes match.
  options.lock = &lock;
  options.lock_source = "kernels.lock";
  EXPECT_EQ(store().load(acme, host(), options).kernels().size(), 1u);

  // One byte of the library changed: refused, naming the file, before the library is opened.
  std::string bytes = testing::read_file(variant_folder / "libscale.so");
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 1);
  testing::write_file(variant_folder / "libscale.so", bytes);
  for (bool trusted : {false, true}) {  // a lock binds even a trusted publisher
    LoadOptions o = options;
    if (trusted) o.trust.allow_all = true;
    try {
      store().load(acme, host(), o);
      ADD_FAILURE() << "loaded";
    } catch (const IntegrityError& e) {
      EXPECT_NE(std::string(e.what()).find(
                    "does not match kernels.lock: " + (variant_folder / "libscale.so").string() +
                    ": content differs"),
                std::string::npos)
          << e.what();
    }
  }

  // A lock at another revision, or without this system's variant.
  LockFile other = lock;
  other.repos["acme/scale"].revision = "v9";
  options.lock = &other;
  options.revision = "main";
  EXPECT_THROW(store().load(acme, host(), options), IntegrityError);
  other = lock;
  other.repos["acme/scale"].variants.clear();
  options.lock = &other;
  try {
    store().load(acme, host(), options);
    ADD_FAILURE() << "loaded";
  } catch (const IntegrityError& e) {
    EXPECT_NE(std::string(e.what()).find("without the variant " + variant_), std::string::npos);
  }
}

TEST_F(StoreTest, TheProjectOrgIsTrustedByTheHashesOfThisBuildNotByName) {
  store().install(make_package("scale", "backplane/scale"));
  const RepoId scale{"backplane", "scale"};
  const LoadOptions built = as_built("backplane/scale");
  EXPECT_EQ(store().load(scale, host(), built).kernels().size(), 1u);
  const TrustDecision yes =
      built.trust.decide(scale, variant_, store_root() / "backplane/scale/main/build" / variant_);
  EXPECT_TRUE(yes.trusted);
  EXPECT_NE(yes.reason.find("its files are exactly those of backplane/scale"), std::string::npos)
      << yes.reason;

  // The same package claiming another name of the trusted org, and a one-byte change: both
  // refused, naming the claim and what would be accepted.
  store().install(make_package("evil", "backplane/evil"));
  const std::filesystem::path variant_folder =
      store_root() / "backplane/scale/main/build" / variant_;
  std::string bytes = testing::read_file(variant_folder / "metadata.json");
  bytes += " ";
  for (int round = 0; round < 2; ++round) {
    const RepoId repo = round == 0 ? RepoId{"backplane", "evil"} : scale;
    if (round == 1) testing::write_file(variant_folder / "metadata.json", bytes);
    for (bool user_trusts_repo : {false, true}) {
      LoadOptions options = built;
      if (user_trusts_repo) options.trust.add("acme", "test");  // another org: no effect
      try {
        store().load(repo, host(), options);
        ADD_FAILURE() << repo.str() << " loaded";
      } catch (const PackageError& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find("kernel package " + repo.str() + "@main (" + variant_ +
                            ") claims the publisher 'backplane', which is trusted only for the "
                            "packages this build produced, by their files' hashes "
                            "(backplane/scale)"),
                  std::string::npos)
            << what;
        EXPECT_NE(what.find("when locked (kernel-hub lock)"), std::string::npos) << what;
        if (round == 1) {
          EXPECT_NE(what.find("its files differ from the one this build produced: metadata.json: "
                              "content differs"),
                    std::string::npos)
              << what;
        }
      }
    }
  }
  // A lock, or every publisher allowed, is what the user can give instead.
  LoadOptions all = built;
  all.trust.add("*", "test");
  EXPECT_EQ(store().load(RepoId{"backplane", "evil"}, host(), all).kernels().size(), 1u);
  LockFile lock;
  lock.repos["backplane/evil"] = LockedRepo{
      "main",
      {{variant_,
        to_locked(digest_variant(store_root() / "backplane/evil/main/build" / variant_))}}};
  LoadOptions locked = built;
  locked.lock = &lock;
  EXPECT_EQ(store().load(RepoId{"backplane", "evil"}, host(), locked).kernels().size(), 1u);
  // No list of this build's packages: nothing of the org loads unlocked.
  LoadOptions none;
  none.trust.own_packages = nullptr;
  EXPECT_FALSE(none.trust.decide(scale, variant_, variant_folder).trusted);
}

TEST_F(StoreTest, LoadingForADeviceChecksTheArchs) {
  store().install(make_package("scale", "backplane/scale", {{"archs", {"riscv64"}}}));
  DeviceInfo cpu;
  cpu.arch = SystemFacts::host().cpu;
  LoadOptions options = as_built("backplane/scale");
  EXPECT_EQ(store().load(RepoId{"backplane", "scale"}, host(), options).kernels().size(), 1u);
  options.device = &cpu;
  try {
    store().load(RepoId{"backplane", "scale"}, host(), options);
    ADD_FAILURE() << "loaded";
  } catch (const PackageError& e) {
    EXPECT_NE(std::string(e.what()).find("cannot run on cpu:0: the package is built for "
                                         "riscv64; cpu:0 is " +
                                         cpu.arch),
              std::string::npos)
        << e.what();
  }
}

TEST_F(StoreTest, LocalFoldersServeTheirRepoUncheckedAndAreNeverRemoved) {
  const std::filesystem::path package = make_package("dev", "acme/dev");
  LocalKernels local;
  local.repos["acme/dev"] = package;
  const Store s = store(local);
  const auto listed = s.list();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_TRUE(listed[0].local);
  EXPECT_EQ(listed[0].revision, kLocalRevision);
  EXPECT_EQ(listed[0].folder, package);
  // Untrusted org, no lock: the user's own folder loads.
  EXPECT_EQ(s.load(RepoId{"acme", "dev"}, host()).kernels().size(), 1u);
  EXPECT_EQ(s.remove(RepoId{"acme", "dev"}, std::nullopt), 0u);
  EXPECT_TRUE(std::filesystem::exists(package / "build"));

  LocalKernels missing;
  missing.repos["acme/dev"] = sources_.path() / "nowhere";
  try {
    store(missing).locate(RepoId{"acme", "dev"}, std::nullopt);
    ADD_FAILURE() << "located";
  } catch (const NotFound& e) {
    EXPECT_NE(std::string(e.what()).find("BACKPLANE_LOCAL_KERNELS points acme/dev at"),
              std::string::npos);
  }
}

TEST_F(StoreTest, NoFittingVariantListsWhatThereIs) {
  json cuda = testing::test_metadata();
  cuda["backend"] = {{"name", "cuda"}, {"version", "13.0"}};
  const std::filesystem::path package = sources_.path() / "cuda-only";
  testing::write_variant(package, "cxx11-cu130-x86_64-linux", HUB_TEST_PACKAGE_GOOD, cuda);
  store().install(package);
  SystemFacts cpu = host();
  try {
    store().load(RepoId{"backplane", "scale"}, cpu);
    ADD_FAILURE() << "loaded";
  } catch (const NotFound& e) {
    EXPECT_EQ(std::string(e.what()),
              "Cannot find a build variant for this system in backplane/scale (revision: main)\n"
              "  - cxx11-cu130-x86_64-linux: " +
                  resolve_variants({"cxx11-cu130-x86_64-linux"}, cpu).decisions[0].reason);
  }
}

}  // namespace
}  // namespace backplane::hub
