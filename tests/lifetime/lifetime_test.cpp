// Opening and closing the runtime leaks nothing, and what it hands out outlives it safely: a
// kernel keeps its plugin library loaded (the runtime's snapshot is its owner), an error keeps
// its own copy of the plugin's message.
#include <backplane/backplane.hpp>

#include <gtest/gtest.h>

#include <exception>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/lsan_interface.h>
#endif

#include "attention_fixture.hpp"
#include "process_resources.hpp"

namespace backplane::testing {
namespace {

const std::string kPluginDir = PLUGIN_BUILD_DIR;

RuntimeOptions in_tree_plugins(std::optional<std::vector<std::string>> only = std::nullopt) {
  RuntimeOptions options;
  options.plugin_path = std::vector<std::filesystem::path>{kPluginDir};
  options.only_plugins = std::move(only);
  options.log_sink = [](LogLevel, const std::string&) {};
  return options;
}

// Runs the kernel on a thread of its own that ends before this returns. The CPU kernels keep
// thread_local scratch buffers, and glibc keeps a library loaded while a thread holds one of its
// thread_local objects; a thread that has ended holds none, so the library can unload.
std::vector<float> run(const AttentionKernel& kernel, const AttentionProblem& problem) {
  std::vector<float> result;
  std::exception_ptr error;
  std::thread([&] {
    try {
      const OwnedTensor out = AttentionProblem::output();
      kernel(problem.args(out));
      result = out.data;
    } catch (...) {
      error = std::current_exception();
    }
  }).join();
  if (error) std::rethrow_exception(error);
  return result;
}

// Opens and closes the runtime `times` times after a warm-up, and checks that nothing grew.
void expect_open_close_leaves_nothing(const RuntimeOptions& options, int times) {
  {
    // What the first open sets up for good (the C library's and the vendor runtimes' caches)
    // is not a leak: warm up before counting.
    const Runtime warm = Runtime::open(options);
    ASSERT_FALSE(warm.plugins().empty());
    for (const PluginInfo& plugin : warm.plugins()) {
      EXPECT_NE(plugin.status, PluginStatus::kFailed) << plugin.name << ": " << plugin.error;
    }
    EXPECT_GT(mapping_count(kPluginDir), 0);
  }
  EXPECT_EQ(mapping_count(kPluginDir), 0) << "a plugin library stayed mapped after close";
  const int descriptors = open_descriptor_count();
  const int mappings = mapping_count();
  for (int i = 0; i < times; ++i) {
    const Runtime rt = Runtime::open(options);
    if (rt.devices().empty()) FAIL() << "open " << i << " found no devices";
  }
  EXPECT_EQ(open_descriptor_count(), descriptors);
  EXPECT_EQ(mapping_count(kPluginDir), 0) << "a plugin library stayed mapped after close";
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // The sanitizer's allocator maps regions of its own as it goes; LeakSanitizer checks memory.
  (void)mappings;
#else
  EXPECT_EQ(mapping_count(), mappings);
#endif
#if defined(__SANITIZE_ADDRESS__)
  EXPECT_EQ(__lsan_do_recoverable_leak_check(), 0) << "LeakSanitizer reported leaks above";
#endif
}

TEST(Lifetime, OpeningAndClosingAThousandTimesLeavesNothing) {
  // Every in-tree plugin but rocm, whose HIP runtime takes most of an open's time (0.1 s).
  expect_open_close_leaves_nothing(
      in_tree_plugins(std::vector<std::string>{"cpu", "sim", "mps", "cuda", "xpu"}), 1000);
}

TEST(Lifetime, OpeningAndClosingWithEveryPluginLeavesNothing) {
  expect_open_close_leaves_nothing(in_tree_plugins(), 20);
}

TEST(Lifetime, AKernelKeptPastCloseStillRuns) {
  const AttentionProblem problem;
  std::optional<AttentionKernel> kept;
  std::vector<float> expected;
  {
    const Runtime rt = Runtime::open(in_tree_plugins(std::vector<std::string>{"cpu"}));
    kept = rt.attention_kernel(Device("cpu"), "sdpa");
    expected = run(*kept, problem);
  }
  EXPECT_GT(mapping_count("libbackplane-cpu"), 0) << "the kernel's plugin was unloaded under it";
  EXPECT_EQ(run(*kept, problem), expected);
  EXPECT_EQ(kept->info().implementation, "sdpa");
  kept.reset();
}

TEST(Lifetime, AnErrorKeptPastCloseOwnsItsMessage) {
  const AttentionProblem problem;
  std::optional<InvalidArgument> kept;
  {
    const Runtime rt = Runtime::open(in_tree_plugins(std::vector<std::string>{"cpu"}));
    const AttentionKernel kernel = rt.attention_kernel(Device("cpu"), "eager");
    const OwnedTensor wrong({1, 4, 7, 16}, 0);  // head_dim 16 against 32
    std::thread([&] {
      try {
        kernel(problem.args(wrong));
      } catch (const InvalidArgument& e) {
        kept = e;
      }
    }).join();
  }
  ASSERT_TRUE(kept.has_value()) << "the kernel accepted a mismatched output";
  // The message was copied out of the plugin's status: reading it now reads no unloaded memory.
  EXPECT_NE(std::string(kept->what()).find("attention_forward/eager on cpu: "), std::string::npos)
      << kept->what();
}

}  // namespace
}  // namespace backplane::testing
