// RMSNorm forward, with the fused residual add, over DLPack tensors: the rms_norm op of the
// plugin ABI (bp_rms_norm_args in backplane/plugin.h, whose comment is the definition):
//
//   out = x * rsqrt(mean(x^2) + epsilon) * weight           per row of `hidden` values
//   with residual: residual = residual + input (rounded to the dtype, in place), then x is that
//
// input [..., hidden], weight [hidden], output and residual the shape of input. The last dim of
// each must be contiguous; the leading dims may have any strides. float32, bfloat16 or float16,
// one dtype for all; float32 arithmetic, one rounding per result. output may be input itself
// (in place); any other overlap is refused.
//
// Errors: a Status naming the argument and what would be accepted; nothing throws.
// Threads: the CPU kernel runs on the process-wide pool of kernels/common (threads.hpp).
#pragma once

#include <dlpack/dlpack.h>

#include "common/status.hpp"

namespace backplane::rmsnorm {

using kernels::Status;
using kernels::StatusCode;

struct Tensors {
  const DLTensor* input = nullptr;
  const DLTensor* weight = nullptr;
  const DLTensor* residual = nullptr;  // optional: the fused residual add
  const DLTensor* output = nullptr;
};

// Host memory (kDLCPU). Highway dispatches to the best SIMD target of this CPU.
Status forward_cpu(const Tensors& tensors, double epsilon);
// The Highway target forward_cpu runs on ("AVX3", "AVX2", ...).
const char* cpu_target();

// CUDA memory (kDLCUDA); `stream` is a cudaStream_t (NULL: the default stream). Returns once the
// kernel is queued. Defined only in backplane_rmsnorm_cuda (built when nvcc is found).
Status forward_cuda(const Tensors& tensors, double epsilon, void* stream);

}  // namespace backplane::rmsnorm
