// Table tests of the manifest parser (core/src/manifest.cpp, white box).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <ostream>
#include <string>

#include "manifest.hpp"
#include "temp_folder.hpp"

namespace backplane::detail {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

const std::filesystem::path kManifest = "/opt/backplane/plugins/cpu.json";

// A manifest with `plugin_fields` as the body of "plugin".
std::string with_plugin(const std::string& plugin_fields,
                        const std::string& format = R"("1.0.0")") {
  return R"({"file_format_version": )" + format + R"(, "plugin": {)" + plugin_fields + "}}";
}

const std::string kName = R"("name": "cpu")";
const std::string kLibrary = R"("library_path": "libbackplane-cpu.so")";
const std::string kAbi = R"("abi_version": "1.1")";
const std::string kTypes = R"("device_types": ["cpu"])";
std::string fields(std::initializer_list<std::string> items) {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}
const std::string kAllFields = fields({kName, kLibrary, kAbi, kTypes});

TEST(ParseManifest, Valid) {
  const Manifest m = parse_manifest(with_plugin(kAllFields), kManifest);
  EXPECT_EQ(m.name, "cpu");
  EXPECT_EQ(m.library, "/opt/backplane/plugins/libbackplane-cpu.so");
  EXPECT_EQ(m.abi_major, 1u);
  EXPECT_EQ(m.abi_minor, 1u);
  EXPECT_THAT(m.device_types, ElementsAre("cpu"));
}

TEST(ParseManifest, AbsoluteLibraryPathIsKept) {
  const Manifest m = parse_manifest(
      with_plugin(fields({kName, R"("library_path": "/usr/lib/x/../libcpu.so")", kAbi, kTypes})),
      kManifest);
  EXPECT_EQ(m.library, "/usr/lib/libcpu.so");
}

TEST(ParseManifest, RelativeLibraryPathIsNormalized) {
  const Manifest m = parse_manifest(
      with_plugin(fields({kName, R"("library_path": "./lib/../x/./libcpu.so")", kAbi, kTypes})),
      kManifest);
  EXPECT_EQ(m.library, "/opt/backplane/plugins/x/libcpu.so");
  EXPECT_TRUE(m.library_is_relative);
}

TEST(ParseManifest, AnyFileFormat1xAndUnknownFieldsAreAccepted) {
  const Manifest m = parse_manifest(
      R"({"file_format_version": "1.7.2", "comment": "from the future",
          "plugin": {"name": "my-plugin_2", "library_path": "lib.so", "abi_version": "1.12",
                     "device_types": ["fake_one", "FakeTwo"], "library_arch": "x86_64"}})",
      kManifest);
  EXPECT_EQ(m.name, "my-plugin_2");
  EXPECT_EQ(m.abi_major, 1u);
  EXPECT_EQ(m.abi_minor, 12u);
  EXPECT_THAT(m.device_types, ElementsAre("fake_one", "FakeTwo"));
}

struct InvalidManifest {
  const char* test_name;
  std::string text;
  std::string message;  // the whole ManifestError text, or its start for JSON errors
};

// Names the case in messages and in ctest's test names.
void PrintTo(const InvalidManifest& bad, std::ostream* os) {
  *os << bad.test_name;
}

class ParseManifestInvalid : public ::testing::TestWithParam<InvalidManifest> {};

TEST_P(ParseManifestInvalid, ThrowsWithMessage) {
  try {
    parse_manifest(GetParam().text, kManifest);
    FAIL() << "accepted: " << GetParam().text;
  } catch (const ManifestError& e) {
    EXPECT_THAT(e.what(), StartsWith(GetParam().message));
  }
}

const std::string kLongName(65, 'a');

