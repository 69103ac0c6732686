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
// The backward (for training), from the output's gradient g and the rows x that were normalized
// (the forward's input; with the residual add, its updated residual), r = rsqrt(mean(x^2) + eps):
//
//   grad_input  = r (g weight - x r^2 mean(g weight x))  (+ grad_residual)     per row
//   grad_weight = sum over the rows of g x r
//
// With the residual add, grad_residual (optional) is the gradient reaching the updated residual
// from the layers after it; grad_input is then the gradient of both the input and the residual
// before the add. grad_weight is summed in float32 in a fixed order (the same bits on any number
// of threads) and rounded once. All tensors one dtype; layouts as the forward's; grad_input and
// grad_weight must not overlap anything else.
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

struct BackwardTensors {
  const DLTensor* grad_output = nullptr;
  const DLTensor* input = nullptr;  // x: the rows the forward normalized
  const DLTensor* weight = nullptr;
  const DLTensor* grad_residual = nullptr;  // optional
  const DLTensor* grad_input = nullptr;     // written
  const DLTensor* grad_weight = nullptr;    // written, [hidden]
};

// Host memory (kDLCPU). Highway dispatches to the best SIMD target of this CPU.
Status forward_cpu(const Tensors& tensors, double epsilon);
// The backward on host memory, dispatched like forward_cpu.
Status backward_cpu(const BackwardTensors& tensors, double epsilon);
// The Highway target forward_cpu runs on ("AVX3", "AVX2", ...).
const char* cpu_target();

// CUDA memory (kDLCUDA); `stream` is a cudaStream_t (NULL: the default stream). Returns once the
// kernel is queued. Defined only in backplane_rmsnorm_cuda (built when nvcc is found).
Status forward_cuda(const Tensors& tensors, double epsilon, void* stream);
// The backward on CUDA memory, as forward_cuda; the weight gradient summed over the rows in
// row order (no atomics: the same bits on every run). grad_input doubles as the kernels' scratch
// until its last kernel writes it.
Status backward_cuda(const BackwardTensors& tensors, double epsilon, void* stream);

}  // namespace backplane::rmsnorm
