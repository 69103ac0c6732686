// kernel-hub end to end on a package built by the tests: install, list, show, resolve --load
// (the library really loads and registers its kernel), lock, verify (a tampered byte is named),
// remove, and the exit codes.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>

#include "hub_testing.hpp"

namespace backplane::hub {
namespace {

using nlohmann::json;
using testing::TempFolder;

struct Result {
  int rc = -1;
  std::string out;
  std::string err;
};

class KernelHubCli : public ::testing::Test {
 protected:
  // Runs kernel-hub with the store in this test's folder and only the cpu plugin.
  Result run(const std::string& args, const std::string& env = "") {
    const std::string err_file = (folder_.path() / "stderr.txt").string();
    const std::string command = "env BACKPLANE_HUB_CACHE='" + store_root().string() +
                                "' BACKPLANE_PLUGINS=cpu " + env + " '" + KERNEL_HUB + "' " + args +
                                " 2>'" + err_file + "'";
    Result r;
    FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr) return r;
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) r.out.append(buffer, n);
    const int status = ::pclose(pipe);
    r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.err = testing::read_file(err_file);
    return r;
  }
  std::filesystem::path store_root() const { return folder_.path() / "store"; }
  std::string quoted(const std::filesystem::path& p) const { return "'" + p.string() + "'"; }

  TempFolder folder_;
  const std::string variant_ = testing::host_cpu_variant();
};

TEST_F(KernelHubCli, InstallListShowResolveLockVerifyRemove) {
  const std::filesystem::path package = folder_.path() / "src";
  testing::write_variant(package, variant_, HUB_TEST_PACKAGE_GOOD,
                         testing::test_metadata("acme/scale"));

  Result r = run("install " + quoted(package) + " --revision v1 --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  json j = json::parse(r.out);
  EXPECT_EQ(j["repo"], "acme/scale");
  EXPECT_EQ(j["revision"], "v1");
  EXPECT_EQ(j["variants"], json::array({variant_}));

  r = run("list --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  j = json::parse(r.out);
  EXPECT_EQ(j["store"], store_root().string());
  ASSERT_EQ(j["packages"].size(), 1u);
  EXPECT_EQ(j["packages"][0]["repo"], "acme/scale");
  EXPECT_EQ(j["packages"][0]["local"], false);
  r = run("list");
  EXPECT_NE(r.out.find("acme/scale  v1        " + variant_), std::string::npos) << r.out;

  r = run("show acme/scale --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  j = json::parse(r.out);
  const json& v = j["revisions"][0]["variants"][0];
  EXPECT_EQ(v["variant"], variant_);
  EXPECT_EQ(v["license"], "Apache-2.0");
  EXPECT_EQ(v["functions"][0]["op"], "scale");
  EXPECT_EQ(v["layers"][0]["name"], "Scale");
  EXPECT_EQ(v["trust"]["without_lock"], false);
  r = run("show acme/scale", "BACKPLANE_TRUSTED_KERNELS=acme");
  EXPECT_NE(r.out.find("    loads without a lock: yes, its publisher is trusted by name (acme); "
                       "the name is the one its metadata.json gives\n"),
            std::string::npos)
      << r.out;

  // resolve: the variant and why; with --load the library registers its kernel, but only when
  // the publisher is trusted or the package is locked.
  r = run("resolve acme/scale --device cpu --json");
  ASSERT_EQ(r.rc, 0) << r.err;
  j = json::parse(r.out);
  EXPECT_EQ(j["variant"], variant_);
  EXPECT_EQ(j["device"], "cpu:0");
  EXPECT_EQ(j["system"]["backend"], "cpu");
  EXPECT_EQ(j["decisions"][0]["accepted"], true);
  r = run("resolve acme/scale --device cpu --load");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("its publisher is not trusted"), std::string::npos) << r.err;
  r = run("resolve acme/scale --device cpu --load --json", "BACKPLANE_TRUSTED_KERNELS=acme");
  ASSERT_EQ(r.rc, 0) << r.err;
  j = json::parse(r.out);
  ASSERT_EQ(j["kernels"].size(), 1u);
  EXPECT_EQ(j["kernels"][0]["op"], "scale");
  EXPECT_EQ(j["kernels"][0]["implementation"], "scale_f32");

  // lock, then load under the lock without trusting the publisher.
  testing::write_file(folder_.path() / "kernels.json", R"({"kernels": {"acme/scale": "v1"}})");
  const std::filesystem::path lock = folder_.path() / "kernels.lock";
  r = run("lock " + quoted(folder_.path() / "kernels.json") + " -o " + quoted(lock));
  ASSERT_EQ(r.rc, 0) << r.err;
  const LockFile locked = LockFile::read(lock);
  ASSERT_NE(locked.find(RepoId{"acme", "scale"}), nullptr);
  EXPECT_EQ(locked.find(RepoId{"acme", "scale"})->variants.count(variant_), 1u);
  r = run("verify " + quoted(lock));
  EXPECT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("ok        acme/scale@v1 " + variant_), std::string::npos) << r.out;
  r = run("resolve acme/scale --device cpu --load --lock " + quoted(lock));
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("scale/scale_f32 on cpu"), std::string::npos) << r.out;

  // One byte of metadata.json changed: verify and a locked load both name the file.
  const std::filesystem::path metadata =
      store_root() / "acme/scale/v1/build" / variant_ / "metadata.json";
  std::string text = testing::read_file(metadata);
  text.back() = text.back() == ' ' ? '\n' : ' ';
  testing::write_file(metadata, text);
  r = run("verify " + quoted(lock) + " --json");
  EXPECT_EQ(r.rc, 1);
  j = json::parse(r.out);
  EXPECT_EQ(j["ok"], false);
  EXPECT_NE(j["variants"][0]["problems"][0].get<std::string>().find(metadata.string() +
                                                                    ": content differs"),
            std::string::npos)
      << r.out;
  r = run("resolve acme/scale --device cpu --load --lock " + quoted(lock));
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find(metadata.string() + ": content differs"), std::string::npos) << r.err;

  r = run("remove acme/scale");
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "removed 1 revision of acme/scale\n");
  r = run("remove acme/scale");
  EXPECT_EQ(r.rc, 1);
  r = run("list --json");
  EXPECT_EQ(json::parse(r.out)["packages"].size(), 0u);
}

