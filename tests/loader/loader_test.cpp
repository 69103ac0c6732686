// Plugins that load: what they register, how ABI minor versions mix, plugin selection, search
// order, the runtime's queries and errors, and the runtime's life cycle.
#include <backplane/plugin.h>
#include <backplane/error.hpp>
#include <backplane/rules/device.hpp>
#include <backplane/runtime/runtime.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "plugin_folder.hpp"

namespace backplane::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr uint64_t kGiB = uint64_t{1} << 30;

class LoaderTest : public ::testing::Test {
 protected:
  void add_good() { dir.add_manifest("fake_good", fake_library("good"), {"fakeaccel"}); }
  void add_other() { dir.add_manifest("fake_other", fake_library("other"), {"fakeother"}); }

  PluginFolder dir;
};

// The two devices every good fake plugin registers, as fake_plugin.c describes them.
// `visibility` is what an ABI 1.2 plugin says; older plugins cannot say it.
void expect_fake_devices(const std::vector<DeviceInfo>& devices, const std::string& type,
                         const std::string& plugin,
                         const std::string& visibility = "FAKE_VISIBLE_DEVICES") {
  ASSERT_EQ(devices.size(), 2u);
  for (int i = 0; i < 2; ++i) {
    SCOPED_TRACE("device " + std::to_string(i));
    const DeviceInfo& d = devices[i];
    EXPECT_EQ(d.device, Device(type, i));
    EXPECT_EQ(d.plugin, plugin);
    EXPECT_EQ(d.name, "Fake Accelerator " + std::to_string(i));
    EXPECT_EQ(d.vendor, "Fakes Inc");
    EXPECT_EQ(d.uuid, "fake-uuid-" + std::to_string(i));
    EXPECT_EQ(d.pci_bus_id, i == 0 ? "0000:f0:00.0" : "0000:f1:00.0");
    EXPECT_EQ(d.arch, "fake_v1");
    ASSERT_TRUE(d.compute_capability.has_value());
    EXPECT_EQ(*d.compute_capability, (ComputeCapability{9, i}));
    EXPECT_EQ(d.physical_index, i + 4);
    EXPECT_EQ(d.memory_total, (16 * kGiB) >> i);
    EXPECT_EQ(d.capabilities, uint64_t{kCapFp16 | kCapBf16});
    EXPECT_TRUE(d.has(kCapBf16));
    EXPECT_FALSE(d.has(kCapFp8));
    EXPECT_TRUE(d.simulated);
    EXPECT_EQ(d.visibility_variable, visibility);
    // One property of every bp_value_kind, in registration order.
    ASSERT_EQ(d.properties.size(), 6u);
    EXPECT_EQ(d.properties[0].name, "driver");
    EXPECT_EQ(std::get<std::string>(d.properties[0].value), "fakedrv 1.2");
    EXPECT_EQ(d.properties[1].name, "cores");
    EXPECT_EQ(std::get<int64_t>(d.properties[1].value), 128 * (i + 1));
    EXPECT_EQ(d.properties[2].name, "clock_ghz");
    EXPECT_EQ(std::get<double>(d.properties[2].value), 1.5);
    EXPECT_EQ(d.properties[3].name, "ecc");
    EXPECT_EQ(std::get<bool>(d.properties[3].value), i == 0);
    EXPECT_EQ(d.properties[4].name, "links");
    EXPECT_THAT(std::get<std::vector<std::string>>(d.properties[4].value),
                ElementsAre("fakelink0", "fakelink1"));
    EXPECT_EQ(d.properties[5].name, "peers");
    EXPECT_TRUE(std::get<std::vector<std::string>>(d.properties[5].value).empty());
  }
}

// ---- What a good plugin registers ----

TEST_F(LoaderTest, GoodPluginRecord) {
  add_good();
  const Runtime rt = dir.open();
  ASSERT_EQ(rt.plugins().size(), 1u);
  const PluginInfo& info = rt.plugins()[0];
  EXPECT_EQ(info.name, "fake_good");
  EXPECT_EQ(info.status, PluginStatus::kLoaded) << info.error;
  EXPECT_TRUE(info.error.empty()) << info.error;
  EXPECT_EQ(info.version, "9.8.7-fake");
  EXPECT_EQ(info.abi_version, "1." + std::to_string(BP_ABI_VERSION_MINOR));  // the plugin's
  EXPECT_EQ(info.library, fake_library("good"));
  EXPECT_EQ(info.manifest.parent_path(), dir.path());
  EXPECT_THAT(info.device_types, ElementsAre("fakeaccel"));
  EXPECT_STREQ(to_string(info.status), "loaded");
}

