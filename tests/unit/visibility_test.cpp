// Visibility variables: every rule of docs/device-rules.md §5 as a table, PyTorch's public test
// vectors for CUDA_VISIBLE_DEVICES included verbatim (test/test_cuda_nvml_based_avail.py).
#include <backplane/error.hpp>
#include <backplane/visibility.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace {

using backplane::InvalidArgument;
using backplane::PhysicalDevice;
using backplane::Visibility;
using Ints = std::vector<int>;
using Strings = std::vector<std::string>;
constexpr std::nullopt_t kUnset = std::nullopt;

// Failures name the case instead of dumping its bytes.
#define PRINTS_NAME(Case)                                          \
  [[maybe_unused]] void PrintTo(const Case& c, std::ostream* os) { \
    *os << c.name;                                                 \
  }

template <typename Case>
std::string case_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.name;
}

bool has_note(const Visibility& v, const std::string& note) {
  return std::find(v.notes.begin(), v.notes.end(), note) != v.notes.end();
}

std::string notes_of(const std::vector<std::string>& notes) {
  std::string out;
  for (const std::string& note : notes) out += "\n  " + note;
  return out;
}

// Runs `body`, which must throw InvalidArgument, and returns its message.
template <typename Body>
std::string message_of(Body body) {
  try {
    body();
  } catch (const InvalidArgument& e) {
    return e.what();
  }
  return "<no exception>";
}

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

Strings anonymous(int count) {
  Strings uuids;
  for (int i = 0; i < count; ++i) uuids.push_back("GPU-" + std::to_string(i) + "0000000-aaaa");
  return uuids;
}

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

PhysicalDevice gpu(const char* uuid, const char* pci, int major, int minor, int sms, int mhz) {
  PhysicalDevice d;
  d.uuid = uuid;
  d.pci_bus_id = pci;
  d.compute_capability_major = major;
  d.compute_capability_minor = minor;
  d.multiprocessors = sms;
  d.clock_mhz = mhz;
  return d;
}

// Speeds: A100 108*64*1410 = 9745920; RTX A6000 84*128*1800 = 19353600; V100 80*64*1530 = 7833600.
const std::vector<PhysicalDevice> kMixed = {
    gpu("GPU-a100-0000", "0000:C1:00.0", 8, 0, 108, 1410),
    gpu("GPU-a6000-111", "0000:41:00.0", 8, 6, 84, 1800),
    gpu("GPU-v100-2222", "0000:01:00.0", 7, 0, 80, 1530),
};
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

// ---- ROCm
// ------------------------------------------------------------------------------------------

const Strings kAmd = {"GPU-0123456789abcdef", "GPU-1111222233334444", "GPU-11aa22bb33cc44dd",
                      "GPU-deadbeefdeadbeef"};

struct RocmCase {
  const char* name;
  std::optional<const char*> rocr, hip, cuda, ordinal;
  Ints physical;
  const char* variable;
};
PRINTS_NAME(RocmCase)

std::optional<std::string> opt(std::optional<const char*> value) {
  return value ? std::optional<std::string>(*value) : std::nullopt;
}

class Rocm : public ::testing::TestWithParam<RocmCase> {};

TEST_P(Rocm, AppliesRocrThenHip) {
  const RocmCase& c = GetParam();
  backplane::RocmVariables variables;
  variables.rocr_visible_devices = opt(c.rocr);
  variables.hip_visible_devices = opt(c.hip);
  variables.cuda_visible_devices = opt(c.cuda);
  variables.gpu_device_ordinal = opt(c.ordinal);
  const Visibility v = backplane::rocm_visible(variables, kAmd);
  EXPECT_EQ(v.physical, c.physical) << notes_of(v.notes);
  EXPECT_EQ(v.variable, c.variable);
}

