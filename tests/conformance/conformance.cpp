// The conformance checks. Each opens runtimes that see only the plugin under test, through the
// public API alone, as a host application would.
#include <backplane/conformance.hpp>
#include <backplane/runtime/device_info.hpp>
#include <backplane/runtime/runtime.hpp>

#include "process_resources.hpp"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace backplane::conformance {

void PrintTo(const PluginUnderTest& plugin, std::ostream* os) {
  *os << plugin.label;
}

void link_kernel_checks();  // kernel_checks.cpp

PluginUnderTest plugin_under_test(const char* label, const std::filesystem::path& manifest) {
  link_kernel_checks();  // so that a program using the macro links the kernel checks too
  return PluginUnderTest{label, manifest};
}

std::string plugin_test_name(const ::testing::TestParamInfo<PluginUnderTest>& info) {
  return info.param.label;
}

Runtime PluginConformance::open() const {
  RuntimeOptions options;
  options.plugin_path = std::vector<std::filesystem::path>{GetParam().manifest};
  options.log_level = LogLevel::kInfo;
  options.log_sink = [this](LogLevel level, const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex_);
    log_.push_back(std::string(to_string(level)) + ": " + line);
  };
  return Runtime::open(options);
}

const PluginInfo* PluginConformance::the_plugin(const Runtime& runtime) {
  if (runtime.plugins().size() != 1) {
    ADD_FAILURE() << "expected exactly one plugin record, got " << runtime.plugins().size();
    return nullptr;
  }
  return &runtime.plugins()[0];
}

std::string PluginConformance::log() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out = "log:\n";
  for (const std::string& line : log_) out += "  " + line + "\n";
  return out;
}

namespace {

bool is_property_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

// What must not change between two opens on one machine. Property values may (a snapshot of
// free memory, say); their names and kinds may not.
std::string identity(const DeviceInfo& d) {
  std::string out = d.device.str() + "|" + d.plugin + "|" + d.name + "|" + d.vendor + "|" + d.uuid +
                    "|" + d.pci_bus_id + "|" + d.arch + "|" +
                    (d.compute_capability ? d.compute_capability->str() : "-") + "|" +
                    std::to_string(d.physical_index) + "|" + std::to_string(d.memory_total) + "|" +
                    std::to_string(d.capabilities) + "|" + (d.simulated ? "sim" : "real") + "|" +
                    d.visibility_variable;
  for (const Property& p : d.properties) {
    out += "|" + p.name + ":" + std::to_string(p.value.index());
  }
  return out;
}

std::string identity(const BackendInfo& b) {
  return b.type + "|" + b.plugin + "|" + b.hub_key + "|" + b.collective_backend + "|" +
         std::to_string(b.training_priority) + "|" + (b.accelerator ? "acc" : "host") + "|" +
         (b.automatic_placement ? "auto" : "manual") + "|" +
         (b.available ? "available" : "unavailable: " + b.unavailable_reason);
}

}  // namespace

TEST_P(PluginConformance, ManifestParsesAndNamesThePlugin) {
  ASSERT_TRUE(std::filesystem::is_regular_file(GetParam().manifest))
      << "no manifest file at " << GetParam().manifest;
  const Runtime rt = open();
  const PluginInfo* plugin = the_plugin(rt);
  ASSERT_NE(plugin, nullptr);
  EXPECT_EQ(plugin->error.rfind("bad manifest", 0), std::string::npos) << plugin->error;
  EXPECT_EQ(plugin->manifest, GetParam().manifest);
  EXPECT_FALSE(plugin->name.empty());
  EXPECT_FALSE(plugin->library.empty());
  EXPECT_FALSE(plugin->device_types.empty());
}

TEST_P(PluginConformance, LoadsWithAbiMajor1) {
  const Runtime rt = open();
  const PluginInfo* plugin = the_plugin(rt);
  ASSERT_NE(plugin, nullptr);
  ASSERT_EQ(plugin->status, PluginStatus::kLoaded)
      << GetParam().manifest << ": " << plugin->error << "\n"
      << log();
  EXPECT_TRUE(plugin->error.empty()) << plugin->error;
  EXPECT_EQ(plugin->abi_version.rfind("1.", 0), 0u) << "plugin ABI " << plugin->abi_version;
}

TEST_P(PluginConformance, RegistersOnlyTypesListedInItsManifest) {
  const Runtime rt = open();
  const PluginInfo* plugin = the_plugin(rt);
  ASSERT_NE(plugin, nullptr);
  ASSERT_EQ(plugin->status, PluginStatus::kLoaded) << plugin->error;
  EXPECT_FALSE(rt.backends().empty()) << "the plugin registers no device type";
  for (const BackendInfo& b : rt.backends()) {
    EXPECT_EQ(b.plugin, plugin->name) << b.type;
    EXPECT_NE(std::find(plugin->device_types.begin(), plugin->device_types.end(), b.type),
              plugin->device_types.end())
        << "device type '" << b.type << "' is not in the manifest";
  }
}

