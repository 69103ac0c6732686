#include "cpu_features.hpp"

#if defined(__x86_64__) || defined(__i386__)
#include <cpu_features/cpuinfo_x86.h>
#elif defined(__aarch64__)
#include <cpu_features/cpuinfo_aarch64.h>
#endif

namespace backplane::cpu {

#if defined(__x86_64__) || defined(__i386__)
CpuIdentity read_cpu_identity() {
  using namespace cpu_features;
  // GetX86Info checks XCR0, so AVX and AVX-512 are listed only when the OS saves their state.
  const X86Info info = GetX86Info();
  const X86Features& f = info.features;
  CpuIdentity id;
  id.arch = sizeof(void*) == 8 ? "x86_64" : "i686";
  id.vendor = info.vendor;
  id.brand = info.brand_string;
  const X86Microarchitecture uarch = GetX86Microarchitecture(&info);
  if (uarch != X86_UNKNOWN) id.microarchitecture = GetX86MicroarchitectureName(uarch);
  const std::pair<bool, const char*> flags[] = {
      {f.sse4_2, "sse4_2"},
      {f.avx, "avx"},
      {f.avx2, "avx2"},
      {f.fma3, "fma"},
      {f.f16c, "f16c"},
      {f.avx512f, "avx512f"},
      {f.avx512bw, "avx512bw"},
      {f.avx512dq, "avx512dq"},
      {f.avx512vl, "avx512vl"},
      {f.avx512vnni, "avx512_vnni"},
      {f.avx512_bf16, "avx512_bf16"},
      {f.amx_tile, "amx_tile"},
      {f.amx_bf16, "amx_bf16"},
      {f.amx_int8, "amx_int8"},
  };
  for (const auto& [present, name] : flags) {
    if (present) id.simd.emplace_back(name);
  }
  return id;
}
#elif defined(__aarch64__)
CpuIdentity read_cpu_identity() {
  using namespace cpu_features;
  const Aarch64Info info = GetAarch64Info();
  const Aarch64Features& f = info.features;
  CpuIdentity id;
  id.arch = "aarch64";
  id.vendor = "ARM";
  const std::pair<bool, const char*> flags[] = {
      {f.asimd, "asimd"}, {f.sve, "sve"}, {f.sve2, "sve2"}, {f.bf16, "bf16"}, {f.i8mm, "i8mm"},
  };
  for (const auto& [present, name] : flags) {
    if (present) id.simd.emplace_back(name);
  }
  return id;
}
#else
CpuIdentity read_cpu_identity() {
  return CpuIdentity{"unknown", "", "", "", {}};
}
#endif

}  // namespace backplane::cpu
