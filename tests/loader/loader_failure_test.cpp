// Plugins that fail, one failure mode per test. Each test checks that the plugin is recorded as
// failed with its specific reason, and that the good plugin in the same folder still loaded
// with its two devices: a bad plugin never breaks the others (Vulkan-Loader#1467).
#include <backplane/plugin.h>
#include <backplane/runtime/runtime.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <ostream>
#include <string>

#include "plugin_folder.hpp"

namespace backplane::testing {
namespace {

using ::testing::HasSubstr;

std::string abi(uint32_t major, uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}
const std::string kHostAbi = abi(BP_ABI_VERSION_MAJOR, BP_ABI_VERSION_MINOR);

class LoaderFailureTest : public ::testing::Test {
 protected:
  // Added after the bad plugin unless a test says otherwise, so that it proves a failure leaves
  // nothing behind for the plugins loaded later (a failed plugin's registrations of fakeaccel
  // must not be kept, or the good plugin's fakeaccel would be refused as a duplicate).
  void add_good() { dir.add_manifest("fake_good", fake_library("good"), {"fakeaccel"}); }

  void expect_failed(const Runtime& rt, const std::string& name, const std::string& reason) {
    const PluginInfo& info = plugin_named(rt, name);
    EXPECT_EQ(info.status, PluginStatus::kFailed) << describe(rt);
    EXPECT_THAT(info.error, HasSubstr(reason)) << describe(rt);
    EXPECT_TRUE(info.version.empty()) << info.version;
    // And said so in the log, as a warning naming the plugin.
    EXPECT_TRUE(dir.log().contains("warn: plugin '" + name + "' (")) << dir.log().dump();
  }

  void expect_good_loaded(const Runtime& rt) {
    const PluginInfo& good = plugin_named(rt, "fake_good");
    EXPECT_EQ(good.status, PluginStatus::kLoaded) << describe(rt);
    const std::vector<DeviceInfo> devices = rt.devices("fakeaccel");
    ASSERT_EQ(devices.size(), 2u) << describe(rt);
    for (int i = 0; i < 2; ++i) {
      EXPECT_EQ(devices[i].device, Device("fakeaccel", i));
      EXPECT_EQ(devices[i].plugin, "fake_good");
      EXPECT_EQ(devices[i].name, "Fake Accelerator " + std::to_string(i));
    }
    const BackendInfo* backend = rt.backend("fakeaccel");
    ASSERT_NE(backend, nullptr);
    EXPECT_EQ(backend->plugin, "fake_good");
  }

