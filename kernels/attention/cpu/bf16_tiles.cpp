// Which bf16 tile products the sdpa kernel may run: AMX (sdpa_amx-inl.h) where the CPU has it
// and the process may use it, else AVX512-BF16 (sdpa_dpbf16-inl.h) where that beats converting
// to fp32, unless a test or benchmark turned either off.
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
std::atomic<bool> g_dpbf16_enabled{true};

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

// vdpbf16ps pays off only where it issues as often as an fp32 FMA, doing twice its
// multiply-adds: AMD's cores with AVX512-BF16 (Zen 4 and later; measured 2.0x the FMA's
// GFLOP/s on a Zen 4 EPYC). Intel's Cooper Lake and Sapphire Rapids issue it at half the FMA's
// rate, the fp32 multiply rate, and there the packing made it slower than the fp32 tiles.
bool dpbf16_faster_than_fp32() {
#if HWY_ARCH_X86_64 && (defined(__GNUC__) || defined(__clang__))
  return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_is("amd");
#else
  return false;
#endif
}
}  // namespace

bool amx_bf16_available() {
  static const bool allowed = amx_allowed();
  return allowed && g_amx_enabled.load(std::memory_order_relaxed);
}

bool dpbf16_tiles_available() {
  static const bool faster = dpbf16_faster_than_fp32();
  return faster && g_dpbf16_enabled.load(std::memory_order_relaxed);
}

void set_amx_enabled(bool enabled) {
  g_amx_enabled.store(enabled);
}

void set_dpbf16_enabled(bool enabled) {
  g_dpbf16_enabled.store(enabled);
}

}  // namespace backplane::attention::cpu