INSTANTIATE_TEST_SUITE_P(
    Table, ParseManifestInvalid,
    ::testing::Values(
        InvalidManifest{"Empty", "", "not valid JSON: "},
        InvalidManifest{"Truncated", R"({"file_format_version": "1.0.0", "plugin": {)",
                        "not valid JSON: "},
        InvalidManifest{"TopLevelArray", "[]", "the top level must be a JSON object"},
        InvalidManifest{"NoFormatVersion", R"({"plugin": {}})",
                        R"(missing "file_format_version" in the manifest)"},
        InvalidManifest{"FormatVersionNumber", with_plugin(kAllFields, "1"),
                        R"("file_format_version" in the manifest must be a non-empty string)"},
        InvalidManifest{"FormatVersion2", with_plugin(kAllFields, R"("2.0.0")"),
                        R"(file_format_version "2.0.0" is not supported; this core reads 1.x.y)"},
        InvalidManifest{"FormatVersion10", with_plugin(kAllFields, R"("10.0.0")"),
                        R"(file_format_version "10.0.0" is not supported)"},
        InvalidManifest{"NoPlugin", R"({"file_format_version": "1.0.0"})",
                        R"(missing "plugin" in the manifest)"},
        InvalidManifest{"PluginNotObject", R"({"file_format_version": "1.0.0", "plugin": "cpu"})",
                        R"("plugin" must be a JSON object)"},
        InvalidManifest{"NoName", with_plugin(fields({kLibrary, kAbi, kTypes})),
                        R"(missing "name" in "plugin")"},
        InvalidManifest{"EmptyName", with_plugin(fields({R"("name": "")", kLibrary, kAbi, kTypes})),
                        R"("name" in "plugin" must be a non-empty string)"},
        InvalidManifest{"NameNotString",
                        with_plugin(fields({R"("name": 7)", kLibrary, kAbi, kTypes})),
                        R"("name" in "plugin" must be a non-empty string)"},
        InvalidManifest{"UppercaseName",
                        with_plugin(fields({R"("name": "CPU")", kLibrary, kAbi, kTypes})),
                        R"(plugin name "CPU" must be 1-64 characters of a-z, 0-9, '_' or '-')"},
        InvalidManifest{"NameWithSlash",
                        with_plugin(fields({R"("name": "../cpu")", kLibrary, kAbi, kTypes})),
                        R"(plugin name "../cpu" must be 1-64 characters)"},
        InvalidManifest{
            "NameTooLong",
            with_plugin(fields({R"("name": ")" + kLongName + "\"", kLibrary, kAbi, kTypes})),
            "plugin name \"" + kLongName + "\" must be 1-64 characters"},
        InvalidManifest{"NoLibraryPath", with_plugin(fields({kName, kAbi, kTypes})),
                        R"(missing "library_path" in "plugin")"},
        InvalidManifest{
            "RelativeLibraryPathLeavesTheFolder",
            with_plugin(fields({kName, R"("library_path": "../lib/./libcpu.so")", kAbi, kTypes})),
            R"(library_path "../lib/./libcpu.so" leaves the manifest's folder)"},
        InvalidManifest{"EmptyLibraryPath",
                        with_plugin(fields({kName, R"("library_path": "")", kAbi, kTypes})),
                        R"("library_path" in "plugin" must be a non-empty string)"},
        InvalidManifest{"NoAbiVersion", with_plugin(fields({kName, kLibrary, kTypes})),
                        R"(missing "abi_version" in "plugin")"},
        InvalidManifest{"AbiVersionWord",
                        with_plugin(fields({kName, kLibrary, R"("abi_version": "one")", kTypes})),
                        R"(abi_version "one" is not MAJOR.MINOR, e.g. "1.0")"},
        InvalidManifest{"AbiVersionNoMinor",
                        with_plugin(fields({kName, kLibrary, R"("abi_version": "1")", kTypes})),
                        R"(abi_version "1" is not MAJOR.MINOR)"},
        InvalidManifest{"AbiVersionThreeParts",
                        with_plugin(fields({kName, kLibrary, R"("abi_version": "1.1.0")", kTypes})),
                        R"(abi_version "1.1.0" is not MAJOR.MINOR)"},
        InvalidManifest{"AbiVersionNegative",
                        with_plugin(fields({kName, kLibrary, R"("abi_version": "-1.0")", kTypes})),
                        R"(abi_version "-1.0" is not MAJOR.MINOR)"},
        InvalidManifest{"AbiVersionNumber",
                        with_plugin(fields({kName, kLibrary, R"("abi_version": 1.1)", kTypes})),
                        R"("abi_version" in "plugin" must be a non-empty string)"},
        InvalidManifest{"NoDeviceTypes", with_plugin(fields({kName, kLibrary, kAbi})),
                        R"(missing "device_types" in "plugin")"},
        InvalidManifest{"EmptyDeviceTypes",
                        with_plugin(fields({kName, kLibrary, kAbi, R"("device_types": [])"})),
                        R"("device_types" must be a non-empty array of device type names)"},
        InvalidManifest{"DeviceTypesString",
                        with_plugin(fields({kName, kLibrary, kAbi, R"("device_types": "cpu")"})),
                        R"("device_types" must be a non-empty array of device type names)"},
        InvalidManifest{
            "DeviceTypeWithDash",
            with_plugin(fields({kName, kLibrary, kAbi, R"("device_types": ["cu-da"])"})),
            R"(device type "cu-da" in "device_types" is not a name of letters and '_')"},
        InvalidManifest{"DeviceTypeNumber",
                        with_plugin(fields({kName, kLibrary, kAbi, R"("device_types": [1])"})),
                        R"(device type 1 in "device_types" is not a name of letters and '_')"}),
    [](const ::testing::TestParamInfo<InvalidManifest>& p) { return p.param.test_name; });

