// Whether the sdpa kernel may run its bfloat16 tiles on AMX (sdpa_amx-inl.h): the CPU has it
// and the process may use it, unless a test or benchmark turned it off.
#include <atomic>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <hwy/base.h>

#include "cpu/problem.hpp"

namespace backplane::attention::cpu {

namespace {
std::atomic<bool> g_amx_enabled{true};

// AMX needs the CPU (AMX-TILE, AMX-BF16) and, on Linux, the process's permission to use the
// tile data state (arch_prctl ARCH_REQ_XCOMP_PERM, granted once per process; oneDNN asks the
// same way). Anything else: the fp32 tiles.
bool amx_allowed() {
#if HWY_ARCH_X86_64 && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
  if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-bf16") ||
      !__builtin_cpu_supports("avx512bf16")) {
    return false;
  }
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}
}  // namespace

bool amx_bf16_available() {
  static const bool allowed = amx_allowed();
  return allowed && g_amx_enabled.load(std::memory_order_relaxed);
}

void set_amx_enabled(bool enabled) {
  g_amx_enabled.store(enabled);
}

}  // namespace backplane::attention::cpu
