// Device strings: every rule of docs/device-rules.md §1, with its exact message.
#include <backplane/error.hpp>
#include <backplane/rules/device.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

using backplane::Device;
using backplane::InvalidArgument;
using backplane::parse_device;

struct Valid {
  const char* text;
  const char* type;
  std::optional<int> index;
};

void PrintTo(const Valid& v, std::ostream* os) {
  *os << '\'' << v.text << '\'';
}

class ValidDeviceString : public ::testing::TestWithParam<Valid> {};

TEST_P(ValidDeviceString, ParsesTypeAndIndex) {
  const Valid& c = GetParam();
  const Device d = parse_device(c.text);
  EXPECT_EQ(d.type(), c.type);
  EXPECT_EQ(d.index(), c.index);
  EXPECT_EQ(d.str(), c.text);  // round trip
}

INSTANTIATE_TEST_SUITE_P(
    C10Grammar, ValidDeviceString,
    ::testing::Values(Valid{"cpu", "cpu", std::nullopt}, Valid{"cpu:0", "cpu", 0},
                      Valid{"cuda", "cuda", std::nullopt}, Valid{"cuda:0", "cuda", 0},
                      Valid{"cuda:3", "cuda", 3}, Valid{"cuda:10", "cuda", 10},
                      Valid{"cuda:2147483647", "cuda", 2147483647}, Valid{"xpu:1", "xpu", 1},
                      Valid{"mps", "mps", std::nullopt}, Valid{"hpu:7", "hpu", 7},
                      Valid{"npu:0", "npu", 0}, Valid{"mlu:2", "mlu", 2},
                      Valid{"musa:1", "musa", 1}, Valid{"neuron:0", "neuron", 0},
                      Valid{"tpu:3", "tpu", 3}, Valid{"meta", "meta", std::nullopt}));

struct Invalid {
  const char* text;
  const char* message;
};

void PrintTo(const Invalid& v, std::ostream* os) {
  *os << '\'' << v.text << '\'';
}

class InvalidDeviceString : public ::testing::TestWithParam<Invalid> {};

TEST_P(InvalidDeviceString, ThrowsWithC10Message) {
  const Invalid& c = GetParam();
  try {
    parse_device(c.text);
    FAIL() << "parsed '" << c.text << "'";
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), c.message);
  }
}

const char* const kExpectedTypes =
    "Expected one of cpu, cuda, xpu, mps, hpu, npu, mlu, musa, neuron, tpu, meta device type at "
    "start of device string: ";

INSTANTIATE_TEST_SUITE_P(
    C10Grammar, InvalidDeviceString,
    ::testing::Values(
        Invalid{"", "Device string must not be empty"},
        Invalid{" cuda", "Invalid device string: ' cuda'"},
        Invalid{"cuda ", "Invalid device string: 'cuda '"},
        Invalid{"cuda: 1", "Invalid device string: 'cuda: 1'"},
        Invalid{"cu da", "Invalid device string: 'cu da'"},
        Invalid{"cuda-1", "Invalid device string: 'cuda-1'"},
        Invalid{"cuda1", "Invalid device string: 'cuda1'"},
        Invalid{"cuda:", "Invalid device string: 'cuda:'"},
        Invalid{"cuda:-1", "Invalid device string: 'cuda:-1'"},
        Invalid{"cuda:+1", "Invalid device string: 'cuda:+1'"},
        Invalid{"cuda:01", "Invalid device string: 'cuda:01'"},
        Invalid{"cuda:00", "Invalid device string: 'cuda:00'"},
        Invalid{"cuda:1x", "Invalid device string: 'cuda:1x'"},
        Invalid{"cuda:1:2", "Invalid device string: 'cuda:1:2'"},
        Invalid{"cuda::1", "Invalid device string: 'cuda::1'"},
        Invalid{":1", "Invalid device string: ':1'"}, Invalid{"1", "Invalid device string: '1'"},
        Invalid{"cuda:99999999999",
                "Could not parse device index '99999999999' in device string 'cuda:99999999999'"},
        Invalid{"cuda:2147483648",
                "Could not parse device index '2147483648' in device string 'cuda:2147483648'"},
        Invalid{"CUDA:0",
                "Expected one of cpu, cuda, xpu, mps, hpu, npu, mlu, musa, neuron, tpu, "
                "meta device type at start of device string: CUDA"},
        Invalid{"gpu",
                "Expected one of cpu, cuda, xpu, mps, hpu, npu, mlu, musa, neuron, tpu, "
                "meta device type at start of device string: gpu"},
        Invalid{"cpu:1", "CPU device index must be absent or zero, got 1"}));

TEST(DeviceTypes, UnknownNameListsTheKnownOnes) {
  try {
    parse_device("fancy:0");
    FAIL();
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), std::string(kExpectedTypes) + "fancy");
  }
}