TEST_F(LoaderTest, GoodPluginBackend) {
  add_good();
  const Runtime rt = dir.open();
  ASSERT_EQ(rt.backends().size(), 1u);
  const BackendInfo& b = rt.backends()[0];
  EXPECT_EQ(&b, rt.backend("fakeaccel"));
  EXPECT_EQ(b.type, "fakeaccel");
  EXPECT_EQ(b.plugin, "fake_good");
  EXPECT_EQ(b.hub_key, "fakeaccel");  // NULL in the descriptor: the type's own name
  EXPECT_EQ(b.collective_backend, "fakeccl");
  EXPECT_EQ(b.training_priority, 55);
  EXPECT_TRUE(b.accelerator);
  EXPECT_TRUE(b.automatic_placement);
  EXPECT_TRUE(b.available);
  EXPECT_TRUE(b.unavailable_reason.empty());
  EXPECT_EQ(rt.backend("fakeother"), nullptr);
}

TEST_F(LoaderTest, GoodPluginDevices) {
  add_good();
  const Runtime rt = dir.open();
  expect_fake_devices(rt.devices(), "fakeaccel", "fake_good");
  expect_fake_devices(rt.devices("fakeaccel"), "fakeaccel", "fake_good");
  EXPECT_TRUE(rt.devices("fakeother").empty());
}

TEST_F(LoaderTest, PluginLogsThroughHostUnderItsName) {
  add_good();
  { const Runtime rt = dir.open(); }
  EXPECT_EQ(dir.log().count("info: plugin 'fake_good': init"), 1u) << dir.log().dump();
  EXPECT_EQ(dir.log().count("info: plugin 'fake_good': shutdown"), 1u) << dir.log().dump();
  EXPECT_TRUE(dir.log().contains("info: plugin 'fake_good' 9.8.7-fake loaded from"));
}

TEST_F(LoaderTest, TwoPluginsCoexist) {
  add_good();
  add_other();
  const Runtime rt = dir.open();
  ASSERT_EQ(rt.plugins().size(), 2u);
  for (const PluginInfo& p : rt.plugins()) EXPECT_EQ(p.status, PluginStatus::kLoaded) << p.error;
  ASSERT_EQ(rt.backends().size(), 2u);
  EXPECT_EQ(rt.backends()[0].type, "fakeaccel");
  EXPECT_EQ(rt.backends()[1].type, "fakeother");
  EXPECT_EQ(rt.backend("fakeother")->plugin, "fake_other");
  // Grouped by backend in load order, then by index.
  ASSERT_EQ(rt.devices().size(), 4u);
  EXPECT_EQ(rt.devices()[0].device, Device("fakeaccel", 0));
  EXPECT_EQ(rt.devices()[1].device, Device("fakeaccel", 1));
  EXPECT_EQ(rt.devices()[2].device, Device("fakeother", 0));
  EXPECT_EQ(rt.devices()[3].device, Device("fakeother", 1));
  expect_fake_devices(rt.devices("fakeaccel"), "fakeaccel", "fake_good");
  expect_fake_devices(rt.devices("fakeother"), "fakeother", "fake_other");
}

TEST_F(LoaderTest, RelativeLibraryPathResolvesAgainstManifestFolder) {
  std::filesystem::copy_file(fake_library("good"), dir.path() / "libcopy.so");
  dir.add_manifest("fake_good", "libcopy.so", {"fakeaccel"});
  const Runtime rt = dir.open();
  const PluginInfo& info = plugin_named(rt, "fake_good");
  EXPECT_EQ(info.status, PluginStatus::kLoaded) << info.error;
  EXPECT_EQ(info.library, dir.path() / "libcopy.so");
  EXPECT_EQ(rt.devices("fakeaccel").size(), 2u);
}

// ---- ABI minor versions ----

