// Visibility variables, docs/device-rules.md §5, as tables: visible_for: which rule a device type's
// variables go to (core/src/visibility/dispatch.cpp).
#include "visibility_test_support.hpp"

namespace {

using namespace visibility_test;

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