TEST(DeviceTypes, ARegisteredNameParses) {
  std::vector<std::string> known = backplane::builtin_device_types();
  EXPECT_THROW(parse_device("fancy:2", known), InvalidArgument);
  known.push_back("fancy");
  EXPECT_EQ(parse_device("fancy:2", known), Device("fancy", 2));
}

TEST(DeviceTypes, BuiltinsCoverTheHardwareTable) {
  const auto& types = backplane::builtin_device_types();
  for (const char* name :
       {"cpu", "cuda", "xpu", "mps", "hpu", "npu", "mlu", "musa", "neuron", "tpu", "meta"}) {
    EXPECT_NE(std::find(types.begin(), types.end(), name), types.end()) << name;
  }
}

struct Reserved {
  const char* type;
  std::vector<std::string> owners;
};

// The test name's parameter, readable in ctest and GoogleTest output.
inline void PrintTo(const Reserved& x, std::ostream* os) {
  *os << x.type;
}

class ReservedTypes : public ::testing::TestWithParam<Reserved> {};

TEST_P(ReservedTypes, OnlyOwnersMayRegister) {
  EXPECT_EQ(backplane::reserved_type_owners(GetParam().type), GetParam().owners);
}

INSTANTIATE_TEST_SUITE_P(
    Spec, ReservedTypes,
    ::testing::Values(Reserved{"cpu", {"cpu", "sim"}}, Reserved{"cuda", {"cuda", "rocm", "sim"}},
                      Reserved{"hip", {"rocm", "sim"}}, Reserved{"mps", {"mps", "sim"}},
                      Reserved{"xpu", {"xpu", "sim"}}, Reserved{"mtia", {"mtia", "sim"}},
                      Reserved{"npu", {}}, Reserved{"fancy", {}}));

TEST(DeviceTypeName, LettersAndUnderscoreOnly) {
  EXPECT_TRUE(backplane::is_valid_device_type_name("privateuseone"));
  EXPECT_TRUE(backplane::is_valid_device_type_name("my_npu"));
  EXPECT_FALSE(backplane::is_valid_device_type_name(""));
  EXPECT_FALSE(backplane::is_valid_device_type_name("npu2"));
  EXPECT_FALSE(backplane::is_valid_device_type_name("n-pu"));
}

TEST_P(InvalidDeviceString, TheOneStringConstructorRefusesTheSameGrammar) {
  const Invalid& c = GetParam();
  if (std::string(c.message).rfind("Expected one of", 0) == 0) {
    // A well-formed name of no builtin type: plugins add types, so the constructor takes it.
    EXPECT_EQ(Device(c.text).str(), c.text);
    return;
  }
  try {
    Device device(c.text);
    FAIL() << "constructed " << device.str();
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()), c.message);
  }
}

TEST(DeviceValue, OneStringIsADeviceStringAndTwoAreTypeAndIndex) {
  EXPECT_EQ(Device("cuda:1"), Device("cuda", 1));
  EXPECT_EQ(Device("cuda:1").type(), "cuda");
  EXPECT_EQ(Device("cpu"), Device("cpu", std::nullopt));
  EXPECT_EQ(Device("zpu:3").index(), 3);  // a plugin's own type
  const struct {
    std::string type;
    std::optional<int> index;
    const char* message;
  } refused[] = {
      {"", 0, "Device type '' is not a device type name ([a-zA-Z_]+, such as cpu or cuda)"},
      {"cuda:1", std::nullopt,
       "Device type 'cuda:1' is not a device type name ([a-zA-Z_]+, such as cpu or cuda); parse "
       "a device string such as 'cuda:1' with Device(\"cuda:1\")"},
      {"cpu", -5, "Device index must not be negative, got -5 for cpu"},
      {"cu da", 0,
       "Device type 'cu da' is not a device type name ([a-zA-Z_]+, such as cpu or cuda)"},
  };
  for (const auto& c : refused) {
    SCOPED_TRACE(c.type);
    try {
      Device device(c.type, c.index);
      ADD_FAILURE() << "constructed " << device.str();
    } catch (const InvalidArgument& e) {
      EXPECT_EQ(std::string(e.what()), c.message);
    }
  }
}

TEST(DeviceValue, EqualityAndPrinting) {
  EXPECT_EQ(Device("cuda", 1), Device("cuda", 1));
  EXPECT_NE(Device("cuda", 1), Device("cuda"));
  EXPECT_EQ(Device("xpu:2"), Device("xpu", 2));
  EXPECT_NE(Device("cuda", 1), Device("xpu", 1));
  std::ostringstream os;
  os << Device("xpu", 2);
  EXPECT_EQ(os.str(), "xpu:2");
}

}  // namespace
