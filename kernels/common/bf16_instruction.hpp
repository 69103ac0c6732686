// Whether the AVX-512 layer kernels round float32 to bfloat16 with the CPU's own instruction,
// vcvtneps2bf16 (AVX512-BF16: Cooper Lake, Sapphire Rapids, Zen 4 and later), instead of the
// portable integer sequence of simd-inl.h, which costs a memory-bound bf16 kernel about half
// its speed. Both round to nearest even and keep a NaN a NaN; the instruction also turns a
// float32 subnormal (|x| < 2^-126) into a signed zero, where the sequence keeps it subnormal.
#pragma once

namespace backplane::kernels {

// Set once from CPUID when the library loads; read by the kernels' inner loops.
extern bool g_bf16_instruction;

bool cpu_has_bf16_instruction();

// For tests that check both ways: false forces the portable sequence; true takes effect only
// where the CPU has the instruction. Not to be called while a kernel runs.
void use_bf16_instruction(bool on);

}  // namespace backplane::kernels
