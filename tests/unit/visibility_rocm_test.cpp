// Visibility variables, docs/device-rules.md §5, as tables: ROCR_VISIBLE_DEVICES,
// HIP_VISIBLE_DEVICES (core/src/visibility/rocm.cpp).
#include "visibility_test_support.hpp"

namespace {

using namespace visibility_test;

// ---- ROCm
// ------------------------------------------------------------------------------------------

struct RocmCase {
  const char* name;
  std::optional<const char*> rocr, hip, cuda, ordinal;
  Ints physical;
  const char* variable;
};
PRINTS_NAME(RocmCase)

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

}  // namespace