TEST_F(LoaderTest, NewerMinorPluginLoadsAndExtraFieldsAreIgnored) {
  dir.add_manifest("fake_newer_minor", fake_library("newer_minor"), {"fakeaccel"},
                   "1." + std::to_string(BP_ABI_VERSION_MINOR + 1));
  const Runtime rt = dir.open();
  const PluginInfo& info = plugin_named(rt, "fake_newer_minor");
  ASSERT_EQ(info.status, PluginStatus::kLoaded) << info.error;
  const std::string newer = "1." + std::to_string(BP_ABI_VERSION_MINOR + 1);
  EXPECT_EQ(info.abi_version, newer);
  EXPECT_TRUE(dir.log().contains("plugin 'fake_newer_minor' is built for ABI " + newer +
                                 "; using the parts of ABI 1." +
                                 std::to_string(BP_ABI_VERSION_MINOR)))
      << dir.log().dump();
  expect_fake_devices(rt.devices(), "fakeaccel", "fake_newer_minor");
  const BackendInfo* b = rt.backend("fakeaccel");
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(b->available);
  EXPECT_TRUE(b->unavailable_reason.empty());
  // memory_info sits where ABI 1.1 put it, before the fields this host does not know.
  const std::optional<MemoryInfo> memory = rt.memory_info(Device("fakeaccel", 0));
  ASSERT_TRUE(memory.has_value());
  EXPECT_EQ(memory->total_bytes, 16 * kGiB);
}

TEST_F(LoaderTest, OlderMinorPluginLoadsWithoutMemoryInfo) {
  dir.add_manifest("fake_abi_1_0", fake_library("abi_1_0"), {"fakeaccel"}, "1.0");
  {
    const Runtime rt = dir.open();
    const PluginInfo& info = plugin_named(rt, "fake_abi_1_0");
    ASSERT_EQ(info.status, PluginStatus::kLoaded) << info.error;
    EXPECT_EQ(info.abi_version, "1.0");  // what the plugin's table says
    // Fields past the plugin's descriptors (1.2's visibility_variable) read as empty.
    expect_fake_devices(rt.devices(), "fakeaccel", "fake_abi_1_0", "");
    // No memory_info in an ABI 1.0 table: the host must not read past it.
    EXPECT_EQ(rt.memory_info(Device("fakeaccel", 0)), std::nullopt);
    EXPECT_EQ(rt.memory_info(Device("fakeaccel", 1)), std::nullopt);
  }
  EXPECT_EQ(dir.log().count("plugin 'fake_abi_1_0': shutdown"), 1u) << dir.log().dump();
}

// ---- Selection ----

TEST_F(LoaderTest, OnlyPluginsDisablesTheOthers) {
  add_good();
  add_other();
  RuntimeOptions options = dir.options();
  options.only_plugins = std::vector<std::string>{"fake_good"};
  const Runtime rt = Runtime::open(options);
  EXPECT_EQ(plugin_named(rt, "fake_good").status, PluginStatus::kLoaded);
  const PluginInfo& other = plugin_named(rt, "fake_other");
  EXPECT_EQ(other.status, PluginStatus::kDisabled);
  EXPECT_EQ(other.error, "not among the selected plugins (fake_good)");
  EXPECT_STREQ(to_string(other.status), "disabled");
  EXPECT_FALSE(dir.log().contains("plugin 'fake_other': init")) << "a disabled plugin was loaded";
  EXPECT_EQ(rt.devices().size(), 2u);
  EXPECT_EQ(rt.backend("fakeother"), nullptr);
}

TEST_F(LoaderTest, DisabledPluginsAreNotLoaded) {
  add_good();
  add_other();
  RuntimeOptions options = dir.options();
  options.disabled_plugins = {"fake_other"};
  const Runtime rt = Runtime::open(options);
  EXPECT_EQ(plugin_named(rt, "fake_good").status, PluginStatus::kLoaded);
  const PluginInfo& other = plugin_named(rt, "fake_other");
  EXPECT_EQ(other.status, PluginStatus::kDisabled);
  EXPECT_EQ(other.error, "disabled by request");
  EXPECT_FALSE(dir.log().contains("plugin 'fake_other': init")) << "a disabled plugin was loaded";
  expect_fake_devices(rt.devices(), "fakeaccel", "fake_good");
}

