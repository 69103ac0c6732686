// model_from_safetensors on checkpoints transformers itself saved: tests/python/
// safetensors_fixtures.py writes them (single files and shards, with and without config.json)
// and what from_pretrained loads from them; ctest names the folder in
// BACKPLANE_SAFETENSORS_FIXTURES.
#include <backplane/error.hpp>
#include <backplane/model/model.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

using Json = nlohmann::json;

Json load_manifest() {
  const char* folder = std::getenv("BACKPLANE_SAFETENSORS_FIXTURES");
  if (folder == nullptr) return Json();
  std::ifstream in(std::string(folder) + "/manifest.json");
  if (!in) return Json();
  return Json::parse(in);
}

const Json& manifest() {
  static const Json json = load_manifest();
  return json;
}

// safetensors' code of a dtype, as safe_open's get_dtype() reports it.
std::string code(backplane::DType dtype) {
  switch (dtype) {
    case backplane::DType::kFloat32:
      return "F32";
    case backplane::DType::kFloat16:
      return "F16";
    case backplane::DType::kBFloat16:
      return "BF16";
    default:
      return backplane::to_string(dtype);
  }
}

class SafetensorsRoundTrip : public ::testing::Test {
 protected:
  void SetUp() override {
    if (manifest().is_null()) {
      GTEST_SKIP() << "BACKPLANE_SAFETENSORS_FIXTURES names no fixtures (run through ctest)";
    }
  }
};

TEST_F(SafetensorsRoundTrip, ConfigAndWeightsGiveWhatFromPretrainedLoads) {
  int compared = 0;
  int sharded = 0;
  for (const Json& fixture : manifest()["fixtures"]) {
    if (fixture["kind"] != "config") continue;
    SCOPED_TRACE(fixture["name"].get<std::string>());
    const backplane::ModelDescription d =
        backplane::model_from_safetensors(fixture["path"].get<std::string>());
    EXPECT_TRUE(d.from_config);
    EXPECT_EQ(backplane::to_string(d.dtype), fixture["dtype"].get<std::string>());
    Json modules = Json::array();
    Json parameters = Json::array();
    Json buffers = Json::array();
    for (const backplane::NamedModule& named : backplane::named_modules(d.root)) {
      modules.push_back({named.name, named.module->class_name});
    }
    for (const backplane::NamedModule& named : backplane::named_modules(d.root)) {
      for (const backplane::TensorInfo& t : named.module->tensors) {
        const std::string name = named.name.empty() ? t.name : named.name + "." + t.name;
        if (t.buffer) {
          buffers.push_back({name, t.shape, backplane::to_string(t.dtype), t.persistent});
        } else {
          parameters.push_back({name, t.shape, backplane::to_string(t.dtype)});
        }
      }
    }
    EXPECT_EQ(modules, fixture["modules"]);
    EXPECT_EQ(parameters, fixture["parameters"]);
    EXPECT_EQ(buffers, fixture["buffers"]);
    ++compared;
    if (fixture["sharded"].get<bool>()) ++sharded;
  }
  EXPECT_GE(compared, 4);
  EXPECT_GE(sharded, 2);
}

TEST_F(SafetensorsRoundTrip, WeightsAloneGiveTheStoredTensors) {
  int compared = 0;
  for (const Json& fixture : manifest()["fixtures"]) {
    if (fixture["kind"] != "weights") continue;
    SCOPED_TRACE(fixture["name"].get<std::string>());
    const backplane::ModelDescription d =
        backplane::model_from_safetensors(fixture["path"].get<std::string>());
    EXPECT_FALSE(d.from_config);
    Json tensors = Json::array();
    for (const backplane::NamedModule& named : backplane::named_modules(d.root)) {
      for (const backplane::TensorInfo& t : named.module->tensors) {
        EXPECT_FALSE(t.buffer);
        tensors.push_back(
            {named.name.empty() ? t.name : named.name + "." + t.name, t.shape, code(t.dtype)});
      }
    }
    std::sort(tensors.begin(), tensors.end());
    EXPECT_EQ(tensors, fixture["tensors"]);
    // The known layout comes first, in definition order.
    const std::vector<backplane::NamedModule> modules = backplane::named_modules(d.root);
    ASSERT_GE(modules.size(), 4u);
    EXPECT_EQ(modules[1].name, "model");
    EXPECT_EQ(modules[2].name, "model.embed_tokens");
    EXPECT_EQ(modules[3].name, "model.layers");
    ++compared;
  }
  EXPECT_GE(compared, 4);
}

}  // namespace
