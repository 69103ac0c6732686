// How a probe child's end reads (white box: core/src/isolation), table-tested over wait
// statuses built as the kernel builds them.
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <string>

#include "isolation/probe.hpp"

namespace backplane::detail {
namespace {

int exited(int code) {
  return (code & 0xff) << 8;
}
int killed(int signal) {
  return signal & 0x7f;
}

struct End {
  int wait_status;
  ProbeStage stage;
  bool passed;
  std::string reason;
};

TEST(ProbeEnd, ReadsTheWaitStatusAndStage) {
  const End table[] = {
      {exited(0), ProbeStage::kCompleted, true, ""},
      {exited(0), ProbeStage::kRefused, false, "init failed (BP_UNAVAILABLE): no driver"},
      {killed(SIGSEGV), ProbeStage::kNothing, false, "init crashed with SIGSEGV"},
      {killed(SIGABRT), ProbeStage::kNothing, false, "init crashed with SIGABRT"},
      {killed(SIGBUS), ProbeStage::kInitDone, false, "shutdown crashed with SIGBUS"},
      {exited(3), ProbeStage::kNothing, false, "init called exit(3)"},
      {exited(0), ProbeStage::kNothing, false, "init called exit(0)"},
      {exited(7), ProbeStage::kInitDone, false, "shutdown called exit(7)"},
      {exited(9), ProbeStage::kCompleted, false, "the probe process ended with status 9"},
      {killed(SIGKILL), ProbeStage::kCompleted, false,
       "the probe process was killed by SIGKILL after the plugin returned"},
  };
  for (const End& end : table) {
    const ProbeOutcome outcome =
        describe_probe_end(end.wait_status, end.stage, "init failed (BP_UNAVAILABLE): no driver");
    EXPECT_EQ(outcome.passed, end.passed) << end.reason;
    EXPECT_EQ(outcome.reason, end.reason);
  }
}

TEST(ProbeEnd, TimeoutNamesThePhaseAndSeconds) {
  using std::chrono::milliseconds;
  EXPECT_EQ(probe_timeout_reason(ProbeStage::kNothing, milliseconds(10000)),
            "init did not finish within 10 s");
  EXPECT_EQ(probe_timeout_reason(ProbeStage::kNothing, milliseconds(500)),
            "init did not finish within 0.5 s");
  EXPECT_EQ(probe_timeout_reason(ProbeStage::kInitDone, milliseconds(2500)),
            "shutdown did not finish within 2.5 s");
}

}  // namespace
}  // namespace backplane::detail