TEST_F(LoaderTest, SelectedPluginWithoutManifestIsWarnedAbout) {
  add_good();
  RuntimeOptions options = dir.options();
  options.only_plugins = std::vector<std::string>{"fake_good", "fake_nowhere"};
  const Runtime rt = Runtime::open(options);
  EXPECT_EQ(plugin_named(rt, "fake_good").status, PluginStatus::kLoaded);
  EXPECT_TRUE(
      dir.log().contains("warn: plugin 'fake_nowhere' was selected but no manifest names it"))
      << dir.log().dump();
}

// ---- Search path ----

class SearchPathTest : public ::testing::Test {
 protected:
  // Two folders with a plugin of the same name: whichever is searched first wins.
  SearchPathTest() {
    first_manifest = first.add_manifest("fake_good", fake_library("good"), {"fakeaccel"});
    second_manifest = second.add_manifest("fake_good", fake_library("good"), {"fakeaccel"});
  }

  // Only fake_good is loaded: the default folder's real plugins are recorded, not loaded, so
  // these tests do not depend on them.
  RuntimeOptions options() const {
    RuntimeOptions o;
    o.only_plugins = std::vector<std::string>{"fake_good"};
    o.log_level = LogLevel::kDebug;
    o.log_sink = [log = first.shared_log()](LogLevel l, const std::string& line) {
      log->add(l, line);
    };
    return o;
  }

  // The plugin that loaded from `winner`, and the one that lost to it from `loser`.
  static void expect_winner(const Runtime& rt, const std::filesystem::path& winner,
                            const std::filesystem::path& loser) {
    std::vector<const PluginInfo*> ours;
    for (const PluginInfo& p : rt.plugins()) {
      if (p.name == "fake_good") ours.push_back(&p);
    }
    ASSERT_EQ(ours.size(), 2u) << describe(rt);
    EXPECT_EQ(ours[0]->manifest, winner);
    EXPECT_EQ(ours[0]->status, PluginStatus::kLoaded) << ours[0]->error;
    EXPECT_EQ(ours[1]->manifest, loser);
    EXPECT_EQ(ours[1]->status, PluginStatus::kFailed);
    EXPECT_THAT(ours[1]->error, HasSubstr("already loaded from " + winner.string()));
  }

  PluginFolder first;
  PluginFolder second;
  std::filesystem::path first_manifest;
  std::filesystem::path second_manifest;
};

TEST_F(SearchPathTest, AddPluginPathIsSearchedBeforeTheDefaultFolder) {
  RuntimeOptions o = options();
  o.add_plugin_path = {first.path(), second.path()};
  const Runtime rt = Runtime::open(o);
  EXPECT_THAT(rt.search_path(),
              ElementsAre(first.path(), second.path(), default_plugin_directory()));
  expect_winner(rt, first_manifest, second_manifest);
}

TEST_F(SearchPathTest, AddPluginPathOrderIsKept) {
  RuntimeOptions o = options();
  o.add_plugin_path = {second.path(), first.path()};
  const Runtime rt = Runtime::open(o);
  EXPECT_THAT(rt.search_path(),
              ElementsAre(second.path(), first.path(), default_plugin_directory()));
  expect_winner(rt, second_manifest, first_manifest);
}

TEST_F(SearchPathTest, PluginPathReplacesEverything) {
  RuntimeOptions o = options();
  o.plugin_path = std::vector<std::filesystem::path>{second.path()};
  o.add_plugin_path = {first.path()};  // ignored with plugin_path
  const Runtime rt = Runtime::open(o);
  EXPECT_THAT(rt.search_path(), ElementsAre(second.path()));
  // Only the one folder: not the first, not the default folder's real plugins.
  ASSERT_EQ(rt.plugins().size(), 1u) << describe(rt);
  EXPECT_EQ(rt.plugins()[0].manifest, second_manifest);
  EXPECT_EQ(rt.plugins()[0].status, PluginStatus::kLoaded);
}

TEST_F(SearchPathTest, EmptyPluginPathLoadsNothing) {
  RuntimeOptions o = options();
  o.plugin_path = std::vector<std::filesystem::path>{};
  const Runtime rt = Runtime::open(o);
  EXPECT_TRUE(rt.search_path().empty());
  EXPECT_TRUE(rt.plugins().empty());
  EXPECT_TRUE(rt.devices().empty());
  EXPECT_TRUE(rt.backends().empty());
}

