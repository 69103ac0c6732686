#include <backplane/error.hpp>
#include <backplane/rules/kernel_mapping.hpp>

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace {

using backplane::CapabilityRange;
using backplane::InvalidArgument;
using backplane::KernelFallbackPolicy;
using backplane::KernelMapping;
using backplane::KernelMappingEntry;
using backplane::KernelMode;
using backplane::LayerKernelRef;

KernelMappingEntry entry(const char* layer, const char* key, const char* mode, const char* kernel,
                         const char* source, std::optional<CapabilityRange> range = {}) {
  KernelMappingEntry e;
  e.layer = layer;
  e.device_key = key;
  e.mode = KernelMode::parse(mode);
  e.kernel = LayerKernelRef::parse(kernel);
  e.source = source;
  e.capability = range;
  return e;
}

// Defaults as a cuda plugin would register them, then a user's override.
KernelMapping sample() {
  KernelMapping m;
  m.add(entry("RMSNorm", "cuda", "inference", "org/norm:Fast", "cuda"));
  m.add(entry("RMSNorm", "cuda", "training", "org/norm:Trainable", "cuda"));
  m.add(entry("RMSNorm", "cuda", "inference", "org/norm:Hopper", "cuda", CapabilityRange{90, 99}));
  m.add(entry("RMSNorm", "cuda", "inference", "org/norm:Exact90", "cuda", CapabilityRange{90, 90}));
  m.add(entry("RMSNorm", "cpu", "fallback", "org/norm:Cpu", "cpu"));
  m.add(entry("SiLU", "cuda", "inference|torch_compile", "org/act:Silu", "cuda"));
  m.add(entry("Gdn", "cuda", "inference", "org/gdn:Only121", "cuda", CapabilityRange{121, 121}));
  m.add(entry("Rotary", "rocm", "training", "org/rope:Train", "rocm"));
  return m;
}

struct LookupCase {
  const char* layer;
  const char* key;
  std::optional<int> capability;
  const char* mode;
  const char* kernel;  // nullptr: keeps its forward
  const char* matched_mode;
  const char* reason_part;
};

TEST(KernelMappingLookup, Table) {
  const KernelMapping m = sample();
  const LookupCase cases[] = {
      {"RMSNorm", "cuda", 80, "inference", "org/norm:Fast", "inference", ""},
      {"RMSNorm", "cuda", 80, "training", "org/norm:Trainable", "training", ""},
      // Narrowest range wins: 9.0 sits in [0, inf), [90, 99] and [90, 90].
      {"RMSNorm", "cuda", 90, "inference", "org/norm:Exact90", "inference", ""},
      {"RMSNorm", "cuda", 91, "inference", "org/norm:Hopper", "inference", ""},
      // The [90, 90] group has no training kernel and no fallback: nothing, though the
      // unranged group has one (groups do not mix, as in the kernels library).
      {"RMSNorm", "cuda", 90, "training", nullptr, nullptr, "in mode training"},
      // With torch_compile only compile-ready kernels (or a fallback) qualify.
      {"RMSNorm", "cuda", 80, "inference|torch_compile", nullptr, nullptr,
       "in mode inference|torch_compile"},
      {"RMSNorm", "cpu", std::nullopt, "training|torch_compile", "org/norm:Cpu", "fallback", ""},
      {"SiLU", "cuda", 80, "inference", "org/act:Silu", "inference|torch_compile", ""},
      {"SiLU", "cuda", 80, "training", nullptr, nullptr, "in mode training"},
      {"SiLU", "xpu", std::nullopt, "inference", nullptr, nullptr, "on device type `xpu`"},
      {"Gdn", "cuda", 120, "inference", nullptr, nullptr, "covers compute capability 120"},
      {"Gdn", "cuda", 121, "inference", "org/gdn:Only121", "inference", ""},
      {"Gdn", "cuda", std::nullopt, "inference", nullptr, nullptr, "covers no compute capability"},
      {"Rotary", "rocm", 94, "inference", "org/rope:Train", "training", ""},
      {"Rotary", "rocm", 94, "inference|torch_compile", nullptr, nullptr, "or its fallbacks"},
      {"LayerNorm", "cuda", 80, "inference", nullptr, nullptr, "No kernel mapping found for layer"},
  };
  for (const LookupCase& c : cases) {
    SCOPED_TRACE(std::string(c.layer) + " on " + c.key + " in " + c.mode);
    const auto choice = m.lookup(c.layer, c.key, c.capability, KernelMode::parse(c.mode));
    if (c.kernel == nullptr) {
      EXPECT_FALSE(choice.entry.has_value());
      EXPECT_NE(choice.reason.find(c.reason_part), std::string::npos) << choice.reason;
      EXPECT_EQ(choice.warn, std::string(c.layer) == "LayerNorm");
    } else {
      ASSERT_TRUE(choice.entry.has_value()) << choice.reason;
      EXPECT_EQ(choice.entry->kernel.str(), c.kernel);
      EXPECT_EQ(choice.matched_mode->str(), c.matched_mode);
      EXPECT_TRUE(choice.reason.empty());
    }
  }
}

TEST(KernelMappingLookup, UserEntriesReplaceTheDefaultGroup) {
  KernelMapping m = sample();
  KernelMapping user;
  user.add(entry("RMSNorm", "cuda", "fallback", "me/norm:Mine", "user"));
  m.merge(user);
  // Same (unranged) range as the plugin's group; the user registered last, so only its group
  // counts: its fallback beats the plugin's inference kernel.
  auto choice = m.lookup("RMSNorm", "cuda", 80, KernelMode::inference());
  ASSERT_TRUE(choice.entry);
  EXPECT_EQ(choice.entry->kernel.str(), "me/norm:Mine");
  EXPECT_EQ(choice.entry->source, "user");
  // A narrower default still wins by range.
  choice = m.lookup("RMSNorm", "cuda", 90, KernelMode::inference());
  EXPECT_EQ(choice.entry->kernel.str(), "org/norm:Exact90");
  // Without inheritance only the user's entries remain.
  KernelMapping only = sample();
  only.merge(user, /*inherit=*/false);
  EXPECT_EQ(only.entries().size(), 1u);
  EXPECT_FALSE(only.lookup("SiLU", "cuda", 80, KernelMode::inference()).entry);
}

struct PolicyCase {
  const char* layer;
  const char* key;
  std::optional<int> capability;
  const char* mode;
  KernelFallbackPolicy policy;
  const char* error;  // the kernels library's error text
};

TEST(KernelMappingLookup, FallbackPolicyTurnsEachStepIntoAnError) {
  const KernelMapping m = sample();
  KernelFallbackPolicy no_layer, no_device, no_properties, no_mode;
  no_layer.no_layer = false;
  no_device.no_device = false;
  no_properties.no_compatible_properties = false;
  no_mode.no_compatible_mode = false;
  const PolicyCase cases[] = {
      {"LayerNorm", "cuda", 80, "inference", no_layer, "No layer mapping for `LayerNorm`"},
      {"SiLU", "xpu", std::nullopt, "inference", no_device,
       "No layer mapping for `SiLU` with device type `xpu`"},
      {"Gdn", "cuda", 80, "inference", no_properties,
       "No layer mapping for `Gdn` device `cuda` with the right properties"},
      {"SiLU", "cuda", 80, "training", no_mode,
       "No repository for `SiLU` for configuration mode=training"},
  };
  for (const PolicyCase& c : cases) {
    SCOPED_TRACE(c.error);
    try {
      m.lookup(c.layer, c.key, c.capability, KernelMode::parse(c.mode), c.policy);
      ADD_FAILURE() << "no error";
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()), c.error);
    }
    // The same lookup with the default policy keeps the layer's forward instead.
    EXPECT_FALSE(m.lookup(c.layer, c.key, c.capability, KernelMode::parse(c.mode)).entry);
  }
  // A policy that allows everything never throws; none() forbids every step.
  EXPECT_THROW(
      m.lookup("LayerNorm", "cuda", 80, KernelMode::inference(), KernelFallbackPolicy::none()),
      InvalidArgument);
}