  PluginFolder dir;
};

// ---- Files the tests make themselves ----

TEST_F(LoaderFailureTest, MissingLibraryFile) {
  const std::filesystem::path missing = dir.path() / "libmissing.so";
  dir.add_manifest("fake_missing", missing, {"fakeaccel"});
  add_good();
  const Runtime rt = dir.open();
  expect_failed(rt, "fake_missing", "library not found: " + missing.string());
  EXPECT_EQ(plugin_named(rt, "fake_missing").library, missing);
  expect_good_loaded(rt);
}

TEST_F(LoaderFailureTest, FileThatIsNotASharedObject) {
  const std::filesystem::path text = dir.path() / "libx.so";
  std::ofstream(text) << "This is a text file, not a shared object. It is long enough to hold an "
                         "ELF header, so the loader has to read it to refuse it.\n";
  dir.add_manifest("fake_text", text, {"fakeaccel"});
  add_good();
  const Runtime rt = dir.open();
  expect_failed(rt, "fake_text", "cannot load library: ");
  // dlerror's own words, naming the file.
  expect_failed(rt, "fake_text", text.string());
  expect_failed(rt, "fake_text", "invalid ELF header");
  expect_good_loaded(rt);
}

TEST_F(LoaderFailureTest, LibraryPathIsADirectory) {
  const std::filesystem::path folder = dir.path() / "libfolder.so";
  std::filesystem::create_directory(folder);
  dir.add_manifest("fake_folder", folder, {"fakeaccel"});
  add_good();
  const Runtime rt = dir.open();
  expect_failed(rt, "fake_folder", "library is not a regular file: " + folder.string());
  expect_good_loaded(rt);
}

// ---- Bad manifests: the record is named after the file, the library never opened ----

struct BadManifest {
  const char* test_name;
  const char* text;
  const char* reason;
};

// Names the case in messages and in ctest's test names.
void PrintTo(const BadManifest& bad, std::ostream* os) {
  *os << bad.test_name;
}

class BadManifestTest : public LoaderFailureTest,
                        public ::testing::WithParamInterface<BadManifest> {};

TEST_P(BadManifestTest, FailsWithReason) {
  const std::string library = fake_library("other").string();
  std::string text = GetParam().text;
  if (const size_t at = text.find("LIBRARY"); at != std::string::npos) {
    text.replace(at, 7, library);
  }
  const std::filesystem::path manifest = dir.add_raw_manifest("00-bad.json", text);
  add_good();
  const Runtime rt = dir.open();
  expect_failed(rt, "00-bad", std::string("bad manifest: ") + GetParam().reason);
  EXPECT_EQ(plugin_named(rt, "00-bad").manifest, manifest);
  EXPECT_FALSE(dir.log().contains("plugin 'fake_other': init")) << "the library was loaded";
  expect_good_loaded(rt);
}

INSTANTIATE_TEST_SUITE_P(
    Manifests, BadManifestTest,
    ::testing::Values(
        BadManifest{"InvalidJson", R"({"file_format_version": "1.0.0", "plugin": {)",
                    "not valid JSON: "},
        BadManifest{"MissingPlugin", R"({"file_format_version": "1.0.0"})",
                    R"(missing "plugin" in the manifest)"},
        BadManifest{"MissingName",
                    R"({"file_format_version": "1.0.0", "plugin": {"library_path": "LIBRARY",
                        "abi_version": "1.1", "device_types": ["fakeother"]}})",
                    R"(missing "name" in "plugin")"},
        BadManifest{"AbiVersionNotANumber",
                    R"({"file_format_version": "1.0.0", "plugin": {"name": "fake_other",
                        "library_path": "LIBRARY", "abi_version": "one",
                        "device_types": ["fakeother"]}})",
                    R"(abi_version "one" is not MAJOR.MINOR, e.g. "1.0")"},
        BadManifest{"UnsupportedFileFormat",
                    R"({"file_format_version": "2.0.0", "plugin": {"name": "fake_other",
                        "library_path": "LIBRARY", "abi_version": "1.1",
                        "device_types": ["fakeother"]}})",
                    R"(file_format_version "2.0.0" is not supported; this core reads 1.x.y)"}),
    [](const ::testing::TestParamInfo<BadManifest>& p) { return p.param.test_name; });

TEST_F(LoaderFailureTest, ManifestMinorMustBeWhatTheLibraryReports) {
  const std::string built = "1." + std::to_string(BP_ABI_VERSION_MINOR);
  for (const char* declared : {"1.3", "1.9"}) {
    SCOPED_TRACE(declared);
    PluginFolder folder;
    folder.add_manifest("fake_other", fake_library("other"), {"fakeother"}, declared);
    const Runtime rt = folder.open();
    const PluginInfo& info = plugin_named(rt, "fake_other");
    EXPECT_EQ(info.status, PluginStatus::kFailed);
    EXPECT_EQ(info.error, std::string("the manifest declares ABI ") + declared +
                              " but the library reports ABI " + built +
                              "; a manifest's abi_version must be the ABI its library is built "
                              "against (backplane_add_plugin writes it)");
  }
}

TEST_F(LoaderFailureTest, ManifestDeclaresAbiMajor2) {
  dir.add_manifest("fake_future", fake_library("other"), {"fakeother"}, "2.0");
  add_good();
  const Runtime rt = dir.open();
  expect_failed(rt, "fake_future", "manifest declares ABI 2.0; this core loads ABI 1.x");
  EXPECT_EQ(plugin_named(rt, "fake_future").abi_version, "2.0");
  EXPECT_FALSE(dir.log().contains("plugin 'fake_future': init")) << "the library was loaded";
  expect_good_loaded(rt);
}