TEST_F(SearchPathTest, ManifestFileEntriesAndDuplicatesListedOnce) {
  RuntimeOptions o = options();
  // A file entry, then the folder that holds it: the manifest is found once.
  o.plugin_path = std::vector<std::filesystem::path>{second_manifest, second.path()};
  const Runtime rt = Runtime::open(o);
  ASSERT_EQ(rt.plugins().size(), 1u) << describe(rt);
  EXPECT_EQ(rt.plugins()[0].status, PluginStatus::kLoaded);
}

TEST_F(SearchPathTest, MissingEntryIsSkipped) {
  RuntimeOptions o = options();
  const std::filesystem::path missing = first.path() / "no-such-folder";
  o.plugin_path = std::vector<std::filesystem::path>{missing, second.path()};
  const Runtime rt = Runtime::open(o);
  ASSERT_EQ(rt.plugins().size(), 1u) << describe(rt);
  EXPECT_EQ(rt.plugins()[0].status, PluginStatus::kLoaded);
  EXPECT_TRUE(first.log().contains("warn: plugin search path entry " + missing.string() +
                                   " does not exist; skipped (check BACKPLANE_PLUGIN_PATH"))
      << first.log().dump();
}

TEST_F(SearchPathTest, NonJsonFilesInAFolderAreIgnored) {
  second.add_raw_manifest("README.txt", "not a manifest");
  second.add_raw_manifest("fake.json.bak", "{");
  RuntimeOptions o = options();
  o.plugin_path = std::vector<std::filesystem::path>{second.path()};
  const Runtime rt = Runtime::open(o);
  ASSERT_EQ(rt.plugins().size(), 1u) << describe(rt);
  EXPECT_EQ(rt.plugins()[0].status, PluginStatus::kLoaded);
}

// ---- Queries and their errors ----

TEST_F(LoaderTest, DeviceLookup) {
  add_good();
  const Runtime rt = dir.open();
  EXPECT_EQ(rt.device(Device("fakeaccel", 1)).name, "Fake Accelerator 1");
  // No index means index 0.
  EXPECT_EQ(rt.device(Device("fakeaccel")).device, Device("fakeaccel", 0));
  // The reference points into the snapshot.
  EXPECT_EQ(&rt.device(Device("fakeaccel", 1)), &rt.devices()[1]);
}

TEST_F(LoaderTest, DeviceNotFoundListsPresentDevices) {
  add_good();
  const Runtime rt = dir.open();
  try {
    rt.device(Device("fakeaccel", 5));
    FAIL() << "expected NotFound";
  } catch (const NotFound& e) {
    EXPECT_STREQ(e.what(), "device fakeaccel:5 does not exist; present: fakeaccel:0, fakeaccel:1");
  }
  try {
    rt.device(Device("fakeother", 0));
    FAIL() << "expected NotFound";
  } catch (const NotFound& e) {
    EXPECT_STREQ(e.what(), "no fakeother devices are present, so fakeother:0 cannot be used");
  }
}

TEST_F(LoaderTest, UnavailableBackend) {
  dir.add_manifest("fake_unavailable", fake_library("unavailable"), {"fakeoff"});
  add_good();
  const Runtime rt = dir.open();
  EXPECT_EQ(plugin_named(rt, "fake_unavailable").status, PluginStatus::kLoaded);
  const BackendInfo* b = rt.backend("fakeoff");
  ASSERT_NE(b, nullptr);
  EXPECT_FALSE(b->available);
  EXPECT_EQ(b->unavailable_reason, "the fake driver is not installed (install fakedrv 1.2)");
  EXPECT_TRUE(rt.devices("fakeoff").empty());
  try {
    rt.device(Device("fakeoff", 0));
    FAIL() << "expected Unavailable";
  } catch (const Unavailable& e) {
    EXPECT_STREQ(e.what(),
                 "device fakeoff:0 is unavailable: the fake driver is not installed (install "
                 "fakedrv 1.2)");
  }
  EXPECT_THROW(rt.memory_info(Device("fakeoff")), Unavailable);
  EXPECT_TRUE(dir.log().contains(
      "backend 'fakeoff' from plugin 'fake_unavailable': unavailable: the fake driver"))
      << dir.log().dump();
  expect_fake_devices(rt.devices(), "fakeaccel", "fake_good");
}

