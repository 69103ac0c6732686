// Visibility variables, docs/device-rules.md §5, as tables: The index-list variables:
// HABANA_VISIBLE_MODULES, MUSA_VISIBLE_DEVICES, ASCEND_RT_VISIBLE_DEVICES, CN/MLU_VISIBLE_DEVICES,
// NEURON_RT_VISIBLE_CORES (core/src/visibility/index_lists.cpp).
#include "visibility_test_support.hpp"

namespace {

using namespace visibility_test;

// ---- Strict index lists: HABANA_VISIBLE_MODULES, MUSA_VISIBLE_DEVICES
// ------------------------------

struct ListCase {
  const char* name;
  std::optional<const char*> value;
  int count;
  Ints physical;
};
PRINTS_NAME(ListCase)

class StrictList : public ::testing::TestWithParam<ListCase> {};

TEST_P(StrictList, AcceptsWellFormedLists) {
  const ListCase& c = GetParam();
  const auto value = c.value ? std::optional<std::string_view>(*c.value) : std::nullopt;
  const Visibility v = backplane::index_list_visible("HABANA_VISIBLE_MODULES", value, c.count);
  EXPECT_EQ(v.physical, c.physical) << notes_of(v.notes);
  EXPECT_EQ(v.variable, c.value ? "HABANA_VISIBLE_MODULES" : "");
}

INSTANTIATE_TEST_SUITE_P(HabanaVisibleModules, StrictList,
                         ::testing::Values(ListCase{"Unset", kUnset, 3, {0, 1, 2}},
                                           ListCase{"Empty", "", 3, {}},
                                           ListCase{"One", "2", 3, {2}},
                                           ListCase{"ListedOrder", "2,0,1", 3, {2, 0, 1}},
                                           ListCase{"LeadingZero", "01", 3, {1}}),
                         case_name<ListCase>);

struct BadListCase {
  const char* name;
  const char* value;
  int count;
  const char* message;
};
PRINTS_NAME(BadListCase)

class StrictListError : public ::testing::TestWithParam<BadListCase> {};

TEST_P(StrictListError, RefusesWithTheAcceptedForm) {
  const BadListCase& c = GetParam();
  EXPECT_EQ(
      message_of([&] { backplane::index_list_visible("MUSA_VISIBLE_DEVICES", c.value, c.count); }),
      c.message);
}

INSTANTIATE_TEST_SUITE_P(
    MusaVisibleDevices, StrictListError,
    ::testing::Values(
        BadListCase{"NotANumber", "0,x", 8,
                    "MUSA_VISIBLE_DEVICES='0,x': entry 'x' is not a device index; expected "
                    "distinct indices from 0 to 7 separated by commas, such as '0,1'"},
        BadListCase{"Space", "0, 1", 8,
                    "MUSA_VISIBLE_DEVICES='0, 1': entry ' 1' is not a device index; expected "
                    "distinct indices from 0 to 7 separated by commas, such as '0,1'"},
        BadListCase{"Negative", "-1", 2,
                    "MUSA_VISIBLE_DEVICES='-1': entry '-1' is not a device index; expected "
                    "distinct indices from 0 to 1 separated by commas, such as '0,1'"},
        BadListCase{"TrailingComma", "0,", 1,
                    "MUSA_VISIBLE_DEVICES='0,': entry '' is not a device index; expected "
                    "distinct indices from 0 to 0 separated by commas, such as '0'"},
        BadListCase{"OutOfRange", "0,8", 8,
                    "MUSA_VISIBLE_DEVICES='0,8': index 8 is out of range; expected distinct "
                    "indices from 0 to 7 separated by commas, such as '0,1'"},
        BadListCase{"Repeated", "1,1", 8,
                    "MUSA_VISIBLE_DEVICES='1,1': index 1 is listed twice; expected distinct "
                    "indices from 0 to 7 separated by commas, such as '0,1'"},
        BadListCase{"NoDevices", "0", 0,
                    "MUSA_VISIBLE_DEVICES='0': index 0 is out of range; expected no index (there "
                    "is no device)"}),
    case_name<BadListCase>);

// ---- ASCEND_RT_VISIBLE_DEVICES
// -------------------------------------------------------------------

class Ascend : public ::testing::TestWithParam<ListCase> {};

TEST_P(Ascend, ReadsTheIdsBeforeTheFirstBadOne) {
  const ListCase& c = GetParam();
  const auto value = c.value ? std::optional<std::string_view>(*c.value) : std::nullopt;
  const Visibility v = backplane::ascend_visible(value, c.count);
  EXPECT_EQ(v.physical, c.physical) << notes_of(v.notes);
  EXPECT_EQ(v.variable, c.value ? "ASCEND_RT_VISIBLE_DEVICES" : "");
}

INSTANTIATE_TEST_SUITE_P(
    CannReference, Ascend,
    ::testing::Values(ListCase{"Unset", kUnset, 8, {0, 1, 2, 3, 4, 5, 6, 7}},
                      ListCase{"One", "1", 8, {1}}, ListCase{"Three", "1,2,3", 8, {1, 2, 3}},
                      // The reference's own examples.
                      ListCase{"SpaceEndsTheList", "1, 2,3", 8, {1}},
                      ListCase{"InvalidIdEndsTheList", "1,3,8", 8, {1, 3}},
                      ListCase{"Descending", "2,1", 8, {2}}, ListCase{"Repeat", "1,1", 8, {1}},
                      ListCase{"Letters", "a,1", 8, {}}, ListCase{"Empty", "", 8, {}}),
    case_name<ListCase>);

TEST(Ascend, NotesWhereReadingStops) {
  const Visibility v = backplane::ascend_visible("1,3,8", 8);
  EXPECT_TRUE(has_note(v,
                       "ASCEND_RT_VISIBLE_DEVICES='1,3,8': entry '8' is not one of the 8 devices, "
                       "so only the IDs before it are read"))
      << notes_of(v.notes);
}

// ---- CN_VISIBLE_DEVICES / MLU_VISIBLE_DEVICES
// -------------------------------------------------------

struct MluCase {
  const char* name;
  std::optional<const char*> cn, mlu;
  Strings uuids;
  Ints physical;
  const char* variable;
};
PRINTS_NAME(MluCase)

const Strings kMluUuids = {"33033011-2157-0000-0000-000000000000",
                           "33033011-2157-0000-0000-000000000001"};

class Mlu : public ::testing::TestWithParam<MluCase> {};

TEST_P(Mlu, MatchesTorchMlu) {
  const MluCase& c = GetParam();
  const auto cn = c.cn ? std::optional<std::string_view>(*c.cn) : std::nullopt;
  const auto mlu = c.mlu ? std::optional<std::string_view>(*c.mlu) : std::nullopt;
  const Visibility v = backplane::mlu_visible(cn, mlu, c.uuids);
  EXPECT_EQ(v.physical, c.physical) << notes_of(v.notes);
  EXPECT_EQ(v.variable, c.variable);
}

INSTANTIATE_TEST_SUITE_P(
    TorchMluVectors, Mlu,
    ::testing::Values(
        // torch_mlu's test_env_var_parsing, on 8 devices.
        MluCase{"RestOfStringNotIgnored",
                "1gpu2,2ampere",
                kUnset,
                anonymous(8),
                {},
                "CN_VISIBLE_DEVICES"},
        MluCase{"NegativeAborts",
                "0, 1, 2, -1, 3",
                kUnset,
                anonymous(8),
                {0, 1, 2},
                "CN_VISIBLE_DEVICES"},
        MluCase{
            "DoubleMentionEmpties", "0, 1, 2, 1", kUnset, anonymous(8), {}, "CN_VISIBLE_DEVICES"},
        MluCase{"UnarySignsAbort", "2, +3, -0, 5", kUnset, anonymous(8), {2}, "CN_VISIBLE_DEVICES"},
        MluCase{"RandomStringIsEmptySet",
                "one,two,3,4",
                kUnset,
                anonymous(8),
                {},
                "CN_VISIBLE_DEVICES"},
        MluCase{"RandomStringIsSeparator",
                "4,3,two,one",
                kUnset,
                anonymous(8),
                {4, 3},
                "CN_VISIBLE_DEVICES"},
        MluCase{"UuidParsed",
                "33033011-2157-0000-0000-000000000001",
                kUnset,
                kMluUuids,
                {1},
                "CN_VISIBLE_DEVICES"}),
    case_name<MluCase>);

INSTANTIATE_TEST_SUITE_P(
    Rules, Mlu,
    ::testing::Values(
        MluCase{"BothUnset", kUnset, kUnset, anonymous(2), {0, 1}, ""},
        MluCase{"MluVisibleDevices", kUnset, "1", anonymous(2), {1}, "MLU_VISIBLE_DEVICES"},
        MluCase{"CnWins", "0", "1", anonymous(2), {0}, "CN_VISIBLE_DEVICES"},
        MluCase{"BeyondCountEnds", kUnset, "1,9,0", anonymous(2), {1}, "MLU_VISIBLE_DEVICES"},
        MluCase{"EmptyShowsNone", kUnset, "", anonymous(2), {}, "MLU_VISIBLE_DEVICES"},
        MluCase{"UnknownUuidEnds",
                kUnset,
                "33033011-2157-0000-0000-000000000001,33033011-2157-0000-0000-00000000000f",
                kMluUuids,
                {1},
                "MLU_VISIBLE_DEVICES"},
        MluCase{"RepeatedUuidEmpties",
                kUnset,
                "33033011-2157-0000-0000-000000000001,33033011-2157-0000-0000-000000000001",
                kMluUuids,
                {},
                "MLU_VISIBLE_DEVICES"}),
    case_name<MluCase>);

// ---- NEURON_RT_VISIBLE_CORES
// ---------------------------------------------------------------------

class Neuron : public ::testing::TestWithParam<ListCase> {};

TEST_P(Neuron, ReservesTheListedCores) {
  const ListCase& c = GetParam();
  const auto value = c.value ? std::optional<std::string_view>(*c.value) : std::nullopt;
  const Visibility v = backplane::neuron_visible_cores(value, c.count);
  EXPECT_EQ(v.physical, c.physical) << notes_of(v.notes);
  EXPECT_EQ(v.variable, c.value ? "NEURON_RT_VISIBLE_CORES" : "");
}

INSTANTIATE_TEST_SUITE_P(
    NeuronRtVisibleCores, Neuron,
    ::testing::Values(ListCase{"Unset", kUnset, 4, {0, 1, 2, 3}}, ListCase{"Empty", "", 4, {}},
                      ListCase{"One", "2", 4, {2}}, ListCase{"Range", "0-3", 8, {0, 1, 2, 3}},
                      ListCase{"SingletonRange", "5-5", 8, {5}}, ListCase{"List", "1,3", 8, {1, 3}},
                      ListCase{"RangesAndCores", "0-1,4,6-7", 8, {0, 1, 4, 6, 7}},
                      ListCase{"UnorderedBecomesAscending", "3,1", 8, {1, 3}}),
    case_name<ListCase>);

const std::string kNeuronForm =
    "; expected a core index, an inclusive range or a comma-separated list of them, such as "
    "'0', '0-3' or '1,3', with cores from 0 to 7 each listed once";

struct NeuronBadCase {
  const char* name;
  const char* value;
  std::string message;
};
PRINTS_NAME(NeuronBadCase)

class NeuronError : public ::testing::TestWithParam<NeuronBadCase> {};

TEST_P(NeuronError, RefusesWithTheAcceptedForm) {
  const NeuronBadCase& c = GetParam();
  EXPECT_EQ(message_of([&] { backplane::neuron_visible_cores(c.value, 8); }), c.message);
}

INSTANTIATE_TEST_SUITE_P(
    NeuronRtVisibleCores, NeuronError,
    ::testing::Values(
        NeuronBadCase{
            "NotACore", "a",
            "NEURON_RT_VISIBLE_CORES='a': entry 'a' is not a core or a range" + kNeuronForm},
        NeuronBadCase{
            "OpenRange", "1-",
            "NEURON_RT_VISIBLE_CORES='1-': entry '1-' is not a core or a range" + kNeuronForm},
        NeuronBadCase{
            "Negative", "-1",
            "NEURON_RT_VISIBLE_CORES='-1': entry '-1' is not a core or a range" + kNeuronForm},
        NeuronBadCase{
            "Space", "0, 1",
            "NEURON_RT_VISIBLE_CORES='0, 1': entry ' 1' is not a core or a range" + kNeuronForm},
        NeuronBadCase{"Backwards", "3-1",
                      "NEURON_RT_VISIBLE_CORES='3-1': range '3-1' runs backwards" + kNeuronForm},
        NeuronBadCase{
            "Beyond", "0-8",
            "NEURON_RT_VISIBLE_CORES='0-8': core 8 in '0-8' does not exist" + kNeuronForm},
        NeuronBadCase{"Twice", "1,1",
                      "NEURON_RT_VISIBLE_CORES='1,1': core 1 is listed twice" + kNeuronForm},
        NeuronBadCase{"Overlap", "0-2,1",
                      "NEURON_RT_VISIBLE_CORES='0-2,1': core 1 is listed twice" + kNeuronForm},
        NeuronBadCase{"TwoDashes", "0-1-2",
                      "NEURON_RT_VISIBLE_CORES='0-1-2': entry '0-1-2' is not a core or a range" +
                          kNeuronForm}),
    case_name<NeuronBadCase>);

TEST(NeuronError, NoCores) {
  EXPECT_EQ(message_of([] { backplane::neuron_visible_cores("0", 0); }),
            "NEURON_RT_VISIBLE_CORES='0': core 0 in '0' does not exist; expected a core index, an "
            "inclusive range or a comma-separated list of them, such as '0', '0-3' or '1,3', but "
            "there is no core to reserve");
}

TEST(Neuron, NotesTheReorder) {
  const Visibility v = backplane::neuron_visible_cores("3,1", 8);
  EXPECT_TRUE(has_note(v,
                       "NEURON_RT_VISIBLE_CORES='3,1': the cores are reserved as a set, so "
                       "logical cores follow ascending physical order"))
      << notes_of(v.notes);
}

}  // namespace