TEST_F(LoaderFailureTest, DuplicatePluginNameSecondFails) {
  const std::filesystem::path first =
      dir.add_manifest("fake_good", fake_library("good"), {"fakeaccel"});
  const std::filesystem::path second =
      dir.add_manifest("fake_good", fake_library("good"), {"fakeaccel"});
  const Runtime rt = dir.open();
  ASSERT_EQ(rt.plugins().size(), 2u) << describe(rt);
  EXPECT_EQ(rt.plugins()[0].manifest, first);
  EXPECT_EQ(rt.plugins()[0].status, PluginStatus::kLoaded);
  EXPECT_EQ(rt.plugins()[1].manifest, second);
  EXPECT_EQ(rt.plugins()[1].status, PluginStatus::kFailed);
  EXPECT_THAT(rt.plugins()[1].error,
              HasSubstr("a plugin named 'fake_good' is already loaded from " + first.string()));
  EXPECT_EQ(dir.log().count("plugin 'fake_good': init"), 1u) << "the second copy was loaded";
  expect_good_loaded(rt);
}

// ---- Libraries that misbehave ----

TEST_F(LoaderFailureTest, NoEntrySymbol) {
  dir.add_manifest("fake_no_entry", fake_library("no_entry"), {"fakeaccel"});
  add_good();
  const Runtime rt = dir.open();
  expect_failed(rt, "fake_no_entry",
                "not a backplane plugin: the library does not export backplane_plugin_get_api");
  expect_good_loaded(rt);
}

TEST_F(LoaderFailureTest, EntryReturnsNull) {
  dir.add_manifest("fake_entry_null", fake_library("entry_null"), {"fakeaccel"});
  add_good();
  const Runtime rt = dir.open();
  expect_failed(rt, "fake_entry_null",
                "backplane_plugin_get_api returned NULL: the plugin cannot serve a host with ABI " +
                    kHostAbi);
  expect_good_loaded(rt);
}

TEST_F(LoaderFailureTest, TableAbiMajorMismatch) {
  dir.add_manifest("fake_abi_major_2", fake_library("abi_major_2"), {"fakeaccel"});
  add_good();
  const Runtime rt = dir.open();
  expect_failed(rt, "fake_abi_major_2",
                "plugin ABI " + abi(2, BP_ABI_VERSION_MINOR) +
                    " is incompatible with this core's ABI " + kHostAbi +
                    " (major versions differ)");
  EXPECT_FALSE(dir.log().contains("plugin 'fake_abi_major_2': init")) << "init was called";
  expect_good_loaded(rt);
}

TEST_F(LoaderFailureTest, TableSmallerThanAbi10) {
  dir.add_manifest("fake_small_table", fake_library("small_table"), {"fakeaccel"});
  add_good();
  const Runtime rt = dir.open();
  expect_failed(rt, "fake_small_table",
                "plugin table is " + std::to_string(offsetof(bp_plugin_api, name)) +
                    " bytes, smaller than ABI 1.0's " + std::to_string(BP_PLUGIN_API_SIZE_1_0));
  expect_good_loaded(rt);
}

TEST_F(LoaderFailureTest, InitReturnsError) {
  dir.add_manifest("fake_init_error", fake_library("init_error"), {"fakeaccel"});
  add_good();
  const Runtime rt = dir.open();
  expect_failed(rt, "fake_init_error",
                "init failed (unavailable): fake init failure: the fake driver is not loaded");
  EXPECT_TRUE(dir.log().contains("plugin 'fake_init_error': init"));
  // After a failed init the host calls nothing else, shutdown included.
  EXPECT_FALSE(dir.log().contains("plugin 'fake_init_error': shutdown")) << dir.log().dump();
  expect_good_loaded(rt);
}

TEST_F(LoaderFailureTest, InitIgnoresRegistrarErrorStillFails) {
  dir.add_manifest("fake_ignore_error", fake_library("ignore_error"), {"fakeaccel"});
  add_good();
  const Runtime rt = dir.open();
  // The refusal is remembered even though the plugin dropped it and registered a valid
  // device 1 afterwards.
  expect_failed(rt, "fake_ignore_error",
                "init registered something invalid: device fakeaccel:1: name must not be empty");
  // init returned success, so the plugin's state is the host's to release: shutdown ran.
  EXPECT_TRUE(dir.log().contains("plugin 'fake_ignore_error': shutdown")) << dir.log().dump();
  expect_good_loaded(rt);
}

TEST_F(LoaderFailureTest, ReservedTypeNotOwned) {
  dir.add_manifest("fake_reserved_type", fake_library("reserved_type"), {"cuda"});
  add_good();
  const Runtime rt = dir.open();
  expect_failed(rt, "fake_reserved_type",
                "init failed (invalid argument): device type 'cuda' is reserved for the plugins "
                "cuda, rocm, sim");
  EXPECT_EQ(rt.backend("cuda"), nullptr);
  expect_good_loaded(rt);
}