TEST_F(LoaderTest, ParseDeviceKnowsPluginTypes) {
  add_good();
  const Runtime rt = dir.open();
  const std::vector<std::string> types = rt.device_types();
  EXPECT_NE(std::find(types.begin(), types.end(), "fakeaccel"), types.end());
  EXPECT_NE(std::find(types.begin(), types.end(), "cuda"), types.end());  // builtin
  EXPECT_EQ(rt.parse_device("fakeaccel:1"), Device("fakeaccel", 1));
  EXPECT_EQ(rt.parse_device("fakeaccel"), Device("fakeaccel"));
  // Unknown without the plugin, and to a runtime without it.
  EXPECT_THROW(parse_device("fakeaccel:1"), InvalidArgument);
  EXPECT_THROW(rt.parse_device("fakeother:0"), InvalidArgument);
  EXPECT_THROW(rt.parse_device("FAKEACCEL:0"), InvalidArgument);
}

TEST_F(LoaderTest, MemoryInfo) {
  add_good();
  add_other();
  const Runtime rt = dir.open();
  const std::optional<MemoryInfo> m0 = rt.memory_info(Device("fakeaccel", 0));
  ASSERT_TRUE(m0.has_value());
  EXPECT_EQ(m0->total_bytes, 16 * kGiB);
  EXPECT_EQ(m0->free_bytes, 15 * kGiB);
  const std::optional<MemoryInfo> m1 = rt.memory_info(Device("fakeaccel", 1));
  ASSERT_TRUE(m1.has_value());
  EXPECT_EQ(m1->total_bytes, 8 * kGiB);
  EXPECT_EQ(m1->free_bytes, 6 * kGiB);
  EXPECT_THROW(rt.memory_info(Device("fakeaccel", 2)), NotFound);
  EXPECT_THROW(rt.memory_info(Device("nosuchtype", 0)), NotFound);
}

TEST_F(LoaderTest, MemoryInfoFailureIsNulloptAndLogged) {
  add_other();
  const Runtime rt = dir.open();
  EXPECT_EQ(rt.memory_info(Device("fakeother", 1)), std::nullopt);
  EXPECT_TRUE(dir.log().contains(
      "warn: plugin 'fake_other': memory_info(fakeother:1) failed: fake memory counters are "
      "offline"))
      << dir.log().dump();
}

TEST_F(LoaderTest, SdkMemoryInfoExceptionBecomesNullopt) {
  dir.add_manifest("fake_sdk_memory_throws", fake_library("sdk_memory_throws"), {"fakeaccel"});
  const Runtime rt = dir.open();
  ASSERT_EQ(plugin_named(rt, "fake_sdk_memory_throws").status, PluginStatus::kLoaded);
  ASSERT_EQ(rt.devices().size(), 1u);
  std::optional<MemoryInfo> memory;
  EXPECT_NO_THROW(memory = rt.memory_info(Device("fakeaccel", 0)));
  EXPECT_EQ(memory, std::nullopt);
  EXPECT_TRUE(dir.log().contains("memory_info(fakeaccel:0) failed: boom from memory_info"))
      << dir.log().dump();
}

TEST_F(LoaderTest, DefaultLayerKernelsReachTheMapping) {
  dir.add_manifest("fake_sdk_layer_kernels", fake_library("sdk_layer_kernels"), {"fakeaccel"});
  const Runtime rt = dir.open();
  ASSERT_EQ(plugin_named(rt, "fake_sdk_layer_kernels").status, PluginStatus::kLoaded);
  const backplane::KernelMapping mapping = rt.default_kernel_mapping();
  ASSERT_EQ(mapping.entries().size(), 2u);
  EXPECT_EQ(mapping.entries()[0].source, "fake_sdk_layer_kernels");
  EXPECT_EQ(mapping.entries()[0].kernel.version, 1);
  auto choice =
      mapping.lookup("RMSNorm", "fakeaccel", std::nullopt, backplane::KernelMode::inference());
  ASSERT_TRUE(choice.entry);
  EXPECT_EQ(choice.entry->kernel.str(), "fake/norm:Fast");
  choice = mapping.lookup("RMSNorm", "fakeaccel", std::nullopt, backplane::KernelMode::training());
  ASSERT_TRUE(choice.entry);
  EXPECT_EQ(choice.entry->kernel.str(), "fake/norm@v2:Slow");
}