TEST_F(KernelHubCli, ExitCodesSayWhatWentWrong) {
  struct Case {
    const char* args;
    const char* env;
    int rc;
    const char* err;
  };
  const Case cases[] = {
      {"", "", 2, ""},
      {"frobnicate", "", 2, "unknown command 'frobnicate'"},
      {"install", "", 2, "expected one PATH_OR_ARCHIVE"},
      {"install /nonexistent/package", "", 2, "no such file or folder"},
      {"show not-a-repo", "", 2, "is not a kernel repository id"},
      {"show acme/none", "", 1, "is not installed"},
      {"resolve acme/none --device cpu", "", 1, "is not installed"},
      {"resolve acme/none --device cpu --lock x", "", 2, "--lock is used only with --load"},
      {"list --bogus", "", 2, "unrecognised option '--bogus'"},
      {"list", "BACKPLANE_LOCAL_KERNELS=acme/x", 2, "BACKPLANE_LOCAL_KERNELS: item 'acme/x'"},
      {"list", "BACKPLANE_HUB_CACHE=relative", 2, "BACKPLANE_HUB_CACHE: 'relative'"},
      {"verify /nonexistent.lock", "", 2, "/nonexistent.lock"},
      {"remove acme/none --revision ../x", "", 2, "revision '../x'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    const Result r = run(c.args, c.env);
    EXPECT_EQ(r.rc, c.rc) << r.out << r.err;
    EXPECT_NE(r.err.find(c.err), std::string::npos) << r.err;
  }
}

TEST_F(KernelHubCli, APackageClaimingTheProjectOrgIsNotTrustedForItsName) {
  // The test package is not one this build produced, whatever org it names.
  const std::filesystem::path package = folder_.path() / "src";
  testing::write_variant(package, variant_, HUB_TEST_PACKAGE_GOOD,
                         testing::test_metadata("backplane/evil"));
  ASSERT_EQ(run("install " + quoted(package)).rc, 0);
  Result r = run("resolve backplane/evil --device cpu --load");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("kernel package backplane/evil@main (" + variant_ +
                       ") claims the publisher 'backplane', which is trusted only for the "
                       "packages this build produced"),
            std::string::npos)
      << r.err;
  r = run("show backplane/evil");
  EXPECT_NE(r.out.find("    loads without a lock: no, it claims the publisher 'backplane'"),
            std::string::npos)
      << r.out;
  r = run("resolve backplane/evil --device cpu --load", "BACKPLANE_TRUSTED_KERNELS=backplane");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("BACKPLANE_TRUSTED_KERNELS: 'backplane' cannot be trusted by name"),
            std::string::npos)
      << r.err;
}

TEST_F(KernelHubCli, ResolveExplainsWhyNothingFits) {
  const std::filesystem::path package = folder_.path() / "src";
  json cuda = testing::test_metadata();
  cuda["backend"] = {{"name", "cuda"}, {"version", "13.0"}};
  testing::write_variant(package, "cxx11-cu130-x86_64-linux", HUB_TEST_PACKAGE_GOOD, cuda);
  ASSERT_EQ(run("install " + quoted(package)).rc, 0);
  const Result r = run("resolve backplane/scale --device cpu");
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("Cannot find a build variant for this system in backplane/scale "
                       "(revision: main)\n  - cxx11-cu130-x86_64-linux: "),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace backplane::hub
