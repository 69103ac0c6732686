// 16 threads share one runtime for a bounded time: they query devices and backends, resolve
// attention, look up kernels and call the cpu attention kernels, and every answer is checked
// against the one a single thread got first. ThreadSanitizer runs this (./dev.sh sanitize).
#include <backplane/backplane.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "attention_fixture.hpp"

namespace backplane::testing {
namespace {

constexpr int kThreads = 16;
// Long enough for every thread to run many rounds interleaved; each round is checked, the time
// only bounds the test.
constexpr std::chrono::milliseconds kRunFor{2000};

struct Reference {
  std::vector<std::string> device_names;
  std::string resolved;  // resolve_attention(cpu) with the default request
  std::vector<float> sdpa, eager;
};

std::vector<std::string> device_names(const Runtime& rt) {
  std::vector<std::string> names;
  for (const DeviceInfo& d : rt.devices()) names.push_back(d.device.str() + " " + d.name);
  return names;
}

std::vector<float> run(const AttentionKernel& kernel, const AttentionProblem& problem) {
  const OwnedTensor out = AttentionProblem::output();
  kernel(problem.args(out));
  return out.data;
}

// One round of everything a serving thread does; returns what differed from `ref`, or "".
std::string round(const Runtime& rt, const AttentionProblem& problem, const Reference& ref, int i) {
  if (device_names(rt) != ref.device_names) return "devices() changed";
  if (rt.device(Device("cpu")).device != Device("cpu", 0)) return "device(cpu) changed";
  if (rt.backend("cpu") == nullptr || !rt.backend("cpu")->available) return "backend(cpu) lost";
  if (rt.kernels().empty()) return "kernels() empty";
  if (!rt.memory_info(Device("cpu"))) return "memory_info(cpu) failed";
  const AttentionResolution resolution = rt.resolve_attention(Device("cpu"));
  if (resolution.implementation != ref.resolved) {
    return "resolve_attention gave " + resolution.implementation;
  }
  const bool use_sdpa = i % 2 == 0;
  const AttentionKernel kernel =
      use_sdpa ? rt.attention_kernel(resolution) : rt.attention_kernel(Device("cpu"), "eager");
  if (run(kernel, problem) != (use_sdpa ? ref.sdpa : ref.eager)) {
    return std::string(use_sdpa ? "sdpa" : "eager") + " gave another result";
  }
  return {};
}

TEST(Concurrency, SixteenThreadsQueryResolveAndCallKernels) {
  RuntimeOptions options;
  options.plugin_path = std::vector<std::filesystem::path>{PLUGIN_BUILD_DIR};
  options.only_plugins = std::vector<std::string>{"cpu", "sim"};
  options.log_sink = [](LogLevel, const std::string&) {};
  const Runtime rt = Runtime::open(options);
  const AttentionProblem problem;

  Reference ref;
  ref.device_names = device_names(rt);
  ref.resolved = rt.resolve_attention(Device("cpu")).implementation;
  ASSERT_EQ(ref.resolved, "sdpa");
  ref.sdpa = run(rt.attention_kernel(Device("cpu"), "sdpa"), problem);
  ref.eager = run(rt.attention_kernel(Device("cpu"), "eager"), problem);

  std::atomic<bool> go{false};
  std::vector<std::string> first_error(kThreads);
  std::vector<long> rounds(kThreads, 0);
  std::vector<std::thread> threads;
  const auto until = std::chrono::steady_clock::now() + kRunFor;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      while (!go.load()) std::this_thread::yield();
      // At least two rounds each (both kernels), however slow the build.
      for (int i = t; rounds[t] < 2 || std::chrono::steady_clock::now() < until; ++i) {
        std::string error = round(rt, problem, ref, i);
        ++rounds[t];
        if (!error.empty()) {
          first_error[t] = error;
          return;
        }
      }
    });
  }
  go = true;
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    EXPECT_EQ(first_error[t], "") << "thread " << t << " after " << rounds[t] << " rounds";
    EXPECT_GE(rounds[t], 2) << "thread " << t;
  }
}

}  // namespace
}  // namespace backplane::testing