TEST(KernelMappingLookup, FallbackIsNotALookupMode) {
  EXPECT_THROW(sample().lookup("RMSNorm", "cpu", std::nullopt, KernelMode::fallback()),
               InvalidArgument);
}

TEST(KernelMapping, AddRejectsBadEntries) {
  KernelMapping m;
  EXPECT_THROW(m.add(entry("", "cuda", "inference", "a/b:C", "t")), InvalidArgument);
  EXPECT_THROW(m.add(entry("L", "", "inference", "a/b:C", "t")), InvalidArgument);
  EXPECT_THROW(m.add(entry("L", "cpu", "inference", "a/b:C", "t", CapabilityRange{80, 90})),
               InvalidArgument);
  try {
    m.add(entry("L", "cuda", "inference", "a/b:C", "plugin x", CapabilityRange{90, 80}));
    ADD_FAILURE();
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("plugin x"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("min <= max"), std::string::npos);
  }
  EXPECT_TRUE(m.entries().empty());
  m.add(entry("L", "rocm", "inference", "a/b:C", "t", CapabilityRange{90, 94}));
  EXPECT_EQ(m.layers(), std::vector<std::string>{"L"});
}

struct RefCase {
  const char* text;
  const char* repo;  // nullptr: rejected
  const char* layer;
  const char* revision;
  bool local;
};