TEST_F(LoaderFailureTest, TypeNotListedInManifest) {
  dir.add_manifest("fake_unlisted_type", fake_library("unlisted_type"), {"fakelisted"});
  add_good();
  const Runtime rt = dir.open();
  expect_failed(rt, "fake_unlisted_type",
                "device type 'fakeunlisted' is not in the manifest's device_types [fakelisted]");
  EXPECT_EQ(rt.backend("fakeunlisted"), nullptr);
  expect_good_loaded(rt);
}

TEST_F(LoaderFailureTest, TypeAlreadyProvidedByAnotherPlugin) {
  add_good();  // first this time: it owns fakeaccel
  dir.add_manifest("fake_duplicate_type", fake_library("duplicate_type"), {"fakeaccel"});
  const Runtime rt = dir.open();
  expect_failed(rt, "fake_duplicate_type",
                "device type 'fakeaccel' is already provided by plugin 'fake_good'");
  EXPECT_EQ(rt.backends().size(), 1u);
  expect_good_loaded(rt);
}

TEST_F(LoaderFailureTest, UnavailableBackendWithoutReason) {
  dir.add_manifest("fake_no_reason", fake_library("no_reason"), {"fakeaccel"});
  add_good();
  const Runtime rt = dir.open();
  expect_failed(rt, "fake_no_reason",
                "device type 'fakeaccel' is unavailable but the plugin gives no reason");
  expect_good_loaded(rt);
}

TEST_F(LoaderFailureTest, DevicesOutOfIndexOrder) {
  dir.add_manifest("fake_out_of_order", fake_library("out_of_order"), {"fakeaccel"});
  add_good();
  const Runtime rt = dir.open();
  expect_failed(rt, "fake_out_of_order",
                "device fakeaccel:1: indices must be registered in order from 0; expected "
                "fakeaccel:0");
  expect_good_loaded(rt);
}

TEST_F(LoaderFailureTest, SdkRegisterAllThrows) {
  dir.add_manifest("fake_sdk_throws", fake_library("sdk_throws"), {"fakeaccel"});
  add_good();
  std::optional<Runtime> rt;
  EXPECT_NO_THROW(rt.emplace(dir.open()));
  ASSERT_TRUE(rt.has_value());
  expect_failed(*rt, "fake_sdk_throws", "init failed (internal): boom from register_all");
  expect_good_loaded(*rt);
}

TEST_F(LoaderFailureTest, RefusedLayerKernelFailsThePluginAlone) {
  const struct {
    const char* variant;
    const char* reason;
  } cases[] = {
      {"sdk_bad_layer_kernel_1",
       "layer kernel for 'RMSNorm' on 'cuda': the device key must be the Hub key of a device "
       "type this plugin registered first"},
      {"sdk_bad_layer_kernel_2",
       "layer kernel for 'RMSNorm' on 'fakeaccel': kernel mode "
       "\"training|inference\": inference and training exclude"},
      {"sdk_bad_layer_kernel_3", "a compute-capability range applies only to cuda and rocm"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.variant);
    PluginFolder folder;
    const std::string name = std::string("fake_") + c.variant;
    folder.add_manifest(name, fake_library(c.variant), {"fakeaccel"});
    const Runtime rt = folder.open();
    const PluginInfo& info = plugin_named(rt, name);
    EXPECT_EQ(info.status, PluginStatus::kFailed);
    EXPECT_NE(info.error.find(c.reason), std::string::npos) << info.error;
    EXPECT_TRUE(rt.default_kernel_mapping().entries().empty());
  }
}

TEST_F(LoaderFailureTest, LibraryCallsItselfAnotherName) {
  dir.add_manifest("fake_wrong_name", fake_library("wrong_name"), {"fakeaccel"});
  add_good();
  const Runtime rt = dir.open();
  expect_failed(rt, "fake_wrong_name",
                "the library calls itself 'fake_impostor' but its manifest names it "
                "'fake_wrong_name'");
  EXPECT_FALSE(dir.log().contains("plugin 'fake_wrong_name': init")) << "init was called";
  expect_good_loaded(rt);
}

}  // namespace
}  // namespace backplane::testing
