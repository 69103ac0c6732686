// The cuda plugin's attention kernels on machines without a GPU: they are registered with
// their requirements whatever the driver says, the core refuses devices below compute
// capability 8.0, and a call with host memory or without a usable GPU comes back as a clear
// error rather than a crash. Runs twice under ctest: with the fake driver of fake_driver/ first
// on LD_LIBRARY_PATH, and without it (no driver on a build machine); each test skips in the
// setting it is not for. tests/gpu/attention_check.sh checks the numbers on a real GPU.
#include <gtest/gtest.h>
#include <backplane/error.hpp>
#include <backplane/runtime/kernels.hpp>
#include <backplane/runtime/runtime.hpp>

#include <dlfcn.h>
#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "attention_call.hpp"
#include "plugin_alone.hpp"

namespace {

using backplane::testing::AttentionCall;
using backplane::testing::call_error;
using backplane::testing::kBf16;
using backplane::testing::kF32;

backplane::Runtime open_cuda() {
  return backplane::testing::open_plugin_quietly(CUDA_PLUGIN_MANIFEST);
}

bool fake_driver_loaded() {
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return false;
  const bool fake = dlsym(handle, "fake_cuda_primary_refs") != nullptr;
  dlclose(handle);
  return fake;
}

bool any_driver_loads() {
  void* handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle != nullptr) dlclose(handle);
  return handle != nullptr;
}

TEST(CudaAttentionKernels, AreRegisteredWithTheirRequirements) {
  const backplane::Runtime runtime = open_cuda();
  // Each implementation has its forward and (ABI 1.6) its backward, with the same requirements.
  std::map<std::string, backplane::KernelInfo> found, backward;
  for (const backplane::KernelInfo& k : runtime.kernels()) {
    if (k.plugin != "cuda") continue;
    (k.op == backplane::kAttentionBackward ? backward : found)[k.implementation] = k;
  }
  ASSERT_EQ(backward.size(), found.size());
  for (const auto& [name, k] : backward) {
    ASSERT_EQ(found.count(name), 1u) << name;
    EXPECT_EQ(k.dtypes, found.at(name).dtypes) << name;
    EXPECT_EQ(k.min_compute_capability, found.at(name).min_compute_capability) << name;
  }
  const std::map<std::string, std::vector<std::string>> want = {
      {"flash_attention_2", {"bfloat16", "float16"}},
      {"sdpa", {"float32", "bfloat16", "float16"}},
      {"eager", {"float32", "bfloat16", "float16"}}};
  ASSERT_EQ(found.size(), want.size());
  for (const auto& [name, dtypes] : want) {
    SCOPED_TRACE(name);
    ASSERT_EQ(found.count(name), 1u);
    const backplane::KernelInfo& k = found.at(name);
    EXPECT_EQ(k.op, "attention_forward");
    EXPECT_EQ(k.device_type, "cuda");
    ASSERT_TRUE(k.min_compute_capability.has_value());
    EXPECT_EQ(k.min_compute_capability->str(), "8.0");
    EXPECT_EQ(k.dtypes, dtypes);
    EXPECT_EQ(k.max_head_dim, 256);
  }
}