TEST(ParseAbiVersion, Valid) {
  EXPECT_EQ(parse_abi_version("1.0", "abi_version"), (std::pair<uint32_t, uint32_t>{1, 0}));
  EXPECT_EQ(parse_abi_version("2.15", "abi_version"), (std::pair<uint32_t, uint32_t>{2, 15}));
  EXPECT_EQ(parse_abi_version("999999999.0", "v"), (std::pair<uint32_t, uint32_t>{999999999, 0}));
}

TEST(ParseAbiVersion, InvalidNamesWhatWasParsed) {
  for (const char* bad :
       {"", ".", "1.", ".1", "1.x", "1,1", " 1.1", "1.1 ", "+1.1", "1234567890.0"}) {
    try {
      parse_abi_version(bad, "the ABI");
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const ManifestError& e) {
      EXPECT_EQ(std::string(e.what()),
                std::string("the ABI \"") + bad + "\" is not MAJOR.MINOR, e.g. \"1.0\"");
    }
  }
}

TEST(ReadManifest, MissingFile) {
  backplane::testing::TempFolder dir;
  try {
    read_manifest(dir.path() / "none.json");
    FAIL() << "read a missing file";
  } catch (const ManifestError& e) {
    EXPECT_EQ(std::string(e.what()), "manifest does not exist");
  }
}

TEST(ReadManifest, TooLargeIsRefusedUnread) {
  backplane::testing::TempFolder dir;
  const std::filesystem::path file = dir.path() / "big.json";
  std::ofstream(file) << std::string(kMaxManifestBytes + 1, ' ');
  try {
    read_manifest(file);
    FAIL() << "read a file over the limit";
  } catch (const ManifestError& e) {
    EXPECT_EQ(std::string(e.what()), "manifest is " + std::to_string(kMaxManifestBytes + 1) +
                                         " bytes; at most " + std::to_string(kMaxManifestBytes) +
                                         " are accepted");
  }
}

TEST(ReadManifest, ResolvesAgainstItsFolder) {
  backplane::testing::TempFolder dir;
  const std::filesystem::path file = dir.path() / "cpu.json";
  std::ofstream(file) << with_plugin(kAllFields);
  const Manifest m = read_manifest(file);
  EXPECT_EQ(m.name, "cpu");
  EXPECT_EQ(m.library, dir.path() / "libbackplane-cpu.so");
}

}  // namespace
}  // namespace backplane::detail
