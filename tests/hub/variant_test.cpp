// Build variant names and their resolution against a system (docs/device-rules.md §7.2), as tables.
#include <backplane/error.hpp>
#include <backplane/hub/variant.hpp>

#include <gtest/gtest.h>

namespace backplane::hub {
namespace {

struct ParseCase {
  const char* text;
  BuildVariant::Kind kind;
  const char* framework;
  const char* framework_version;  // "" for none
  const char* cxx_abi;
  const char* backend;
  const char* backend_version;  // "" for none
  const char* cpu;
  const char* os;
};

std::string version_text(const std::optional<BackendVersion>& v) {
  return v ? v->str() : "";
}

TEST(BuildVariant, ParsesEveryForm) {
  using K = BuildVariant::Kind;
  const ParseCase cases[] = {
      {"cxx11-cu130-x86_64-linux", K::kArch, "", "", "cxx11", "cuda", "13.0", "x86_64", "linux"},
      {"cxx11-rocm52-x86_64-linux", K::kArch, "", "", "cxx11", "rocm", "5.2", "x86_64", "linux"},
      {"cxx11-cpu-x86_64-linux", K::kArch, "", "", "cxx11", "cpu", "", "x86_64", "linux"},
      {"cxx98-cu128-aarch64-linux", K::kArch, "", "", "cxx98", "cuda", "12.8", "aarch64", "linux"},
      {"cxx11-cann81-aarch64-linux", K::kArch, "", "", "cxx11", "cann", "8.1", "aarch64", "linux"},
      {"torch212-cxx11-cu130-x86_64-linux", K::kArch, "torch", "2.12", "cxx11", "cuda", "13.0",
       "x86_64", "linux"},
      {"torch29-cu128-x86_64-linux", K::kArch, "torch", "2.9", "", "cuda", "12.8", "x86_64",
       "linux"},
      {"torch27-cxx11-xpu20251-x86_64-linux", K::kArch, "torch", "2.7", "cxx11", "xpu", "2025.1",
       "x86_64", "linux"},
      {"torch28-metal-aarch64-darwin", K::kArch, "torch", "2.8", "", "metal", "", "aarch64",
       "darwin"},
      {"noarch-cuda", K::kGeneric, "", "", "", "cuda", "", "", ""},
      {"noarch-universal", K::kGeneric, "", "", "", "universal", "", "", ""},
      {"torch-universal", K::kGeneric, "torch", "", "", "universal", "", "", ""},
      {"torch-npu", K::kGeneric, "torch", "", "", "npu", "", "", ""},
      // The `kernels` library reads everything after torch- as a Python-only build's name.
      {"torch-cxx11-cpu-x86_64-linux", K::kGeneric, "torch", "", "", "cxx11-cpu-x86_64-linux", "",
       "", ""},
      {"torch-stable-abi29-cu128-x86_64-linux", K::kArch, "torch-stable-abi", "2.9", "", "cuda",
       "12.8", "x86_64", "linux"},
      {"torch-stable-abi210-cpu-aarch64-darwin", K::kArch, "torch-stable-abi", "2.10", "", "cpu",
       "", "aarch64", "darwin"},
      {"tvm-ffi01-cu130-x86_64-linux", K::kArch, "tvm-ffi", "0.1", "", "cuda", "13.0", "x86_64",
       "linux"},
      {"tvm-ffi012-cpu-x86_64-linux", K::kArch, "tvm-ffi", "0.12", "", "cpu", "", "x86_64",
       "linux"},
  };
  for (const ParseCase& c : cases) {
    SCOPED_TRACE(c.text);
    const BuildVariant v = BuildVariant::parse(c.text);
    EXPECT_EQ(v.name, c.text);
    EXPECT_EQ(v.kind, c.kind);
    EXPECT_EQ(v.framework, c.framework);
    EXPECT_EQ(version_text(v.framework_version), c.framework_version);
    EXPECT_EQ(v.cxx_abi, c.cxx_abi);
    EXPECT_EQ(v.backend, c.backend);
    EXPECT_EQ(version_text(v.backend_version), c.backend_version);
    EXPECT_EQ(v.cpu, c.cpu);
    EXPECT_EQ(v.os, c.os);
  }
}

TEST(BuildVariant, RefusesMalformedNamesNamingThem) {
  const std::pair<const char*, const char*> cases[] = {
      {"", "neither a C++ ABI"},
      {"cuda", "neither a C++ ABI"},
      {"cu130-x86_64-linux", "neither a C++ ABI"},
      {"cxx11-cu130-x86_64", "expected BACKEND-CPU-OS"},
      {"cxx11-cu130-x86-64-linux", "expected BACKEND-CPU-OS"},
      {"cxx11-cu1-x86_64-linux", "unknown backend 'cu1'"},
      {"cxx11-vulkan-x86_64-linux", "unknown backend 'vulkan'"},
      {"cxx11-cu130-X86_64-linux", "the CPU and OS"},
      {"torch2-cu130-x86_64-linux", "is not torchXY"},
      {"torchX1-cu130-x86_64-linux", "is not torchXY"},
      // Found by fuzz_hub_names: a minor too large for an int escaped as std::out_of_range.
      {"torch299999999999-cu130-x86_64-linux", "is not torchXY"},
      {"noarch-foo", "unknown generic family 'foo'"},
      {"torch-", "torch-NAME must be a-z 0-9 _ -"},
      {"torch-stable-abi29", "expected BACKEND-CPU-OS"},
      {"torch-stable-abix-cpu-x86_64-linux", "is not torch-stable-abiXY"},
      {"tvm-ffi1-cpu-x86_64-linux", "is not tvm-ffiXY"},
      {"tvm-ffi01-cxx11-cpu-x86_64-linux", "expected BACKEND-CPU-OS"},
  };
  for (const auto& [text, why] : cases) {
    SCOPED_TRACE(text);
    try {
      BuildVariant::parse(text);
      ADD_FAILURE() << "accepted";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("build variant '") + text + "'"),
                std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

SystemFacts facts(const std::string& backend, std::optional<BackendVersion> version,
                  std::optional<BackendVersion> torch = std::nullopt) {
  SystemFacts s;
  s.backend = backend;
  s.backend_version = version;
  s.backend_version_note = version ? "" : "cuda:0 reports no driver_version";
  s.cpu = "x86_64";
  s.os = "linux";
  s.cxx_abi = "cxx11";
  s.torch_version = torch;
  s.torch_cxx_abi = "cxx11";
  return s;
}

struct ResolveCase {
  const char* name;
  SystemFacts system;
  std::vector<std::string> variants;
  std::vector<std::string> accepted;  // in preference order
  // For each refused variant, a part of its reason.
  std::vector<std::pair<std::string, std::string>> refused;
};

TEST(ResolveVariants, FollowsTheRulesOfSection7) {
  const BackendVersion cuda130{13, 0}, cuda124{12, 4}, rocm52{5, 2}, torch212{2, 12};
  const std::vector<ResolveCase> cases = {
      {"cuda: same major, minor no newer",
       facts("cuda", cuda130),
       {"cxx11-cu130-x86_64-linux", "cxx11-cu131-x86_64-linux", "cxx11-cu128-x86_64-linux",
        "cxx11-cpu-x86_64-linux"},
       {"cxx11-cu130-x86_64-linux"},
       {{"cxx11-cu131-x86_64-linux",
         "CUDA version (13.1) is not compatible with this system's "
         "CUDA version (13.0)"},
        {"cxx11-cu128-x86_64-linux", "CUDA version (12.8) is not compatible"},
        {"cxx11-cpu-x86_64-linux", "backend (cpu) does not match this system's backend (cu130)"}}},
      {"cuda: the highest compatible minor first",
       facts("cuda", cuda124),
       {"cxx11-cu120-x86_64-linux", "cxx11-cu124-x86_64-linux", "cxx11-cu126-x86_64-linux",
        "cxx11-cu118-x86_64-linux"},
       {"cxx11-cu124-x86_64-linux", "cxx11-cu120-x86_64-linux"},
       {{"cxx11-cu126-x86_64-linux", "not compatible"},
        {"cxx11-cu118-x86_64-linux", "not compatible"}}},
      {"cpu: CPU, OS and C++ ABI exact",
       facts("cpu", std::nullopt),
       {"cxx11-cpu-x86_64-linux", "cxx11-cpu-aarch64-linux", "cxx11-cpu-x86_64-darwin",
        "cxx98-cpu-x86_64-linux"},
       {"cxx11-cpu-x86_64-linux"},
       {{"cxx11-cpu-aarch64-linux", "CPU (aarch64) does not match this system's CPU (x86_64)"},
        {"cxx11-cpu-x86_64-darwin", "OS (darwin) does not match this system's OS (linux)"},
        {"cxx98-cpu-x86_64-linux", "C++ ABI (cxx98) does not match this build's C++ ABI (cxx11)"}}},
      {"generic builds come last, universal last of all",
       facts("cuda", cuda130),
       {"noarch-universal", "noarch-cuda", "cxx11-cu130-x86_64-linux"},
       {"cxx11-cu130-x86_64-linux", "noarch-cuda", "noarch-universal"},
       {}},
      {"a generic build of another backend is refused",
       facts("cpu", std::nullopt),
       {"noarch-universal", "noarch-cuda"},
       {"noarch-universal"},
       {{"noarch-cuda",
         "backend (cuda) does not match this system's backend (cpu) and is not "
         "universal"}}},
      {"generic npu builds serve cann",
       facts("cann", BackendVersion{8, 1}),
       {"noarch-npu"},
       {"noarch-npu"},
       {}},
      {"a Torch build needs the host's Torch version; a Python-only build does not",
       facts("cuda", cuda130),
       {"torch212-cxx11-cu130-x86_64-linux", "torch-stable-abi29-cu130-x86_64-linux", "torch-cuda"},
       {"torch-cuda"},
       {{"torch212-cxx11-cu130-x86_64-linux",
         "Torch version (2.12) does not match the host's Torch version (unknown) (give the "
         "host's LibTorch version"},
        {"torch-stable-abi29-cu130-x86_64-linux",
         "Torch stable ABI version (2.9) is too new for the host's Torch version (unknown)"}}},
      {"Torch major.minor exact; native builds before Torch builds",
       facts("cuda", cuda130, torch212),
       {"torch212-cxx11-cu130-x86_64-linux", "torch211-cxx11-cu130-x86_64-linux",
        "cxx11-cu130-x86_64-linux", "torch212-cu130-x86_64-linux"},
       {"cxx11-cu130-x86_64-linux", "torch212-cu130-x86_64-linux",
        "torch212-cxx11-cu130-x86_64-linux"},
       {{"torch211-cxx11-cu130-x86_64-linux",
         "Torch version (2.11) does not match the host's Torch version (2.12)"}}},
      {"the kernels library's order: stable ABI newest first, untagged before a newer CUDA minor",
       facts("cuda", BackendVersion{13, 2}, torch212),
       {"torch212-cxx11-cu132-x86_64-linux", "torch212-cu130-x86_64-linux", "torch-universal",
        "torch-stable-abi29-cu130-x86_64-linux", "torch-stable-abi210-cu131-x86_64-linux",
        "torch-cuda", "torch-stable-abi213-cu130-x86_64-linux"},
       {"torch-stable-abi210-cu131-x86_64-linux", "torch-stable-abi29-cu130-x86_64-linux",
        "torch212-cu130-x86_64-linux", "torch212-cxx11-cu132-x86_64-linux", "torch-cuda",
        "torch-universal"},
       {{"torch-stable-abi213-cu130-x86_64-linux",
         "is too new for the host's Torch version "
         "(2.12)"}}},
      {"an unknown CUDA version refuses every CUDA build",
       facts("cuda", std::nullopt),
       {"cxx11-cu130-x86_64-linux"},
       {},
       {{"cxx11-cu130-x86_64-linux",
         "CUDA version (13.0) cannot be checked: cuda:0 reports no driver_version"}}},
      {"other backends: version exact",
       facts("rocm", rocm52),
       {"cxx11-rocm52-x86_64-linux", "cxx11-rocm51-x86_64-linux", "cxx11-rocm61-x86_64-linux"},
       {"cxx11-rocm52-x86_64-linux"},
       {{"cxx11-rocm51-x86_64-linux",
         "backend (rocm51) does not match this system's backend "
         "(rocm52)"},
        {"cxx11-rocm61-x86_64-linux", "backend (rocm61) does not match"}}},
      {"a name that does not parse is refused with why",
       facts("cpu", std::nullopt),
       {"garbage", "cxx11-cpu-x86_64-linux"},
       {"cxx11-cpu-x86_64-linux"},
       {{"garbage", "build variant 'garbage'"}}},
  };
  for (const ResolveCase& c : cases) {
    SCOPED_TRACE(c.name);
    const VariantResolution r = resolve_variants(c.variants, c.system);
    ASSERT_EQ(r.decisions.size(), c.variants.size());
    std::vector<std::string> accepted;
    for (const VariantDecision& d : r.decisions) {
      if (d.accepted) accepted.push_back(d.variant);
    }
    EXPECT_EQ(accepted, c.accepted);
    if (c.accepted.empty()) {
      EXPECT_EQ(r.chosen(), nullptr);
    } else {
      ASSERT_NE(r.chosen(), nullptr);
      EXPECT_EQ(r.chosen()->variant, c.accepted.front());
    }
    for (const auto& [variant, why] : c.refused) {
      SCOPED_TRACE(variant);
      auto it = std::find_if(r.decisions.begin(), r.decisions.end(),
                             [&](const VariantDecision& d) { return d.variant == variant; });
      ASSERT_NE(it, r.decisions.end());
      EXPECT_FALSE(it->accepted);
      EXPECT_NE(it->reason.find(why), std::string::npos) << it->reason;
    }
  }
}

TEST(ResolveVariants, NoMatchListsEveryVariantAndWhy) {
  const VariantResolution r = resolve_variants(
      {"cxx11-cu130-x86_64-linux", "cxx11-cpu-aarch64-linux"}, facts("cpu", std::nullopt));
  EXPECT_EQ(no_variant_message("org/repo", "main", r),
            "Cannot find a build variant for this system in org/repo (revision: main)\n"
            "  - cxx11-cpu-aarch64-linux: CPU (aarch64) does not match this system's CPU "
            "(x86_64)\n"
            "  - cxx11-cu130-x86_64-linux: backend (cu130) does not match this system's backend "
            "(cpu)");
  EXPECT_EQ(no_variant_message("org/repo", "v1", resolve_variants({}, facts("cpu", {}))),
            "Cannot find a build variant for this system in org/repo (revision: v1)\n"
            "  (the package has no build variants)");
}

TEST(SystemFactsFor, ReadTheDeviceAndItsHubKey) {
  DeviceInfo cuda;
  cuda.device = Device("cuda", 0);
  cuda.properties.push_back({"driver_version", std::string("12.4")});
  SystemFacts s = system_facts(cuda, "cuda");
  EXPECT_EQ(s.backend, "cuda");
  ASSERT_TRUE(s.backend_version);
  EXPECT_EQ(s.backend_version->str(), "12.4");
  EXPECT_EQ(s.cpu, SystemFacts::host().cpu);

  DeviceInfo simulated;
  simulated.device = Device("cuda", 1);
  simulated.simulated = true;
  s = system_facts(simulated, "cuda");
  EXPECT_FALSE(s.backend_version);
  EXPECT_NE(s.backend_version_note.find("cuda:1 reports no driver_version (a simulated device)"),
            std::string::npos)
      << s.backend_version_note;

  DeviceInfo amd;  // an AMD GPU answering to "cuda", as in PyTorch's ROCm builds
  amd.device = Device("cuda", 0);
  EXPECT_EQ(system_facts(amd, "rocm").backend, "rocm");
  EXPECT_NE(system_facts(amd, "rocm").backend_version_note.find("runtime_version"),
            std::string::npos);

  DeviceInfo mps;
  mps.device = Device("mps", 0);
  EXPECT_EQ(system_facts(mps, "mps").backend, "metal");
  DeviceInfo cpu;
  EXPECT_EQ(system_facts(cpu, "").backend, "cpu");
}

TEST(BackendVersionParse, AcceptsMajorMinorAndRefusesTheRest) {
  EXPECT_EQ(BackendVersion::parse("13.0", "x").str(), "13.0");
  EXPECT_EQ(BackendVersion::parse("12.4.1", "x").str(), "12.4");
  for (const char* bad : {"", "13", "13.", ".1", "a.b", "1.2.3.4", "13.0 "}) {
    SCOPED_TRACE(bad);
    EXPECT_THROW(BackendVersion::parse(bad, "--backend-version"), InvalidArgument);
  }
}

}  // namespace
}  // namespace backplane::hub