INSTANTIATE_TEST_SUITE_P(
    RocrVisibleDevices, Rocm,
    ::testing::Values(
        RocmCase{"AllUnset", kUnset, kUnset, kUnset, kUnset, {0, 1, 2, 3}, ""},
        RocmCase{"EmptyShowsNone", "", kUnset, kUnset, kUnset, {}, "ROCR_VISIBLE_DEVICES"},
        RocmCase{"ListedOrder", "2,0", kUnset, kUnset, kUnset, {2, 0}, "ROCR_VISIBLE_DEVICES"},
        RocmCase{
            "StrtolBaseZero", "0x1, 03", kUnset, kUnset, kUnset, {1, 3}, "ROCR_VISIBLE_DEVICES"},
        RocmCase{
            "OctalEightIsOutOfRange", "1,010", kUnset, kUnset, kUnset, {1}, "ROCR_VISIBLE_DEVICES"},
        RocmCase{"TrailingJunkEnds", "1,2x", kUnset, kUnset, kUnset, {1}, "ROCR_VISIBLE_DEVICES"},
        RocmCase{"RepeatEnds", "1,1,2", kUnset, kUnset, kUnset, {1}, "ROCR_VISIBLE_DEVICES"},
        RocmCase{"NegativeEnds", "-1,0", kUnset, kUnset, kUnset, {}, "ROCR_VISIBLE_DEVICES"},
        RocmCase{"EmptyEntryEnds", "0,,1", kUnset, kUnset, kUnset, {0}, "ROCR_VISIBLE_DEVICES"},
        RocmCase{
            "TrailingCommaIsNotAnEntry", "3,", kUnset, kUnset, kUnset, {3}, "ROCR_VISIBLE_DEVICES"},
        RocmCase{"UuidPrefixAnyCase",
                 "gpu-DEAD,0",
                 kUnset,
                 kUnset,
                 kUnset,
                 {3, 0},
                 "ROCR_VISIBLE_DEVICES"},
        RocmCase{
            "AmbiguousUuidEnds", "0,GPU-11", kUnset, kUnset, kUnset, {0}, "ROCR_VISIBLE_DEVICES"},
        RocmCase{"UuidTooShortEnds", "GPU-", kUnset, kUnset, kUnset, {}, "ROCR_VISIBLE_DEVICES"},
        RocmCase{"OnlyOneEntryPerDeviceRead",
                 "3,2,1,0,9",
                 kUnset,
                 kUnset,
                 kUnset,
                 {3, 2, 1, 0},
                 "ROCR_VISIBLE_DEVICES"}),
    case_name<RocmCase>);