// ---- Life cycle ----

TEST_F(LoaderTest, CopiesShareTheSnapshotAndKeepPluginsLoaded) {
  add_good();
  std::optional<Runtime> original(dir.open());
  const Runtime copy = *original;
  EXPECT_EQ(&copy.devices(), &original->devices());
  EXPECT_EQ(&copy.plugins(), &original->plugins());
  EXPECT_EQ(&copy.device(Device("fakeaccel", 1)), &original->device(Device("fakeaccel", 1)));
  original.reset();
  // The copy still holds the plugin: no shutdown yet, and its memory_info still answers.
  EXPECT_FALSE(dir.log().contains("plugin 'fake_good': shutdown"));
  expect_fake_devices(copy.devices(), "fakeaccel", "fake_good");
  const std::optional<MemoryInfo> memory = copy.memory_info(Device("fakeaccel", 1));
  ASSERT_TRUE(memory.has_value());
  EXPECT_EQ(memory->free_bytes, 6 * kGiB);
}

TEST_F(LoaderTest, ShutdownRunsOnceWhenTheLastCopyGoes) {
  add_good();
  {
    const Runtime rt = dir.open();
    const Runtime a = rt;
    const Runtime b = a;
    EXPECT_EQ(dir.log().count("plugin 'fake_good': init"), 1u);
  }
  EXPECT_EQ(dir.log().count("plugin 'fake_good': shutdown"), 1u) << dir.log().dump();
}

TEST_F(LoaderTest, OpenAndClose200Times) {
  add_good();
  add_other();
  for (int i = 0; i < 200; ++i) {
    const Runtime rt = dir.open();
    ASSERT_EQ(rt.devices().size(), 4u) << "iteration " << i << "\n" << describe(rt);
    ASSERT_EQ(rt.memory_info(Device("fakeaccel", 1))->free_bytes, 6 * kGiB) << "iteration " << i;
  }
  // Every init paired with its shutdown.
  EXPECT_EQ(dir.log().count("plugin 'fake_good': init"), 200u);
  EXPECT_EQ(dir.log().count("plugin 'fake_good': shutdown"), 200u);
  EXPECT_EQ(dir.log().count("plugin 'fake_other': shutdown"), 200u);
}

TEST_F(LoaderTest, TwoRuntimesAtOnceEachInitThePlugin) {
  add_good();
  const Runtime a = dir.open();
  {
    const Runtime b = dir.open();
    EXPECT_NE(&a.devices(), &b.devices());
    EXPECT_EQ(dir.log().count("plugin 'fake_good': init"), 2u);
  }
  // b's plugin state is gone; a's still answers.
  EXPECT_EQ(dir.log().count("plugin 'fake_good': shutdown"), 1u);
  ASSERT_TRUE(a.memory_info(Device("fakeaccel", 0)).has_value());
  EXPECT_EQ(a.memory_info(Device("fakeaccel", 0))->total_bytes, 16 * kGiB);
}

TEST_F(LoaderTest, ConcurrentQueriesAreConsistent) {
  add_good();
  add_other();
  const Runtime rt = dir.open();
  const std::vector<DeviceInfo>* snapshot = &rt.devices();
  std::atomic<int> mismatches{0};
  std::atomic<int> queries{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        const int index = (t + i) % 2;
        bool ok = &rt.devices() == snapshot && rt.devices().size() == 4;
        ok = ok && rt.devices("fakeaccel").size() == 2;
        ok = ok && rt.device(Device("fakeaccel", index)).name ==
                       "Fake Accelerator " + std::to_string(index);
        const std::optional<MemoryInfo> m = rt.memory_info(Device("fakeaccel", index));
        ok = ok && m.has_value() && m->total_bytes == (16 * kGiB) >> index &&
             m->free_bytes == m->total_bytes - uint64_t(index + 1) * kGiB;
        // A plugin's failing memory_info, from many threads: statuses made and freed
        // concurrently, warnings logged concurrently.
        ok = ok && !rt.memory_info(Device("fakeother", index)).has_value();
        if (!ok) ++mismatches;
        ++queries;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(queries.load(), 8 * 300);
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(dir.log().count("memory_info(fakeother:"), size_t{8 * 300});
}

}  // namespace
}  // namespace backplane::testing