TEST(CudaAttentionKernels, WithoutADriverThereIsNoDeviceToRunOn) {
  if (any_driver_loads()) GTEST_SKIP() << "a libcuda.so.1 opens here";
  const backplane::Runtime runtime = open_cuda();
  ASSERT_NE(runtime.backend("cuda"), nullptr);
  EXPECT_FALSE(runtime.backend("cuda")->available);
  try {
    runtime.attention_kernel(backplane::Device("cuda", 0), "flash_attention_2");
    FAIL() << "a kernel was handed out for a device that does not exist";
  } catch (const backplane::Error& e) {  // the core says why: the device has no driver
    EXPECT_NE(std::string(e.what()).find("cuda:0"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("libcuda.so.1"), std::string::npos) << e.what();
  }
}

class FakeDriver : public ::testing::Test {
 protected:
  void SetUp() override {
    unsetenv("FAKE_CUDA_LAST_CC");
    unsetenv("CUDA_VISIBLE_DEVICES");
    if (!fake_driver_loaded()) GTEST_SKIP() << "the fake libcuda.so.1 is not on LD_LIBRARY_PATH";
  }
  void TearDown() override { unsetenv("FAKE_CUDA_LAST_CC"); }
};

TEST_F(FakeDriver, KernelsResolveOnComputeCapability8AndLater) {
  const backplane::Runtime runtime = open_cuda();
  for (const char* name : {"flash_attention_2", "sdpa", "eager"}) {
    for (int index : {0, 1}) {  // sm_90 and sm_86
      const backplane::AttentionKernel kernel =
          runtime.attention_kernel(backplane::Device("cuda", index), name);
      EXPECT_EQ(kernel.info().implementation, name);
      EXPECT_EQ(kernel.info().plugin, "cuda");
    }
  }
}

TEST_F(FakeDriver, OlderGpusAreRefusedWithTheRequirement) {
  setenv("FAKE_CUDA_LAST_CC", "75", 1);
  const backplane::Runtime runtime = open_cuda();
  try {
    runtime.attention_kernel(backplane::Device("cuda", 1), "flash_attention_2");
    FAIL() << "flash_attention_2 resolved on a 7.5 device";
  } catch (const backplane::Unavailable& e) {
    EXPECT_NE(std::string(e.what()).find("requires compute capability >= 8.0, but cuda:1 has 7.5"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(FakeDriver, HostMemoryIsRefusedBeforeAnyLaunch) {
  const backplane::Runtime runtime = open_cuda();
  const backplane::AttentionKernel kernel =
      runtime.attention_kernel(backplane::Device("cuda", 0), "flash_attention_2");
  AttentionCall cpu({kDLCPU, 0}, kBf16);
  EXPECT_NE(call_error(kernel, cpu.args)
                .find("query is on device kDLCPU; the GPU kernels need kDLCUDA or kDLCUDAManaged "
                      "memory"),
            std::string::npos)
      << call_error(kernel, cpu.args);
}

TEST_F(FakeDriver, Float32IntoFlashIsRefusedAndSdpaTakesIt) {
  const backplane::Runtime runtime = open_cuda();
  const backplane::AttentionKernel flash =
      runtime.attention_kernel(backplane::Device("cuda", 0), "flash_attention_2");
  AttentionCall f32({kDLCUDA, 0}, kF32);
  EXPECT_NE(call_error(flash, f32.args).find("the flash kernel takes bfloat16 or float16"),
            std::string::npos)
      << call_error(flash, f32.args);
  // sdpa validates float32 as eager's, so what stops it is the fake driver, not the dtype.
  const backplane::AttentionKernel sdpa =
      runtime.attention_kernel(backplane::Device("cuda", 0), "sdpa");
  const std::string sdpa_error = call_error(sdpa, f32.args);
  EXPECT_EQ(sdpa_error.find("dtype"), std::string::npos) << sdpa_error;
}

TEST_F(FakeDriver, HeadDim512IsRefused) {
  const backplane::Runtime runtime = open_cuda();
  const backplane::AttentionKernel kernel =
      runtime.attention_kernel(backplane::Device("cuda", 0), "eager");
  AttentionCall big({kDLCUDA, 0}, kBf16);
  big.shape[3] = 512;
  EXPECT_NE(call_error(kernel, big.args).find("the GPU kernels take head dims up to 256"),
            std::string::npos)
      << call_error(kernel, big.args);
}

// The fake driver has none of what the CUDA runtime needs: the launch must fail cleanly, with
// the runtime's own error text, and never crash.
TEST_F(FakeDriver, AGpuTheRuntimeCannotUseGivesTheRuntimesError) {
  const backplane::Runtime runtime = open_cuda();
  const backplane::AttentionKernel kernel =
      runtime.attention_kernel(backplane::Device("cuda", 0), "flash_attention_2");
  AttentionCall gpu({kDLCUDA, 0}, kBf16);
  const std::string error = call_error(kernel, gpu.args);
  EXPECT_NE(error.find("attention_forward/flash_attention_2 on cuda: attention: "),
            std::string::npos)
      << error;
  EXPECT_NE(error.find(" failed: cuda"), std::string::npos) << error;
  RecordProperty("error", error);
}

TEST_F(FakeDriver, AnEmptyBatchSucceedsWithoutTouchingTheGpu) {
  const backplane::Runtime runtime = open_cuda();
  const backplane::AttentionKernel kernel =
      runtime.attention_kernel(backplane::Device("cuda", 0), "flash_attention_2");
  AttentionCall empty({kDLCUDA, 0}, kBf16);
  empty.shape[0] = 0;
  EXPECT_EQ(call_error(kernel, empty.args), "");
}

}  // namespace
