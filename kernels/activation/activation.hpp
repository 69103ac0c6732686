// Gated activations over DLPack tensors: the silu_and_mul, gelu_and_mul and gelu_tanh_and_mul
// ops of the plugin ABI (bp_gated_activation_args in backplane/plugin.h):
//
//   input [..., 2 * d]  ->  output [..., d],   out = act(input[..., :d]) * input[..., d:]
//
//   silu(x)      = x / (1 + exp(-x))
//   gelu(x)      = x / 2 * (1 + erf(x / sqrt(2)))                                    (exact)
//   gelu_tanh(x) = x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3)))      (approximation)
//
// The last dim of each tensor must be contiguous; the leading dims may have any strides.
// float32, bfloat16 or float16, one dtype for both; float32 arithmetic, one rounding per
// result. output must not overlap input.
//
// The backward (for training), from the output's gradient and the forward's input:
//
//   grad_output [..., d], input [..., 2 * d]  ->  grad_input [..., 2 * d]
//   grad_input[..., :d] = grad_output * input[..., d:] * act'(input[..., :d])
//   grad_input[..., d:] = grad_output * act(input[..., :d])
//
// with the layouts and dtypes of the forward (all three one dtype); grad_input must not overlap
// the other two. The forward saves nothing: the backward recomputes act from the gate.
//
// Errors: a Status naming the argument and what would be accepted; nothing throws.
// Threads: the CPU kernel runs on the process-wide pool of kernels/common (threads.hpp).
#pragma once

#include <dlpack/dlpack.h>

#include "common/status.hpp"

namespace backplane::activation {

using kernels::Status;
using kernels::StatusCode;

enum class Activation { kSilu, kGelu, kGeluTanh };
// The op names of the plugin ABI: "silu_and_mul", "gelu_and_mul", "gelu_tanh_and_mul".
const char* op_name(Activation activation);
// The backward's: "silu_and_mul_backward", "gelu_and_mul_backward", "gelu_tanh_and_mul_backward".
const char* backward_op_name(Activation activation);

// Host memory (kDLCPU). Highway dispatches to the best SIMD target of this CPU.
Status forward_cpu(Activation activation, const DLTensor* input, const DLTensor* output);
// The Highway target forward_cpu runs on ("AVX3", "AVX2", ...).
const char* cpu_target();
// The backward on host memory, dispatched like forward_cpu.
Status backward_cpu(Activation activation, const DLTensor* grad_output, const DLTensor* input,
                    const DLTensor* grad_input);

// CUDA memory (kDLCUDA); `stream` is a cudaStream_t (NULL: the default stream). Defined only in
// backplane_activation_cuda (built when nvcc is found).
Status forward_cuda(Activation activation, const DLTensor* input, const DLTensor* output,
                    void* stream);
// The backward on CUDA memory, as forward_cuda.
Status backward_cuda(Activation activation, const DLTensor* grad_output, const DLTensor* input,
                     const DLTensor* grad_input, void* stream);

}  // namespace backplane::activation
