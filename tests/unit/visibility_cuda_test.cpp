// Visibility variables, docs/device-rules.md §5, as tables: CUDA_VISIBLE_DEVICES and
// CUDA_DEVICE_ORDER (core/src/visibility/cuda.cpp), PyTorch's public test vectors included verbatim
// (test/test_cuda_nvml_based_avail.py).
#include "visibility_test_support.hpp"

namespace {

using namespace visibility_test;

// ---- CUDA_VISIBLE_DEVICES, step 1: PyTorch's _parse_visible_devices
// ------------------------------

struct ParseCase {
  const char* name;
  const char* value;
  std::vector<unsigned long long> ordinals;
  Strings uuid_prefixes;
};
PRINTS_NAME(ParseCase)

class CudaParse : public ::testing::TestWithParam<ParseCase> {};

TEST_P(CudaParse, MatchesPyTorch) {
  const ParseCase& c = GetParam();
  const backplane::CudaVisibleEntries entries = backplane::parse_cuda_visible_devices(c.value);
  EXPECT_EQ(entries.ordinals, c.ordinals) << c.value << notes_of(entries.notes);
  EXPECT_EQ(entries.uuid_prefixes, c.uuid_prefixes) << c.value << notes_of(entries.notes);
}

constexpr unsigned long long kHuge = std::numeric_limits<unsigned long long>::max();

INSTANTIATE_TEST_SUITE_P(PyTorchVectors, CudaParse,
                         ::testing::Values(
                             // test_env_var_parsing, verbatim.
                             ParseCase{"RestOfStringIgnored", "1gpu2,2ampere", {1, 2}, {}},
                             ParseCase{"NegativeAborts", "0, 1, 2, -1, 3", {0, 1, 2}, {}},
                             ParseCase{"DoubleMentionEmpties", "0, 1, 2, 1", {}, {}},
                             ParseCase{"UnaryPlusAndMinus", "2, +3, -0, 5", {2, 3, 0, 5}, {}},
                             ParseCase{"RandomStringIsEmptySet", "one,two,3,4", {}, {}},
                             ParseCase{"RandomStringIsSeparator", "4,3,two,one", {4, 3}, {}},
                             ParseCase{"GpuIdsParsed", "GPU-9e8d35e3", {}, {"GPU-9e8d35e3"}},
                             ParseCase{"OrdinalsNotInGpuIdSet", "GPU-123, 2", {}, {"GPU-123"}},
                             ParseCase{"MigIdsParsed", "MIG-89c850dc", {}, {"MIG-89c850dc"}}),
                         case_name<ParseCase>);

INSTANTIATE_TEST_SUITE_P(
    Edges, CudaParse,
    ::testing::Values(ParseCase{"EmptyValue", "", {}, {}},
                      ParseCase{"LeadingZerosAreTheSameIndex", "1,01", {}, {}},
                      ParseCase{"SignWithoutDigits", "0,+,1", {0}, {}},
                      ParseCase{"TabsAndNewlinesTrimmed", "\t3\n,1", {3, 1}, {}},
                      ParseCase{"HugeIndexSaturates", "0,99999999999999999999999", {0, kHuge}, {}},
                      ParseCase{"RepeatAfterBadEntryStillCounts", "1,x,1", {1}, {}},
                      ParseCase{"RepeatedUuidEmpties", "GPU-a,GPU-b,GPU-a", {}, {}},
                      ParseCase{"MigEntryEndsGpuList", "GPU-a,MIG-b", {}, {"GPU-a"}},
                      ParseCase{"UuidEntriesAreNotTrimmed", "GPU-a, GPU-b", {}, {"GPU-a"}},
                      ParseCase{"LowerCaseGpuIsNotUuidForm", "gpu-1", {}, {}}),
    case_name<ParseCase>);

TEST(CudaParse, ExplainsWhereTheListEnds) {
  const auto entries = backplane::parse_cuda_visible_devices("1,gpu2");
  EXPECT_EQ(entries.ordinals, (std::vector<unsigned long long>{1}));
  ASSERT_FALSE(entries.notes.empty());
  EXPECT_EQ(entries.notes.back(),
            "CUDA_VISIBLE_DEVICES='1,gpu2': entry 'gpu2' does not start with a number, so the "
            "list ends there");
}

// ---- CUDA_VISIBLE_DEVICES, step 2: PyTorch's _transform_uuid_to_ordinals
// -------------------------

const Strings kPyTorchUuids = {
    "GPU-9942190a-aa31-4ff1-4aa9-c388d80f85f1", "GPU-9e8d35e3-a134-0fdd-0e01-23811fdbd293",
    "GPU-e429a63e-c61c-4795-b757-5132caeb8e70", "GPU-eee1dfbc-0a0f-6ad8-5ff6-dc942a8b9d98",
    "GPU-bbcd6503-5150-4e92-c266-97cc4390d04e", "GPU-472ea263-58d7-410d-cc82-f7fdece5bd28",
    "GPU-e56257c4-947f-6a5b-7ec9-0f45567ccf4e", "GPU-1c20e77d-1c1a-d9ed-fe37-18b8466a78ad",
};

struct UuidCase {
  const char* name;
  Strings prefixes;
  Ints ordinals;
};
PRINTS_NAME(UuidCase)

class CudaUuids : public ::testing::TestWithParam<UuidCase> {};

TEST_P(CudaUuids, MatchesPyTorch) {
  const UuidCase& c = GetParam();
  EXPECT_EQ(backplane::cuda_uuids_to_ordinals(c.prefixes, kPyTorchUuids), c.ordinals);
}

INSTANTIATE_TEST_SUITE_P(
    PyTorchVectors, CudaUuids,
    ::testing::Values(
        // test_partial_uuid_resolver, verbatim.
        UuidCase{"OnePrefix", {"GPU-9e8d35e3"}, {1}},
        UuidCase{"ShortPrefix", {"GPU-e4", "GPU-9e8d35e3"}, {2, 1}},
        UuidCase{"ThreePrefixes", {"GPU-9e8d35e3", "GPU-1", "GPU-47"}, {1, 7, 5}},
        UuidCase{"FirstInvalidAborts", {"GPU-123", "GPU-9e8d35e3"}, {}},
        UuidCase{"LaterInvalidAborts", {"GPU-9e8d35e3", "GPU-123", "GPU-47"}, {1}},
        UuidCase{"AmbiguousAborts", {"GPU-9e8d35e3", "GPU-e", "GPU-47"}, {1}},
        UuidCase{"DuplicateEmpties", {"GPU-9e8d35e3", "GPU-47", "GPU-9e8"}, {}}),
    case_name<UuidCase>);

// ---- CUDA_VISIBLE_DEVICES against a device list
// ----------------------------------------------------

struct VisibleCase {
  const char* name;
  std::optional<const char*> value;
  Strings uuids;
  Ints physical;
  const char* variable;
};
PRINTS_NAME(VisibleCase)

class CudaVisible : public ::testing::TestWithParam<VisibleCase> {};

TEST_P(CudaVisible, ListsTheVisibleOrdinals) {
  const VisibleCase& c = GetParam();
  const auto value = c.value ? std::optional<std::string_view>(*c.value) : std::nullopt;
  const Visibility v = backplane::cuda_visible(value, c.uuids);
  EXPECT_EQ(v.physical, c.physical) << notes_of(v.notes);
  EXPECT_EQ(v.variable, c.variable);
  EXPECT_TRUE(v.sub_device.empty());
  EXPECT_FALSE(v.notes.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Rules, CudaVisible,
    ::testing::Values(
        VisibleCase{"UnsetShowsAll", kUnset, anonymous(3), {0, 1, 2}, ""},
        VisibleCase{"EmptyShowsNone", "", anonymous(3), {}, "CUDA_VISIBLE_DEVICES"},
        VisibleCase{
            "ListedOrderIsLogicalOrder", "2,0", anonymous(3), {2, 0}, "CUDA_VISIBLE_DEVICES"},
        // test_ordinal_parse_visible_devices, with a raw device count of 2.
        VisibleCase{"PyTorchTwoDevices", "1, 0", anonymous(2), {1, 0}, "CUDA_VISIBLE_DEVICES"},
        VisibleCase{
            "PyTorchOutOfBoundsAborts", "1, 5, 0", anonymous(2), {1}, "CUDA_VISIBLE_DEVICES"},
        // The CUDA guide's own example: 0,2,-1,1 shows devices 0 and 2.
        VisibleCase{"CudaGuideExample", "0,2,-1,1", anonymous(3), {0, 2}, "CUDA_VISIBLE_DEVICES"},
        VisibleCase{"NotANumberEnds", "1,gpu2", anonymous(3), {1}, "CUDA_VISIBLE_DEVICES"},
        VisibleCase{
            "RepeatBeyondCountStillEmpties", "0,5,0", anonymous(2), {}, "CUDA_VISIBLE_DEVICES"},
        VisibleCase{"NoDevices", "0", {}, {}, "CUDA_VISIBLE_DEVICES"},
        VisibleCase{
            "UuidPrefixes", "GPU-9e8d35e3,GPU-47", kPyTorchUuids, {1, 5}, "CUDA_VISIBLE_DEVICES"},
        VisibleCase{"UnknownUuidShowsNone", "GPU-123", kPyTorchUuids, {}, "CUDA_VISIBLE_DEVICES"},
        VisibleCase{"MigUuid", "MIG-b2", {"MIG-a1-x", "MIG-b2-y"}, {1}, "CUDA_VISIBLE_DEVICES"},
        VisibleCase{"HugeIndexEnds",
                    "1,99999999999999999999999,0",
                    anonymous(2),
                    {1},
                    "CUDA_VISIBLE_DEVICES"}),
    case_name<VisibleCase>);

TEST(CudaVisible, NotesTheExampleFromTheSpec) {
  const Visibility v = backplane::cuda_visible("1,gpu2", anonymous(3));
  EXPECT_TRUE(has_note(v,
                       "CUDA_VISIBLE_DEVICES='1,gpu2': entry 'gpu2' does not start with a number, "
                       "so the list ends there"))
      << notes_of(v.notes);
  EXPECT_EQ(v.notes.back(), "CUDA_VISIBLE_DEVICES='1,gpu2': 1 device visible, in logical order: 1");
}

TEST(CudaVisible, NotesTheAmbiguousPrefix) {
  const Visibility v = backplane::cuda_visible("GPU-9e8d35e3,GPU-e", kPyTorchUuids);
  EXPECT_EQ(v.physical, Ints({1}));
  EXPECT_TRUE(has_note(v,
                       "CUDA_VISIBLE_DEVICES='GPU-9e8d35e3,GPU-e': 'GPU-e' starts the UUIDs of "
                       "devices 2, 3, 6, which is ambiguous, so the list ends there"))
      << notes_of(v.notes);
}

// ---- CUDA_DEVICE_ORDER
// -----------------------------------------------------------------------------

// Same speed, so PCI bus id decides.
const std::vector<PhysicalDevice> kTwins = {
    gpu("GPU-twin-b", "0000:82:00.0", 9, 0, 132, 1980),
    gpu("GPU-twin-a", "0000:02:00.0", 9, 0, 132, 1980),
};

struct OrderCase {
  const char* name;
  std::vector<PhysicalDevice> devices;
  std::optional<const char*> value;
  Ints order;
  const char* variable;
};
PRINTS_NAME(OrderCase)

class CudaOrder : public ::testing::TestWithParam<OrderCase> {};

TEST_P(CudaOrder, Enumerates) {
  const OrderCase& c = GetParam();
  const auto value = c.value ? std::optional<std::string_view>(*c.value) : std::nullopt;
  const Visibility v = backplane::cuda_order(c.devices, value);
  EXPECT_EQ(v.physical, c.order) << notes_of(v.notes);
  EXPECT_EQ(v.variable, c.variable);
}

INSTANTIATE_TEST_SUITE_P(
    Rules, CudaOrder,
    ::testing::Values(
        OrderCase{"UnsetIsFastestFirst", kMixed, kUnset, {1, 0, 2}, ""},
        OrderCase{"FastestFirst", kMixed, "FASTEST_FIRST", {1, 0, 2}, "CUDA_DEVICE_ORDER"},
        OrderCase{"PciBusId", kMixed, "PCI_BUS_ID", {2, 1, 0}, "CUDA_DEVICE_ORDER"},
        OrderCase{"UnknownValueIgnored", kMixed, "pci_bus_id", {1, 0, 2}, ""},
        OrderCase{"TieBrokenByPciBusId", kTwins, kUnset, {1, 0}, ""},
        OrderCase{"NoDevices", {}, "PCI_BUS_ID", {}, "CUDA_DEVICE_ORDER"},
        OrderCase{"ShortPciForms",
                  {gpu("GPU-x", "1:00:00.0", 8, 0, 1, 1), gpu("GPU-y", "0:ff:1f", 8, 0, 1, 1),
                   gpu("GPU-z", "3b:00.1", 8, 0, 1, 1)},
                  "PCI_BUS_ID",
                  {2, 1, 0},
                  "CUDA_DEVICE_ORDER"}),
    case_name<OrderCase>);

TEST(CudaOrder, NotesAnIgnoredValue) {
  const Visibility v = backplane::cuda_order(kMixed, "fastest");
  EXPECT_EQ(v.notes.front(),
            "CUDA_DEVICE_ORDER='fastest' is neither FASTEST_FIRST nor PCI_BUS_ID (the names are "
            "case-sensitive); CUDA ignores it and orders devices FASTEST_FIRST");
  EXPECT_EQ(v.notes.back(),
            "FASTEST_FIRST orders devices by multiprocessors x cores per multiprocessor x clock "
            "MHz, ties by PCI bus id: 1 (19353600), 0 (9745920), 2 (7833600)");
}

TEST(CudaOrder, RefusesABadPciBusId) {
  const std::vector<PhysicalDevice> devices = {gpu("GPU-a", "0000:18:00.0", 8, 0, 1, 1),
                                               gpu("GPU-b", "18-00", 8, 0, 1, 1)};
  EXPECT_EQ(message_of([&] { backplane::cuda_order(devices, kUnset); }),
            "CUDA_DEVICE_ORDER: device 1 has PCI bus id '18-00'; expected hexadecimal "
            "'domain:bus:device.function' such as '0000:18:00.0' (or 'domain:bus:device', "
            "'bus:device.function')");
}

struct CoresCase {
  const char* name;
  int major, minor, cores;
};
PRINTS_NAME(CoresCase)

class CudaCores : public ::testing::TestWithParam<CoresCase> {};

TEST_P(CudaCores, MatchesTheSamplesTable) {
  const CoresCase& c = GetParam();
  EXPECT_EQ(backplane::cuda_cores_per_multiprocessor(c.major, c.minor), c.cores);
}

INSTANTIATE_TEST_SUITE_P(
    HelperCuda, CudaCores,
    ::testing::Values(CoresCase{"Tesla", 1, 3, 8}, CoresCase{"Fermi20", 2, 0, 32},
                      CoresCase{"Fermi21", 2, 1, 48}, CoresCase{"Kepler", 3, 5, 192},
                      CoresCase{"Maxwell", 5, 2, 128}, CoresCase{"P100", 6, 0, 64},
                      CoresCase{"Pascal61", 6, 1, 128}, CoresCase{"Volta", 7, 0, 64},
                      CoresCase{"Turing", 7, 5, 64}, CoresCase{"A100", 8, 0, 64},
                      CoresCase{"Ampere86", 8, 6, 128}, CoresCase{"Ada", 8, 9, 128},
                      CoresCase{"Hopper", 9, 0, 128}, CoresCase{"Blackwell", 10, 0, 128},
                      CoresCase{"Future", 15, 0, 128}, CoresCase{"Unknown", 0, 0, 0}),
    case_name<CoresCase>);

TEST(CudaSpeed, IsMultiprocessorsTimesCoresTimesClock) {
  EXPECT_EQ(backplane::cuda_speed_estimate(kMixed[0]), 108LL * 64 * 1410);
  PhysicalDevice negative = kMixed[0];
  negative.clock_mhz = -5;
  EXPECT_EQ(backplane::cuda_speed_estimate(negative), 0);
}

}  // namespace