INSTANTIATE_TEST_SUITE_P(
    HipVisibleDevices, Rocm,
    ::testing::Values(
        RocmCase{"ListedOrder", kUnset, "1,0", kUnset, kUnset, {1, 0}, "HIP_VISIBLE_DEVICES"},
        RocmCase{
            "IndexesWhatRocrLeft", "3,1,2", "2,0", kUnset, kUnset, {2, 3}, "HIP_VISIBLE_DEVICES"},
        RocmCase{"LeadingZeroEnds", kUnset, "2,01", kUnset, kUnset, {2}, "HIP_VISIBLE_DEVICES"},
        RocmCase{"SpaceEnds", kUnset, "2, 1", kUnset, kUnset, {2}, "HIP_VISIBLE_DEVICES"},
        RocmCase{"PlusEnds", kUnset, "+1", kUnset, kUnset, {}, "HIP_VISIBLE_DEVICES"},
        RocmCase{"OutOfRangeEnds", kUnset, "0,9,1", kUnset, kUnset, {0}, "HIP_VISIBLE_DEVICES"},
        RocmCase{"RepeatSkipped", kUnset, "1,1,0", kUnset, kUnset, {1, 0}, "HIP_VISIBLE_DEVICES"},
        RocmCase{"UuidSubstring",
                 kUnset,
                 "GPU-deadbeef,0",
                 kUnset,
                 kUnset,
                 {3, 0},
                 "HIP_VISIBLE_DEVICES"},
        RocmCase{"UnknownUuidEnds", kUnset, "GPU-ffff", kUnset, kUnset, {}, "HIP_VISIBLE_DEVICES"},
        RocmCase{"CudaVisibleDevicesAlone",
                 kUnset,
                 kUnset,
                 "3,0",
                 kUnset,
                 {3, 0},
                 "CUDA_VISIBLE_DEVICES"},
        RocmCase{"HipWinsOverCuda", kUnset, "1", "2", kUnset, {1}, "HIP_VISIBLE_DEVICES"},
        RocmCase{"EmptyHipFallsBackToCuda", kUnset, "", "2", kUnset, {2}, "CUDA_VISIBLE_DEVICES"},
        RocmCase{"EmptyHipAndCudaKeepAll", kUnset, "", "", kUnset, {0, 1, 2, 3}, ""},
        RocmCase{"CudaAfterRocr", "2,3", kUnset, "1", kUnset, {3}, "CUDA_VISIBLE_DEVICES"},
        RocmCase{"GpuDeviceOrdinalIgnored", kUnset, kUnset, kUnset, "1", {0, 1, 2, 3}, ""},
        // PyTorch's test_hip_device_count environments: each shows one device.
        RocmCase{"PyTorchCudaOnly", kUnset, kUnset, "0", kUnset, {0}, "CUDA_VISIBLE_DEVICES"},
        RocmCase{"PyTorchHipOnly", kUnset, "0", kUnset, kUnset, {0}, "HIP_VISIBLE_DEVICES"},
        RocmCase{"PyTorchCudaAndHip", kUnset, "0", "0,1,2,3", kUnset, {0}, "HIP_VISIBLE_DEVICES"},
        RocmCase{"PyTorchRocrAndHip", "0,1,2,3", "0", kUnset, kUnset, {0}, "HIP_VISIBLE_DEVICES"},
        RocmCase{"PyTorchRocrOnly", "0", kUnset, kUnset, kUnset, {0}, "ROCR_VISIBLE_DEVICES"}),
    case_name<RocmCase>);

TEST(Rocm, RefusesMoreHipEntriesThanRocrEntries) {
  backplane::RocmVariables variables;
  variables.rocr_visible_devices = "2";
  variables.hip_visible_devices = "0,1";
  EXPECT_EQ(message_of([&] { backplane::rocm_visible(variables, kAmd); }),
            "HIP_VISIBLE_DEVICES='0,1' lists 2 devices but ROCR_VISIBLE_DEVICES='2' lists only 1; "
            "HIP_VISIBLE_DEVICES indexes the devices ROCR_VISIBLE_DEVICES leaves, so list at most "
            "1 (PyTorch refuses this too)");
  variables.hip_visible_devices = "0";
  EXPECT_EQ(backplane::rocm_visible(variables, kAmd).physical, Ints({2}));
}

TEST(Rocm, NotesTheIgnoredOrdinal) {
  backplane::RocmVariables variables;
  variables.gpu_device_ordinal = "0,2";
  const Visibility v = backplane::rocm_visible(variables, kAmd);
  EXPECT_TRUE(has_note(v,
                       "GPU_DEVICE_ORDINAL='0,2' is ignored: ROCclr reads it for OpenCL only, HIP "
                       "reads HIP_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES"))
      << notes_of(v.notes);
}

// ---- Level Zero
// -----------------------------------------------------------------------------------

PhysicalDevice root(const char* pci, int tiles, bool integrated = false) {
  PhysicalDevice d;
  d.pci_bus_id = pci;
  d.sub_devices = tiles;
  d.integrated = integrated;
  return d;
}