TEST_P(PluginConformance, UnavailableBackendsSayWhy) {
  const Runtime rt = open();
  ASSERT_FALSE(rt.backends().empty()) << log();
  for (const BackendInfo& b : rt.backends()) {
    // A reason exactly when unavailable: a reason on an available backend misleads.
    EXPECT_EQ(b.available, b.unavailable_reason.empty())
        << b.type << (b.available ? " is available" : " is unavailable") << ", reason '"
        << b.unavailable_reason << "'";
    if (!b.available) {
      EXPECT_TRUE(rt.devices(b.type).empty()) << b.type << " is unavailable but has devices";
    }
  }
}

TEST_P(PluginConformance, DevicesAreWellFormed) {
  const Runtime rt = open();
  const PluginInfo* plugin = the_plugin(rt);
  ASSERT_NE(plugin, nullptr);
  ASSERT_EQ(plugin->status, PluginStatus::kLoaded) << plugin->error;
  std::map<std::string, int> next_index;
  for (const DeviceInfo& d : rt.devices()) {
    SCOPED_TRACE("device " + d.device.str());
    ASSERT_TRUE(d.device.has_index());
    const BackendInfo* backend = rt.backend(d.device.type());
    ASSERT_NE(backend, nullptr) << "type not registered";
    EXPECT_EQ(backend->plugin, plugin->name);
    EXPECT_EQ(d.plugin, plugin->name);
    // Contiguous from 0 per type, in order.
    EXPECT_EQ(*d.device.index(), next_index[d.device.type()]++);
    EXPECT_FALSE(d.name.empty());
    if (backend->available) {
      EXPECT_GT(d.memory_total, 0u);
    }
    std::set<std::string> names;
    for (const Property& p : d.properties) {
      EXPECT_TRUE(is_property_name(p.name)) << "property name '" << p.name << "'";
      EXPECT_TRUE(names.insert(p.name).second) << "property '" << p.name << "' given twice";
    }
  }
}

TEST_P(PluginConformance, TwoOpensAgree) {
  const Runtime first = open();
  const Runtime second = open();
  const PluginInfo* plugin = the_plugin(first);
  ASSERT_NE(plugin, nullptr);
  ASSERT_EQ(plugin->status, PluginStatus::kLoaded) << plugin->error;
  ASSERT_EQ(first.backends().size(), second.backends().size());
  for (size_t i = 0; i < first.backends().size(); ++i) {
    EXPECT_EQ(identity(first.backends()[i]), identity(second.backends()[i]));
  }
  ASSERT_EQ(first.devices().size(), second.devices().size());
  for (size_t i = 0; i < first.devices().size(); ++i) {
    EXPECT_EQ(identity(first.devices()[i]), identity(second.devices()[i]));
  }
}

TEST_P(PluginConformance, MemoryInfoIsConsistent) {
  const Runtime rt = open();
  const PluginInfo* plugin = the_plugin(rt);
  ASSERT_NE(plugin, nullptr);
  ASSERT_EQ(plugin->status, PluginStatus::kLoaded) << plugin->error;
  for (const DeviceInfo& d : rt.devices()) {
    SCOPED_TRACE("device " + d.device.str());
    std::optional<MemoryInfo> memory;
    ASSERT_NO_THROW(memory = rt.memory_info(d.device));
    if (memory) {
      EXPECT_LE(memory->free_bytes, memory->total_bytes);
    }
  }
}

TEST_P(PluginConformance, OpensAndClosesRepeatedlyWithoutLeaks) {
  std::filesystem::path library;
  size_t devices = 0;
  {  // the first open loads what stays loaded for the process (the plugin's dependencies)
    const Runtime rt = open();
    const PluginInfo* plugin = the_plugin(rt);
    ASSERT_NE(plugin, nullptr);
    ASSERT_EQ(plugin->status, PluginStatus::kLoaded) << plugin->error;
    library = std::filesystem::weakly_canonical(plugin->library);
    devices = rt.devices().size();
  }
  const ProcessResources before = process_resources(library);
  for (int i = 0; i < 50; ++i) {
    const Runtime rt = open();
    const PluginInfo* plugin = the_plugin(rt);
    ASSERT_NE(plugin, nullptr);
    ASSERT_EQ(plugin->status, PluginStatus::kLoaded) << "open " << i << ": " << plugin->error;
    ASSERT_EQ(rt.devices().size(), devices) << "open " << i;
    if (i == 0) {
      EXPECT_GT(process_resources(library).library_mappings, before.library_mappings)
          << library << " is not mapped while a runtime holds it";
    }
  }
  const ProcessResources after = process_resources(library);
  EXPECT_EQ(after.open_files, before.open_files) << "file descriptors left open by 50 opens";
  EXPECT_EQ(after.library_mappings, before.library_mappings)
      << "mappings of " << library << " left after the last runtime closed";
}

}  // namespace backplane::conformance
