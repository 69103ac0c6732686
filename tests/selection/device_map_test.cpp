// parse_device_map: every form of from_pretrained's device_map and transformers' errors
// (integrations/accelerate.py check_and_set_device_map).
#include <backplane/error.hpp>
#include <backplane/rules/selection.hpp>

#include <gtest/gtest.h>

#include "expect_error.hpp"

namespace {

using backplane::DeviceMapKind;
using backplane::DeviceMapTarget;
using backplane::InvalidArgument;
using backplane::parse_device_map;
using selection_test::error_of;

const std::string kStringError =
    "When passing device_map as a string, the value needs to be a device name (e.g. cpu, cuda:0) "
    "or 'auto', 'balanced', 'balanced_low_0', 'sequential' but found ";
const std::string kNegativeError =
    "You can't pass device_map as a negative int. If you want to put the model on the cpu, pass "
    "device_map = 'cpu' ";

struct Strategy {
  const char* text;
  DeviceMapKind kind;
};

void PrintTo(const Strategy& row, std::ostream* os) {
  *os << row.text;
}

class DeviceMapStrategy : public ::testing::TestWithParam<Strategy> {};

TEST_P(DeviceMapStrategy, HasNoModules) {
  const auto request = parse_device_map(GetParam().text);
  EXPECT_EQ(request.kind, GetParam().kind);
  EXPECT_TRUE(request.is_strategy());
  EXPECT_TRUE(request.modules.empty());
  EXPECT_EQ(request.str(), GetParam().text);
  EXPECT_STREQ(backplane::to_string(request.kind), GetParam().text);
}

INSTANTIATE_TEST_SUITE_P(All, DeviceMapStrategy,
                         ::testing::Values(Strategy{"auto", DeviceMapKind::kAuto},
                                           Strategy{"balanced", DeviceMapKind::kBalanced},
                                           Strategy{"balanced_low_0", DeviceMapKind::kBalancedLow0},
                                           Strategy{"sequential", DeviceMapKind::kSequential}));

struct DeviceRow {
  const char* text;
  const char* device;  // the target as written
};

void PrintTo(const DeviceRow& row, std::ostream* os) {
  *os << row.text;
}

class DeviceMapDevice : public ::testing::TestWithParam<DeviceRow> {};

TEST_P(DeviceMapDevice, IsOneTargetForTheWholeModel) {
  const auto request = parse_device_map(GetParam().text);
  EXPECT_EQ(request.kind, DeviceMapKind::kDevice);
  EXPECT_FALSE(request.is_strategy());
  ASSERT_EQ(request.modules.size(), 1u);
  EXPECT_EQ(request.modules[0].first, "");
  EXPECT_EQ(request.modules[0].second.kind, DeviceMapTarget::Kind::kDevice);
  EXPECT_EQ(request.modules[0].second.device.str(), GetParam().device);
  EXPECT_EQ(request.str(), GetParam().device);
}

INSTANTIATE_TEST_SUITE_P(All, DeviceMapDevice,
                         ::testing::Values(DeviceRow{"cpu", "cpu"}, DeviceRow{"cuda:3", "cuda:3"},
                                           DeviceRow{"cuda", "cuda"}, DeviceRow{"neuron", "neuron"},
                                           DeviceRow{"mps", "mps"}, DeviceRow{"xpu:1", "xpu:1"},
                                           DeviceRow{"meta", "meta"}));

TEST(DeviceMapIndex, DigitsAreTheIntForm) {
  for (const auto& [text, index] : {std::pair{"0", 0}, std::pair{"3", 3}, std::pair{"07", 7}}) {
    const auto request = parse_device_map(text);
    EXPECT_EQ(request.kind, DeviceMapKind::kIndex) << text;
    ASSERT_EQ(request.modules.size(), 1u);
    EXPECT_EQ(request.modules[0].first, "");
    EXPECT_EQ(request.modules[0].second.kind, DeviceMapTarget::Kind::kIndex);
    EXPECT_EQ(request.modules[0].second.index, index);
  }
  EXPECT_EQ(backplane::parse_device_map_index(2).modules[0].second.index, 2);
}

TEST(DeviceMapIndex, NegativeHasTransformersMessageWithItsTrailingSpace) {
  EXPECT_EQ(error_of<InvalidArgument>([] { parse_device_map("-1"); }), kNegativeError);
  EXPECT_EQ(error_of<InvalidArgument>([] { backplane::parse_device_map_index(-7); }),
            kNegativeError);
}

TEST(DeviceMapIndex, TooLargeIsRefused) {
  EXPECT_NE(error_of<InvalidArgument>([] { parse_device_map("99999999999"); }).find("too large"),
            std::string::npos);
}

class DeviceMapBadString : public ::testing::TestWithParam<const char*> {};

TEST_P(DeviceMapBadString, HasTransformersMessage) {
  const std::string text = GetParam();
  EXPECT_EQ(error_of<InvalidArgument>([&] { parse_device_map(text); }), kStringError + text + ".");
}

INSTANTIATE_TEST_SUITE_P(All, DeviceMapBadString,
                         ::testing::Values("", "foo", "Auto", "AUTO", "CUDA", "CUDA:0", "cuda:01",
                                           "cuda:-1", "cuda:", "disk", " cuda", "cuda:1:2",
                                           "balanced_low_1", "+1", "1.5", "[0]", "cpu:1",
                                           "cuda:99999999999"));

TEST(DeviceMapBadString, KnownTypesDecide) {
  // A type a loaded plugin registered is a device name too; without it the string is an error.
  EXPECT_EQ(parse_device_map("gaudix:1", {"cpu", "gaudix"}).modules[0].second.device.str(),
            "gaudix:1");
  EXPECT_EQ(error_of<InvalidArgument>([] { parse_device_map("gaudix:1"); }),
            kStringError + "gaudix:1.");
}

TEST(DeviceMapDict, KeepsModuleOrderAndTargets) {
  const auto request = parse_device_map(R"({"model.embed_tokens": 0, "model.layers.0": "cuda:1", )"
                                        R"("model.norm": "cpu", "lm_head": "disk"})");
  EXPECT_EQ(request.kind, DeviceMapKind::kExplicit);
  EXPECT_FALSE(request.is_strategy());
  ASSERT_EQ(request.modules.size(), 4u);
  EXPECT_EQ(request.modules[0].first, "model.embed_tokens");
  EXPECT_EQ(request.modules[0].second.kind, DeviceMapTarget::Kind::kIndex);
  EXPECT_EQ(request.modules[0].second.index, 0);
  EXPECT_EQ(request.modules[1].first, "model.layers.0");
  EXPECT_EQ(request.modules[1].second.device.str(), "cuda:1");
  EXPECT_EQ(request.modules[2].second.str(), "cpu");
  EXPECT_EQ(request.modules[3].first, "lm_head");
  EXPECT_EQ(request.modules[3].second.kind, DeviceMapTarget::Kind::kDisk);
  EXPECT_EQ(request.str(),
            R"({"model.embed_tokens":0,"model.layers.0":"cuda:1","model.norm":"cpu",)"
            R"("lm_head":"disk"})");
  EXPECT_EQ(parse_device_map(request.str()).str(), request.str());
}

TEST(DeviceMapDict, EmptyObjectIsExplicit) {
  const auto request = parse_device_map("{}");
  EXPECT_EQ(request.kind, DeviceMapKind::kExplicit);
  EXPECT_FALSE(request.is_strategy());
  EXPECT_TRUE(request.modules.empty());
}

struct BadDict {
  const char* text;
  const char* fragment;
};

void PrintTo(const BadDict& row, std::ostream* os) {
  *os << row.text;
}

class DeviceMapBadDict : public ::testing::TestWithParam<BadDict> {};

TEST_P(DeviceMapBadDict, NamesTheModule) {
  const std::string message = error_of<InvalidArgument>([] { parse_device_map(GetParam().text); });
  EXPECT_NE(message.find(GetParam().fragment), std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(
    All, DeviceMapBadDict,
    ::testing::Values(BadDict{R"({"lm_head": -1})", "device_map entry 'lm_head'"},
                      BadDict{R"({"lm_head": "CUDA"})", "device_map entry 'lm_head'"},
                      BadDict{R"({"a": true})", "found true"},
                      BadDict{R"({"a": 1.5})", "found 1.5"},
                      BadDict{R"({"a": 0)", "not a valid JSON object"},
                      BadDict{R"({"a": 1} trailing)", "not a valid JSON object"}));

}  // namespace