// Sorted by the driver: 1 (18:00.0), 0 (3a:00.0), then the integrated 2.
// With ZE_ENABLE_PCI_ID_DEVICE_ORDER: 2 (00:02.0), 1, 0.
// FLAT numbering: 0 = 1.0, 1 = 1.1, 2 = 0.0, 3 = 0.1, 4 = 2.
const std::vector<PhysicalDevice> kIntel = {root("0000:3a:00.0", 2), root("0000:18:00.0", 2),
                                            root("0000:00:02.0", 1, true)};

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

// ---- visible_for --------------------------------------------------------------------------------

using Env = std::map<std::string, std::string>;

backplane::EnvLookup lookup(const Env& env) {
  return [env](const char* name) -> std::optional<std::string> {
    const auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
}

std::vector<PhysicalDevice> with_uuids(const Strings& uuids) {
  std::vector<PhysicalDevice> devices;
  for (const std::string& uuid : uuids) {
    PhysicalDevice d;
    d.uuid = uuid;
    devices.push_back(d);
  }
  return devices;
}

std::vector<PhysicalDevice> plain(int count) {
  return std::vector<PhysicalDevice>(static_cast<std::size_t>(count));
}

struct DispatchCase {
  const char* name;
  const char* type;
  const char* vendor;
  Env env;
  std::vector<PhysicalDevice> devices;
  Ints physical;
  Ints sub_device;
  const char* variable;
};
PRINTS_NAME(DispatchCase)

class VisibleFor : public ::testing::TestWithParam<DispatchCase> {};

TEST_P(VisibleFor, PicksTheRuleForTheType) {
  const DispatchCase& c = GetParam();
  const Visibility v = backplane::visible_for(c.type, c.vendor, lookup(c.env), c.devices);
  EXPECT_EQ(v.physical, c.physical) << notes_of(v.notes);
  EXPECT_EQ(v.sub_device, c.sub_device);
  EXPECT_EQ(v.variable, c.variable);
  EXPECT_FALSE(v.notes.empty());
}

INSTANTIATE_TEST_SUITE_P(
    Types, VisibleFor,
    ::testing::Values(
        // kMixed enumerates FASTEST_FIRST as 1, 0, 2 and in PCI order as 2, 1, 0.
        DispatchCase{"CudaDefaultOrder", "cuda", "nvidia", {}, kMixed, {1, 0, 2}, {}, ""},
        DispatchCase{"CudaOrdinalsFollowTheOrder",
                     "cuda",
                     "nvidia",
                     {{"CUDA_VISIBLE_DEVICES", "1"}},
                     kMixed,
                     {0},
                     {},
                     "CUDA_VISIBLE_DEVICES"},
        DispatchCase{"CudaPciOrder",
                     "cuda",
                     "nvidia",
                     {{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}, {"CUDA_VISIBLE_DEVICES", "0,2"}},
                     kMixed,
                     {2, 0},
                     {},
                     "CUDA_VISIBLE_DEVICES"},
        DispatchCase{"CudaOrderAlone",
                     "cuda",
                     "nvidia",
                     {{"CUDA_DEVICE_ORDER", "PCI_BUS_ID"}},
                     kMixed,
                     {2, 1, 0},
                     {},
                     "CUDA_DEVICE_ORDER"},
        DispatchCase{"CudaUuid",
                     "cuda",
                     "nvidia",
                     {{"CUDA_VISIBLE_DEVICES", "GPU-v100"}},
                     kMixed,
                     {2},
                     {},
                     "CUDA_VISIBLE_DEVICES"},
        DispatchCase{"CudaOtherVendor",
                     "cuda",
                     "sim",
                     {{"CUDA_VISIBLE_DEVICES", "0"}},
                     kMixed,
                     {1},
                     {},
                     "CUDA_VISIBLE_DEVICES"},
        DispatchCase{"CudaOnAmd",
                     "cuda",
                     "amd",
                     {{"ROCR_VISIBLE_DEVICES", "3,1"}, {"CUDA_VISIBLE_DEVICES", "1"}},
                     with_uuids(kAmd),
                     {1},
                     {},
                     "CUDA_VISIBLE_DEVICES"},
        DispatchCase{"Hip",
                     "hip",
                     "rocm",
                     {{"HIP_VISIBLE_DEVICES", "2"}},
                     with_uuids(kAmd),
                     {2},
                     {},
                     "HIP_VISIBLE_DEVICES"},
        DispatchCase{"Xpu",
                     "xpu",
                     "intel",
                     {{"ZE_AFFINITY_MASK", "1,4"}},
                     kIntel,
                     {1, 2},
                     {1, -1},
                     "ZE_AFFINITY_MASK"},
        DispatchCase{"Npu",
                     "npu",
                     "huawei",
                     {{"ASCEND_RT_VISIBLE_DEVICES", "1,3"}},
                     plain(4),
                     {1, 3},
                     {},
                     "ASCEND_RT_VISIBLE_DEVICES"},
        DispatchCase{"Hpu",
                     "hpu",
                     "intel",
                     {{"HABANA_VISIBLE_MODULES", "3,2"}},
                     plain(4),
                     {3, 2},
                     {},
                     "HABANA_VISIBLE_MODULES"},
        DispatchCase{"Musa",
                     "musa",
                     "mthreads",
                     {{"MUSA_VISIBLE_DEVICES", "1"}},
                     plain(2),
                     {1},
                     {},
                     "MUSA_VISIBLE_DEVICES"},
        DispatchCase{"Mlu",
                     "mlu",
                     "cambricon",
                     {{"MLU_VISIBLE_DEVICES", "1"}},
                     plain(2),
                     {1},
                     {},
                     "MLU_VISIBLE_DEVICES"},
        DispatchCase{"Neuron",
                     "neuron",
                     "aws",
                     {{"NEURON_RT_VISIBLE_CORES", "2-3"}},
                     plain(4),
                     {2, 3},
                     {},
                     "NEURON_RT_VISIBLE_CORES"},
        DispatchCase{"TpuHasNoVariable",
                     "tpu",
                     "google",
                     {{"CUDA_VISIBLE_DEVICES", ""}},
                     plain(2),
                     {0, 1},
                     {},
                     ""},
        DispatchCase{"MpsHasNoVariable", "mps", "apple", {}, plain(1), {0}, {}, ""},
        DispatchCase{"CpuHasNoVariable", "cpu", "", {}, plain(1), {0}, {}, ""},
        DispatchCase{"UnknownTypeShowsAll",
                     "fancy",
                     "acme",
                     {{"FANCY_VISIBLE_DEVICES", "0"}},
                     plain(2),
                     {0, 1},
                     {},
                     ""}),
    case_name<DispatchCase>);

TEST(VisibleFor, RefusalsPassThrough) {
  EXPECT_THROW(
      backplane::visible_for("hpu", "intel", lookup({{"HABANA_VISIBLE_MODULES", "9"}}), plain(2)),
      InvalidArgument);
  EXPECT_THROW(
      backplane::visible_for(
          "cuda", "amd", lookup({{"ROCR_VISIBLE_DEVICES", "0"}, {"HIP_VISIBLE_DEVICES", "0,1"}}),
          with_uuids(kAmd)),
      InvalidArgument);
}

TEST(VisibleFor, AnEmptyLookupMeansNothingIsSet) {
  const Visibility v = backplane::visible_for("cuda", "nvidia", {}, kMixed);
  EXPECT_EQ(v.physical, Ints({1, 0, 2}));
  EXPECT_EQ(v.variable, "");
}

TEST(VisibleFor, NotesMapOrdinalsToPhysicalDevices) {
  const Visibility v =
      backplane::visible_for("cuda", "nvidia", lookup({{"CUDA_VISIBLE_DEVICES", "0,1"}}), kMixed);
  EXPECT_EQ(v.physical, Ints({1, 0}));
  EXPECT_EQ(v.notes.back(), "as physical devices (input order): 1, 0") << notes_of(v.notes);
}

}  // namespace
