// The rocm plugin's HIP attention kernels (libbackplane-rocm-attention.so) on machines without
// an AMD GPU: listed with their requirements whatever the runtime says, and, with the fake HIP
// runtime's MI250X (gfx90a) and MI300X (gfx942), a GPU whose arch the module lacks is refused
// by name and a call the module cannot serve here comes back as an error. Runs twice under
// ctest: with fake_hip/ first on LD_LIBRARY_PATH, and without it.
#include <gtest/gtest.h>
#include <backplane/error.hpp>
#include <backplane/runtime/kernels.hpp>
#include <backplane/runtime/runtime.hpp>

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "attention_call.hpp"
#include "fake_runtime_test.hpp"
#include "plugin_alone.hpp"

namespace {

using backplane::testing::AttentionCall;
using backplane::testing::call_error;
using backplane::testing::kBf16;

backplane::Runtime open_rocm() {
  return backplane::testing::open_plugin_quietly(ROCM_MANIFEST);
}

bool fake_runtime_first() {
  return backplane::testing::library_path_has(FAKE_HIP_DIR);
}

TEST(RocmAttentionKernels, AreListedWithTheirRequirements) {
  const backplane::Runtime runtime = open_rocm();
  std::map<std::string, backplane::KernelInfo> found;
  for (const backplane::KernelInfo& k : runtime.kernels()) {
    if (k.device_type == "rocm") found[k.implementation] = k;
  }
  const std::map<std::string, std::vector<std::string>> want = {
      {"flash_attention_2", {"bfloat16", "float16"}},
      {"sdpa", {"float32", "bfloat16", "float16"}},
      {"eager", {"float32", "bfloat16", "float16"}}};
  ASSERT_EQ(found.size(), want.size());
  for (const auto& [name, dtypes] : want) {
    SCOPED_TRACE(name);
    const backplane::KernelInfo& k = found.at(name);
    EXPECT_EQ(k.plugin, "rocm");
    EXPECT_FALSE(k.min_compute_capability.has_value());  // AMD GPUs go by arch
    EXPECT_EQ(k.dtypes, dtypes);
    EXPECT_EQ(k.max_head_dim, 256);
  }
}

TEST(RocmAttentionKernels, AGpuOfAnotherArchIsRefusedByName) {
  if (!fake_runtime_first()) GTEST_SKIP() << "needs the fake HIP runtime on LD_LIBRARY_PATH";
  const backplane::Runtime runtime = open_rocm();
  const backplane::AttentionKernel kernel =
      runtime.attention_kernel(backplane::Device("rocm", 1), "flash_attention_2");
  AttentionCall gfx942({kDLROCM, 1}, kBf16);
  const std::string error = call_error(kernel, gfx942.args);
  EXPECT_NE(error.find("the HIP kernels were built for gfx90a, but GPU 1 is gfx942"),
            std::string::npos)
      << error;
}

TEST(RocmAttentionKernels, ACallTheModuleCannotServeHereIsAnError) {
  if (!fake_runtime_first()) GTEST_SKIP() << "needs the fake HIP runtime on LD_LIBRARY_PATH";
  const backplane::Runtime runtime = open_rocm();
  const backplane::AttentionKernel kernel =
      runtime.attention_kernel(backplane::Device("rocm", 0), "sdpa");
  AttentionCall host({kDLCPU, 0}, kBf16);
  const std::string error = call_error(kernel, host.args);
  // The module refuses host memory, or cannot load against the fake runtime: either way the
  // call names itself and says why, and nothing crashes.
  EXPECT_EQ(error.rfind("attention_forward/sdpa on rocm: ", 0), 0u) << error;
  RecordProperty("error", error);
  EXPECT_TRUE(error.find("query is on device kDLCPU") != std::string::npos ||
              error.find("could not be loaded") != std::string::npos)
      << error;
}

// The module itself, opened as the plugin opens it, against the real HIP runtime where one is
// installed (Debian's libamdhip64.so.5 here): it loads, and refuses host memory before any HIP
// call.
TEST(RocmAttentionKernels, TheModuleLoadsAndValidatesBeforeAnyHipCall) {
  if (fake_runtime_first()) GTEST_SKIP() << "the fake HIP runtime cannot host the module";
  void* module = dlopen(ROCM_ATTENTION_MODULE, RTLD_NOW | RTLD_LOCAL);
  if (module == nullptr) GTEST_SKIP() << "no HIP runtime to load it against: " << dlerror();
  using Forward = int (*)(int, const bp_attention_args*, char*, size_t);
  auto forward = reinterpret_cast<Forward>(dlsym(module, "backplane_rocm_attention_forward"));
  ASSERT_NE(forward, nullptr);
  AttentionCall host({kDLCPU, 0}, kBf16);
  char message[512] = {};
  EXPECT_EQ(forward(0, &host.args, message, sizeof message), BP_INVALID_ARGUMENT);
  EXPECT_STREQ(message,
               "attention: query is on device kDLCPU; the GPU kernels need kDLROCM memory");
  // Not closed: the HIP runtime it pulled in stays for the process, as in the plugin.
}

}  // namespace
