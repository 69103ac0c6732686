// What the CPU is and which SIMD extensions the OS lets us use, from Google's cpu_features.
#pragma once

#include <string>
#include <vector>

namespace backplane::cpu {

struct CpuIdentity {
  std::string arch;               // "x86_64", "aarch64"
  std::string vendor;             // "GenuineIntel", "AuthenticAMD", "ARM"
  std::string brand;              // "Intel(R) Xeon(R) Platinum 8480+"; may be empty
  std::string microarchitecture;  // "INTEL_SPR", "AMD_ZEN4"; may be empty
  // SIMD features usable by this process, named as Linux's /proc/cpuinfo flags:
  // avx2, fma, avx512f, avx512bw, avx512vl, avx512_vnni, avx512_bf16, avx512_fp16,
  // amx_tile, amx_bf16, amx_int8, avx_vnni; asimd (NEON), sve, sve2, bf16, i8mm.
  std::vector<std::string> simd;
};

CpuIdentity read_cpu_identity();

}  // namespace backplane::cpu
