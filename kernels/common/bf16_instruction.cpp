#include "common/bf16_instruction.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace backplane::kernels {

bool cpu_has_bf16_instruction() {
#if defined(__x86_64__) || defined(__i386__)
  // CPUID.(EAX=7, ECX=1):EAX bit 5. The AVX-512 state the instruction needs is the one the
  // AVX3 targets already require: Highway enables them only where the OS saves it.
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) return false;
  return (eax >> 5) & 1u;
#else
  return false;
#endif
}

bool g_bf16_instruction = cpu_has_bf16_instruction();

void use_bf16_instruction(bool on) {
  g_bf16_instruction = on && cpu_has_bf16_instruction();
}

}  // namespace backplane::kernels
