// The core's public enums that mirror the plugin ABI's, value for value, so that what a plugin
// registers is copied across without a table: checked here at compile time. (KernelMode's
// private bits are checked in kernel_mapping/mode.cpp; the kernel libraries' StatusCode in
// kernels/common/abi_status.hpp.)
#include <backplane/plugin.h>
#include <backplane/runtime/device_info.hpp>
#include <backplane/runtime/runtime.hpp>

#include <cstdint>

namespace backplane::detail {
namespace {

constexpr bool same(uint64_t ours, uint64_t abi) {
  return ours == abi;
}

static_assert(same(kCapFp16, BP_CAP_FP16) && same(kCapBf16, BP_CAP_BF16) &&
                  same(kCapTf32, BP_CAP_TF32) && same(kCapFp8, BP_CAP_FP8) &&
                  same(kCapFp64, BP_CAP_FP64) && same(kCapUnifiedMemory, BP_CAP_UNIFIED_MEMORY),
              "Capability mirrors bp_device_capability");
static_assert(same(static_cast<uint64_t>(LogLevel::kError), BP_LOG_ERROR) &&
                  same(static_cast<uint64_t>(LogLevel::kWarn), BP_LOG_WARN) &&
                  same(static_cast<uint64_t>(LogLevel::kInfo), BP_LOG_INFO) &&
                  same(static_cast<uint64_t>(LogLevel::kDebug), BP_LOG_DEBUG),
              "LogLevel mirrors bp_log_level");

}  // namespace
}  // namespace backplane::detail
