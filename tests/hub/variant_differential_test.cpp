// Build-variant resolution against the `kernels` library's own (tests/python/variant_oracle.py
// writes what it decides for every system of variant_cases.json over the whole pool):
//   - the same variants accepted, and each refused one by the same rule;
//   - our order of the accepted ones keeps every strict preference the library has (pairs it
//     orders the same whatever the input order); ties may go either way.
#include <backplane/hub/variant.hpp>

#include <nlohmann/json.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>

namespace backplane::hub {
namespace {

using nlohmann::json;

std::optional<BackendVersion> version_of(const json& system, const char* key) {
  if (!system.contains(key) || system[key].is_null()) return std::nullopt;
  return BackendVersion::parse(system[key].get<std::string>(), key);
}

// The oracle's system (the backend as a variant names it: cu132) as our facts.
SystemFacts facts_of(const json& system) {
  const BuildVariant backend =
      BuildVariant::parse("cxx11-" + system["backend"].get<std::string>() + "-x86_64-linux");
  SystemFacts s;
  s.backend = backend.backend;
  s.backend_version = backend.backend_version;
  s.cpu = system["cpu"];
  s.os = system["os"];
  s.cxx_abi = "cxx11";
  s.torch_version = version_of(system, "torch");
  if (!system["torch_cxx11_abi"].is_null()) {
    s.torch_cxx_abi = system["torch_cxx11_abi"].get<bool>() ? "cxx11" : "cxx98";
  }
  s.tvm_ffi_version = version_of(system, "tvm_ffi");
  s.macos_version = version_of(system, "macos");
  return s;
}

json load(const char* variable) {
  const char* path = std::getenv(variable);
  if (path == nullptr) return nullptr;
  std::ifstream in(path);
  if (!in) throw std::runtime_error(std::string(variable) + ": cannot open " + path);
  return json::parse(in);
}

TEST(VariantDifferential, ResolvesAsTheKernelsLibrary) {
  const json cases = load("BACKPLANE_VARIANT_CASES");
  const json oracle = load("BACKPLANE_VARIANT_ORACLE");
  if (cases.is_null() || oracle.is_null()) {
    GTEST_SKIP() << "BACKPLANE_VARIANT_CASES and BACKPLANE_VARIANT_ORACLE are not set";
  }
  const std::vector<std::string> pool = cases["variants"];
  size_t pairs = 0;
  ASSERT_EQ(oracle["systems"].size(), cases["systems"].size());
  for (const json& expected : oracle["systems"]) {
    SCOPED_TRACE(expected["system"]["name"].get<std::string>());
    const VariantResolution ours = resolve_variants(pool, facts_of(expected["system"]));
    ASSERT_EQ(ours.decisions.size(), pool.size());
    std::map<std::string, size_t> position;
    for (const VariantDecision& d : ours.decisions) {
      SCOPED_TRACE(d.variant);
      const json& theirs = expected["decisions"][d.variant];
      ASSERT_EQ(d.accepted, theirs["accepted"].get<bool>()) << d.reason;
      if (d.accepted) {
        position[d.variant] = position.size();
      } else {
        EXPECT_EQ(d.refused_by, theirs["rule"].get<std::string>())
            << "ours: " << d.reason << "\nkernels: " << theirs.value("reason", "");
      }
    }
    for (const json& pair : expected["before"]) {
      const std::string first = pair[0], second = pair[1];
      EXPECT_LT(position.at(first), position.at(second))
          << "the kernels library prefers " << first << " to " << second;
      ++pairs;
    }
    const std::vector<std::string> accepted = expected["accepted"];
    if (!accepted.empty()) {
      ASSERT_NE(ours.chosen(), nullptr);
    } else {
      EXPECT_EQ(ours.chosen(), nullptr);
    }
  }
  EXPECT_GT(pairs, 100u) << "too few preferences checked to mean anything";
}

}  // namespace
}  // namespace backplane::hub
