// Visibility variables, docs/device-rules.md §5, as tables: ZE_AFFINITY_MASK and its companions
// (core/src/visibility/level_zero.cpp).
#include "visibility_test_support.hpp"

namespace {

using namespace visibility_test;

// ---- Level Zero
// -----------------------------------------------------------------------------------

struct ZeCase {
  const char* name;
  std::optional<const char*> mask, hierarchy, pci_order;
  std::vector<backplane::LevelZeroDevice> devices;
  const char* variable;
};
PRINTS_NAME(ZeCase)

std::string describe(const std::vector<backplane::LevelZeroDevice>& devices) {
  std::string out;
  for (const auto& d : devices) {
    out += " " + std::to_string(d.root) + "." + std::to_string(d.sub_device) + "[";
    for (int s : d.sub_devices) out += std::to_string(s);
    out += "]";
  }
  return out;
}

class LevelZero : public ::testing::TestWithParam<ZeCase> {};

TEST_P(LevelZero, EnumeratesWithoutReordering) {
  const ZeCase& c = GetParam();
  backplane::LevelZeroVariables variables;
  variables.affinity_mask = opt(c.mask);
  variables.flat_device_hierarchy = opt(c.hierarchy);
  variables.enable_pci_id_device_order = opt(c.pci_order);
  const backplane::LevelZeroVisibility v = backplane::level_zero_visible(variables, kIntel);
  EXPECT_EQ(describe(v.devices), describe(c.devices)) << notes_of(v.notes);
  EXPECT_EQ(v.variable, c.variable);
}

using Z = backplane::LevelZeroDevice;
const Z kR2{2, -1, {}};

INSTANTIATE_TEST_SUITE_P(
    Flat, LevelZero,
    ::testing::Values(
        ZeCase{"NoVariables",
               kUnset,
               kUnset,
               kUnset,
               {{1, 0, {}}, {1, 1, {}}, {0, 0, {}}, {0, 1, {}}, kR2},
               ""},
        ZeCase{"MaskDoesNotReorder",
               "3,0",
               kUnset,
               kUnset,
               {{1, 0, {}}, {0, 1, {}}},
               "ZE_AFFINITY_MASK"},
        ZeCase{"DotEntriesIgnored", "0.1,4", kUnset, kUnset, {kR2}, "ZE_AFFINITY_MASK"},
        ZeCase{"OutOfRangeIgnored", "7", kUnset, kUnset, {}, "ZE_AFFINITY_MASK"},
        ZeCase{"UnreadableIgnored", "abc,1", kUnset, kUnset, {{1, 1, {}}}, "ZE_AFFINITY_MASK"},
        ZeCase{"StoulBaseZero", "0x2, 04", kUnset, kUnset, {{0, 0, {}}, kR2}, "ZE_AFFINITY_MASK"},
        ZeCase{"TrailingJunkRead", "1abc", kUnset, kUnset, {{1, 1, {}}}, "ZE_AFFINITY_MASK"},
        ZeCase{"NegativeWrapsOutOfRange", "-1", kUnset, kUnset, {}, "ZE_AFFINITY_MASK"},
        ZeCase{"RepeatHarmless", "2,2", kUnset, kUnset, {{0, 0, {}}}, "ZE_AFFINITY_MASK"},
        ZeCase{"DefaultMeansNoMask",
               "default",
               kUnset,
               kUnset,
               {{1, 0, {}}, {1, 1, {}}, {0, 0, {}}, {0, 1, {}}, kR2},
               ""},
        ZeCase{"EmptyMeansNoMask",
               "",
               kUnset,
               kUnset,
               {{1, 0, {}}, {1, 1, {}}, {0, 0, {}}, {0, 1, {}}, kR2},
               ""},
        ZeCase{"ExplicitFlat", "1", "FLAT", kUnset, {{1, 1, {}}}, "ZE_AFFINITY_MASK"},
        ZeCase{"UnknownHierarchyIsFlat",
               kUnset,
               "flat",
               kUnset,
               {{1, 0, {}}, {1, 1, {}}, {0, 0, {}}, {0, 1, {}}, kR2},
               ""},
        ZeCase{"CombinedListsTiles",
               "1,2",
               "COMBINED",
               kUnset,
               {{1, 1, {}}, {0, 0, {}}},
               "ZE_AFFINITY_MASK"},
        ZeCase{"PciOrder",
               kUnset,
               kUnset,
               "1",
               {kR2, {1, 0, {}}, {1, 1, {}}, {0, 0, {}}, {0, 1, {}}},
               "ZE_ENABLE_PCI_ID_DEVICE_ORDER"},
        ZeCase{"PciOrderMovesMaskIndices", "0", kUnset, "1", {kR2}, "ZE_AFFINITY_MASK"},
        ZeCase{"PciOrderTrueIsOff",
               kUnset,
               kUnset,
               "true",
               {{1, 0, {}}, {1, 1, {}}, {0, 0, {}}, {0, 1, {}}, kR2},
               ""}),
    case_name<ZeCase>);

INSTANTIATE_TEST_SUITE_P(
    Composite, LevelZero,
    ::testing::Values(
        ZeCase{"NoMask",
               kUnset,
               "COMPOSITE",
               kUnset,
               {{1, -1, {0, 1}}, {0, -1, {0, 1}}, kR2},
               "ZE_FLAT_DEVICE_HIERARCHY"},
        ZeCase{"WholeRoot", "1", "COMPOSITE", kUnset, {{0, -1, {0, 1}}}, "ZE_AFFINITY_MASK"},
        ZeCase{"OneTileBecomesTheDevice",
               "0.1",
               "COMPOSITE",
               kUnset,
               {{1, 1, {}}},
               "ZE_AFFINITY_MASK"},
        ZeCase{"TwoTilesStayNested",
               "0.0,0.1",
               "COMPOSITE",
               kUnset,
               {{1, -1, {0, 1}}},
               "ZE_AFFINITY_MASK"},
        ZeCase{"MissingTileIgnored", "0.2", "COMPOSITE", kUnset, {}, "ZE_AFFINITY_MASK"},
        ZeCase{"MaskDoesNotReorder",
               "1,0.1",
               "COMPOSITE",
               kUnset,
               {{1, 1, {}}, {0, -1, {0, 1}}},
               "ZE_AFFINITY_MASK"},
        ZeCase{"ThreePartsDoNothing", "0.1.0", "COMPOSITE", kUnset, {}, "ZE_AFFINITY_MASK"},
        ZeCase{"RootOutOfRangeIgnored", "3,2", "COMPOSITE", kUnset, {kR2}, "ZE_AFFINITY_MASK"},
        ZeCase{"SingleTileRootByTile", "2.0", "COMPOSITE", kUnset, {kR2}, "ZE_AFFINITY_MASK"}),
    case_name<ZeCase>);

TEST(LevelZero, NotesEachIgnoredEntry) {
  backplane::LevelZeroVariables variables;
  variables.affinity_mask = "0.1,9";
  const auto v = backplane::level_zero_visible(variables, kIntel);
  EXPECT_TRUE(v.devices.empty());
  const std::vector<std::string> expected = {
      "ZE_AFFINITY_MASK='0.1,9': entry '0.1' is ignored: FLAT numbers tiles as devices, so "
      "'device.sub-device' does not apply",
      "ZE_AFFINITY_MASK='0.1,9': entry '9' is ignored: there are 5 devices (tiles)",
      "no device is visible"};
  for (const std::string& note : expected) {
    EXPECT_NE(std::find(v.notes.begin(), v.notes.end(), note), v.notes.end())
        << note << notes_of(v.notes);
  }
}

TEST(LevelZero, RefusesWhatStopsTheDriver) {
  backplane::LevelZeroVariables variables;
  variables.flat_device_hierarchy = "COMPOSITE";
  variables.affinity_mask = "0.1.0.0";
  EXPECT_EQ(message_of([&] { backplane::level_zero_visible(variables, kIntel); }),
            "ZE_AFFINITY_MASK='0.1.0.0': entry '0.1.0.0' has more than three parts, which stops "
            "the Level Zero driver; expected 'device' or 'device.sub-device', such as '0,1.0'");
  variables.affinity_mask = std::nullopt;
  EXPECT_EQ(message_of([&] { backplane::level_zero_visible(variables, {root("pci0", 1)}); }),
            "ZE_AFFINITY_MASK: device 0 has PCI bus id 'pci0'; expected hexadecimal "
            "'domain:bus:device.function' such as '0000:18:00.0' (or 'domain:bus:device', "
            "'bus:device.function')");
}

}  // namespace
