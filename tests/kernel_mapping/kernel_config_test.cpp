#include <backplane/error.hpp>
#include <backplane/rules/kernel_mapping.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <string>

namespace {

using backplane::InvalidArgument;
using backplane::KernelMapping;
using backplane::KernelMode;
using backplane::parse_kernel_config;
using nlohmann::json;

std::string describe(const KernelMapping& m) {
  std::string out;
  for (const auto& e : m.entries()) {
    out += e.layer + "@" + e.device_key + "[" + e.mode.str() + "]=" + e.kernel.str();
    if (e.kernel.version) out += "#v" + std::to_string(*e.kernel.version);
    if (e.kernel.trust_remote_code) out += "!trust";
    out += "(" + e.source + ");";
  }
  return out;
}

struct ConfigCase {
  const char* config;
  const char* entries;  // nullptr: rejected
  const char* error_part;
};

TEST(KernelConfig, Table) {
  const ConfigCase cases[] = {
      // Plain: the model's device key(s), every mode.
      {R"({"RMSNorm": "org/norm:Fast"})", "RMSNorm@cuda[fallback]=org/norm:Fast(user);", ""},
      // Per device.
      {R"({"RMSNorm": {"cuda": "org/norm:Fast", "cpu": "/opt/k/norm:Cpu"}})",
       "RMSNorm@cpu[fallback]=/opt/k/norm:Cpu(user);RMSNorm@cuda[fallback]=org/norm:Fast(user);",
       ""},
      // With metadata.
      {R"({"RMSNorm": ["org/norm:Fast", {"version": 3, "trust_remote_code": true}]})",
       "RMSNorm@cuda[fallback]=org/norm:Fast#v3!trust(user);", ""},
      {R"({"RMSNorm": ["org/norm:Fast", {"revision": "abc123"}]})",
       "RMSNorm@cuda[fallback]=org/norm@abc123:Fast(user);", ""},
      // Per mode, everywhere or per device.
      {R"({"RMSNorm": {"inference": "org/norm:Fast", "training": "org/norm:Slow"}})",
       "RMSNorm@cuda[inference]=org/norm:Fast(user);RMSNorm@cuda[training]=org/norm:Slow(user);",
       ""},
      {R"({"SiLU": {"xpu": {"inference|torch_compile": "org/act:Silu"}}})",
       "SiLU@xpu[inference|torch_compile]=org/act:Silu(user);", ""},
      // Rejected, naming the layer and field.
      {R"(["org/norm:Fast"])", nullptr, "expected an object"},
      {R"({"RMSNorm": {"gpu": "org/norm:Fast"}})", nullptr, "device \"gpu\": unknown device key"},
      {R"({"RMSNorm": "norm:Fast"})", nullptr, "layer \"RMSNorm\""},
      {R"({"RMSNorm": 3})", nullptr, "expected \"org/repo:Layer\""},
      {R"({"RMSNorm": {}})", nullptr, "the object is empty"},
      {R"({"RMSNorm": ["org/norm:Fast"]})", nullptr, "a list must be"},
      {R"({"RMSNorm": ["org/norm:Fast", {"revision": "a", "version": 1}]})", nullptr,
       "exactly one of"},
      {R"({"RMSNorm": ["org/norm:Fast", {}]})", nullptr, "exactly one of"},
      {R"({"RMSNorm": ["org/norm:Fast", {"version": "1"}]})", nullptr, "metadata \"version\""},
      {R"({"RMSNorm": ["org/norm:Fast", {"trust_remote_code": 1, "version": 1}]})", nullptr,
       "metadata \"trust_remote_code\""},
  };
  for (const ConfigCase& c : cases) {
    SCOPED_TRACE(c.config);
    const json config = json::parse(c.config);
    if (c.entries == nullptr) {
      try {
        parse_kernel_config(config, {"cuda"}, "my.json");
        ADD_FAILURE() << "accepted";
      } catch (const InvalidArgument& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("kernel config my.json"), std::string::npos) << message;
        EXPECT_NE(message.find(c.error_part), std::string::npos) << message;
      }
    } else {
      EXPECT_EQ(describe(parse_kernel_config(config, {"cuda"})), c.entries);
    }
  }
}

TEST(KernelConfig, PlainValuesCoverEveryGivenKey) {
  const KernelMapping m =
      parse_kernel_config(json::parse(R"({"RMSNorm": "org/norm:Fast"})"), {"cuda", "cpu"});
  EXPECT_EQ(
      describe(m),
      "RMSNorm@cuda[fallback]=org/norm:Fast(user);RMSNorm@cpu[fallback]=org/norm:Fast(user);");
  EXPECT_THROW(parse_kernel_config(json::parse(R"({"RMSNorm": "org/norm:Fast"})"), {"gpu"}),
               InvalidArgument);
}

TEST(KernelConfig, AFallbackEntryServesEveryMode) {
  const KernelMapping m =
      parse_kernel_config(json::parse(R"({"RMSNorm": "org/norm:Fast"})"), {"cuda"});
  for (const char* mode :
       {"inference", "training", "inference|torch_compile", "training|torch_compile"}) {
    const auto choice = m.lookup("RMSNorm", "cuda", 90, KernelMode::parse(mode));
    ASSERT_TRUE(choice.entry) << mode;
    EXPECT_TRUE(choice.matched_mode->is_fallback());
  }
}

}  // namespace
