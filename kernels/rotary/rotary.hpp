// Rotary position embedding over DLPack tensors, query and key in place: the rotary_embedding
// op of the plugin ABI (bp_rotary_embedding_args in backplane/plugin.h, whose comment is the
// definition):
//
//   query [batch, heads_q, seq, head_dim], key [batch, heads_k, seq, head_dim] (optional)
//   cos, sin [seq, rotary_dim / 2] or [batch, seq, rotary_dim / 2] (batch may be 1: broadcast)
//   each pair (x1, x2):  x1' = x1 c - x2 s,  x2' = x2 c + x1 s
//   kNeox: pairs (x[i], x[i + rotary_dim / 2]);  kInterleaved: pairs (x[2i], x[2i + 1])
//
// Dims of query and key from rotary_dim on are left as they are. The last dim of each tensor
// must be contiguous; the other dims may have any strides (a [batch, seq, heads, head_dim]
// tensor passes as a permuted view). query and key share a dtype (float32, bfloat16, float16);
// cos and sin are float32 or that dtype. float32 arithmetic, one rounding per result.
//
// The backward (for training): the rotation is orthogonal, so the gradients of query and key
// are their outputs' gradients rotated back (x1 c + x2 s, x2 c - x1 s), in place. Tensors::query
// and ::key are then those gradients; the same layouts and dtypes as the forward.
//
// Errors: a Status naming the argument and what would be accepted; nothing throws.
// Threads: the CPU kernel runs on the process-wide pool of kernels/common (threads.hpp).
#pragma once

#include <dlpack/dlpack.h>

#include "common/status.hpp"

namespace backplane::rotary {

using kernels::Status;
using kernels::StatusCode;

// Values of bp_rotary_style.
enum class Style : int { kNeox = 0, kInterleaved = 1 };

struct Tensors {
  const DLTensor* query = nullptr;  // updated in place
  const DLTensor* key = nullptr;    // optional, updated in place
  const DLTensor* cos = nullptr;
  const DLTensor* sin = nullptr;
};

// Host memory (kDLCPU). Highway dispatches to the best SIMD target of this CPU.
Status forward_cpu(const Tensors& tensors, Style style);
// The Highway target forward_cpu runs on ("AVX3", "AVX2", ...).
const char* cpu_target();
// The backward on host memory, dispatched like forward_cpu.
Status backward_cpu(const Tensors& gradients, Style style);

// CUDA memory (kDLCUDA); `stream` is a cudaStream_t (NULL: the default stream). Defined only in
// backplane_rotary_cuda (built when nvcc is found).
Status forward_cuda(const Tensors& tensors, Style style, void* stream);
// The backward on CUDA memory, as forward_cuda.
Status backward_cuda(const Tensors& gradients, Style style, void* stream);

}  // namespace backplane::rotary