TEST(LayerKernelRef, Parse) {
  const RefCase cases[] = {
      {"kernels-community/activation:SiluAndMul", "kernels-community/activation", "SiluAndMul",
       nullptr, false},
      {"org/repo@v1.2:Layer", "org/repo", "Layer", "v1.2", false},
      {"/home/me/kernels/norm:LlamaRMSNorm", "/home/me/kernels/norm", "LlamaRMSNorm", nullptr,
       true},
      {"org/repo", nullptr, nullptr, nullptr, false},
      {"org/repo:", nullptr, nullptr, nullptr, false},
      {"repo:Layer", nullptr, nullptr, nullptr, false},
      {"org/re/po:Layer", nullptr, nullptr, nullptr, false},
      {"org/repo@:Layer", nullptr, nullptr, nullptr, false},
      {"org/repo:La yer", nullptr, nullptr, nullptr, false},
  };
  for (const RefCase& c : cases) {
    SCOPED_TRACE(c.text);
    if (c.repo == nullptr) {
      try {
        LayerKernelRef::parse(c.text);
        ADD_FAILURE() << "accepted";
      } catch (const InvalidArgument& e) {
        EXPECT_NE(std::string(e.what()).find("\"org/repo:Layer\""), std::string::npos);
      }
      continue;
    }
    const LayerKernelRef ref = LayerKernelRef::parse(c.text);
    EXPECT_EQ(ref.repo, c.repo);
    EXPECT_EQ(ref.layer, c.layer);
    EXPECT_EQ(ref.revision.value_or(""), c.revision ? c.revision : "");
    EXPECT_EQ(ref.is_local_path(), c.local);
    EXPECT_EQ(ref.str(), c.text);
  }
}

TEST(CapabilityRange, Str) {
  EXPECT_EQ(CapabilityRange{}.str(), "any");
  EXPECT_EQ((CapabilityRange{90, INT_MAX}.str()), "90+");
  EXPECT_EQ((CapabilityRange{121, 121}.str()), "121");
  EXPECT_EQ((CapabilityRange{80, 89}.str()), "80-89");
}

}  // namespace
