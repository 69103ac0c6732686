// Loading a package variant: a real library (test_package.cpp) registers its kernel through
// the plugin ABI; a failing package throws with the package and the reason, never more.
#include <backplane/error.hpp>
#include <backplane/hub/errors.hpp>
#include <backplane/hub/package.hpp>

#include <gtest/gtest.h>

#include <functional>

#include "hub_testing.hpp"
#include "test_package_op.h"

namespace backplane::hub {
namespace {

using nlohmann::json;
using testing::TempFolder;

PackageSource write_package(const std::filesystem::path& root, const char* library,
                            const json& metadata) {
  const std::string variant = testing::host_cpu_variant();
  const std::filesystem::path folder = testing::write_variant(root, variant, library, metadata);
  return PackageSource{RepoId{"backplane", "scale"}, "main", variant, folder};
}

hub_test_scale_fn scale_function(const PackageKernel& k) {
  return reinterpret_cast<hub_test_scale_fn>(k.function);
}

TEST(LoadPackageVariant, RegistersTheKernelAndCallsIt) {
  TempFolder folder;
  const PackageSource source =
      write_package(folder.path(), HUB_TEST_PACKAGE_GOOD, testing::test_metadata());
  std::optional<LoadedPackage> package = load_package_variant(source);
  EXPECT_EQ(package->source().variant, source.variant);
  EXPECT_EQ(package->metadata().repo_id, "backplane/scale");
  ASSERT_EQ(package->kernels().size(), 1u);
  const PackageKernel& k = package->kernels().front();
  EXPECT_EQ(k.info.op, "scale");
  EXPECT_EQ(k.info.implementation, "scale_f32");
  EXPECT_EQ(k.info.device_type, "cpu");
  EXPECT_EQ(k.info.plugin, "backplane/scale@main");
  EXPECT_EQ(k.info.dtypes, std::vector<std::string>{"float32"});
  EXPECT_EQ(package->find("scale", "scale_f32"), &k);
  EXPECT_EQ(package->find("scale", "other"), nullptr);

  // The kernel keeps the library loaded after the package object is gone.
  PackageKernel kept = k;
  package.reset();
  float data[3] = {1.0f, -2.0f, 0.5f};
  EXPECT_EQ(LoadedPackage::take_status(scale_function(kept)(kept.context, data, 3, 4.0f)), "");
  EXPECT_EQ(data[0], 4.0f);
  EXPECT_EQ(data[1], -8.0f);
  EXPECT_EQ(data[2], 2.0f);
  // An error status made by the package's host API comes back readable and is freed.
  EXPECT_EQ(LoadedPackage::take_status(scale_function(kept)(kept.context, nullptr, 1, 1.0f)),
            "scale: data is NULL");
}

TEST(LoadPackageVariant, TwoLoadsOfOnePackageAreIndependent) {
  TempFolder folder;
  const PackageSource source =
      write_package(folder.path(), HUB_TEST_PACKAGE_GOOD, testing::test_metadata());
  const LoadedPackage a = load_package_variant(source);
  PackageKernel from_b = load_package_variant(source).kernels().front();  // b is gone already
  float x = 3.0f;
  EXPECT_EQ(LoadedPackage::take_status(scale_function(from_b)(from_b.context, &x, 1, 2.0f)), "");
  EXPECT_EQ(LoadedPackage::take_status(
                scale_function(a.kernels().front())(a.kernels().front().context, &x, 1, 2.0f)),
            "");
  EXPECT_EQ(x, 12.0f);
}

struct FailingCase {
  const char* name;
  const char* library;  // a test package build, or nullptr for a text file
  std::function<void(json&)> change;
  const char* why;
  bool package_error;  // PackageError; else InvalidArgument (bad metadata)
  bool remove_library = false;
};

TEST(LoadPackageVariant, AFailingPackageThrowsWithThePackageAndTheReason) {
  const std::vector<FailingCase> cases = {
      {"registers a device type", HUB_TEST_PACKAGE_ADDS_DEVICE_TYPE, [](json&) {},
       "add_device_type: a kernel package registers kernels only", true},
      {"init fails", HUB_TEST_PACKAGE_INIT_FAILS, [](json&) {},
       "init failed (unavailable): this package refuses to start", true},
      {"registers an undeclared kernel", HUB_TEST_PACKAGE_UNDECLARED_KERNEL, [](json&) {},
       "the library registers scale/scale_undeclared for cpu, which", true},
      {"declares a function it does not register", HUB_TEST_PACKAGE_GOOD,
       [](json& j) {
         json f = j["functions"][0];
         f["name"] = "scale_f64";
         j["functions"].push_back(f);
       },
       "declares function scale_f64 (scale), but the library did not register it", true},
      {"declares other dtypes", HUB_TEST_PACKAGE_GOOD,
       [](json& j) { j["functions"][0]["dtypes"] = {"float16"}; }, "with dtypes float32, but",
       true},
      {"declares another op", HUB_TEST_PACKAGE_GOOD,
       [](json& j) { j["functions"][0]["op"] = "rms_norm"; }, "declares scale_f32 as rms_norm",
       true},
      {"declares another ABI", HUB_TEST_PACKAGE_GOOD, [](json& j) { j["abi_version"] = "1.0"; },
       "says abi_version 1.0", true},
      {"library is not a shared object", nullptr, [](json&) {}, "cannot load", true},
      {"library missing", HUB_TEST_PACKAGE_GOOD, [](json&) {},
       "libscale.so named by metadata.json is missing", true, true},
      {"metadata of another repo", HUB_TEST_PACKAGE_GOOD,
       [](json& j) { j["repo_id"] = "other/scale"; },
       "repo_id: 'other/scale' but the package is installed as backplane/scale", false},
      {"metadata of another backend", HUB_TEST_PACKAGE_GOOD,
       [](json& j) {
         j["backend"] = {{"name", "cuda"}, {"version", "13.0"}};
       },
       "backend.name: 'cuda' does not match the variant folder", false},
  };
  for (const FailingCase& c : cases) {
    SCOPED_TRACE(c.name);
    TempFolder folder;
    json metadata = testing::test_metadata();
    c.change(metadata);
    PackageSource source;
    if (c.library != nullptr) {
      source = write_package(folder.path(), c.library, metadata);
    } else {
      testing::write_file(folder.path() / "text.so", "not a library");
      source = write_package(folder.path(), (folder.path() / "text.so").c_str(), metadata);
    }
    if (c.remove_library) std::filesystem::remove(source.folder / "libscale.so");
    try {
      load_package_variant(source);
      ADD_FAILURE() << "loaded";
    } catch (const PackageError& e) {
      EXPECT_TRUE(c.package_error) << e.what();
      EXPECT_EQ(std::string(e.what()).rfind(
                    "kernel package backplane/scale@main (" + source.variant + "): ", 0),
                0u)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(c.why), std::string::npos) << e.what();
    } catch (const InvalidArgument& e) {
      EXPECT_FALSE(c.package_error) << e.what();
      EXPECT_NE(std::string(e.what()).find("metadata.json"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(c.why), std::string::npos) << e.what();
    }
  }
}

TEST(LoadPackageVariant, TheLibraryLogsThroughTheSinkAtTheLevelAsked) {
  TempFolder folder;
  const PackageSource source =
      write_package(folder.path(), HUB_TEST_PACKAGE_GOOD, testing::test_metadata());
  for (LogLevel level : {LogLevel::kDebug, LogLevel::kWarn}) {
    PackageLoadOptions options;
    options.log_level = level;
    std::vector<std::string> lines;
    options.log_sink = [&](LogLevel, const std::string& line) { lines.push_back(line); };
    load_package_variant(source, options);
    if (level == LogLevel::kDebug) {
      EXPECT_EQ(lines, std::vector<std::string>{
                           "kernel package 'backplane/scale@main': registering scale_f32"});
    } else {
      EXPECT_TRUE(lines.empty());
    }
  }
}

}  // namespace
}  // namespace backplane::hub
