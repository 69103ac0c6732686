// GPU attention forward kernels (CUDA, and the same source built by hipcc for AMD GPUs), for
// the cuda and rocm plugins. Semantics are those of <attention/attention.hpp> (shapes, GQA,
// masks, bottom-right causal, zeros for fully masked rows, strides in elements); the tensors
// live in device memory of one GPU and the work is queued on the caller's stream.
//
//   flash: FlashAttention-2 forward (tiled, online softmax, tensor-core MMA on NVIDIA sm_80+),
//          bfloat16 and float16, head_dim and head_dim_v up to 256.
//   eager: the plain reference, one thread block per query row, two passes over the keys (row
//          maximum, then exp-sum and P V), float32, bfloat16 and float16, head dims up to 256.
// Either writes the logsumexp the backward reads (eager_backward.cu, a reference-grade kernel
// pair on plain FMA loops: correct on both vendors, not tuned).
//
// Nothing is allocated on the device; the call returns once the kernel is queued. The caller's
// current device is restored before returning. Errors are returned as a Status (the kernel
// libraries' one type, kernels/common/status.hpp), never thrown.
#pragma once

#include <attention/attention.hpp>

#include <optional>
#include <string>

namespace backplane::attention::gpu {

// The largest head_dim and head_dim_v either kernel takes.
inline constexpr int kMaxHeadDim = 256;

enum class Kernel { kFlash, kEager };
const char* kernel_name(Kernel kernel);  // "flash", "eager"

struct Call {
  bool causal = false;
  std::optional<double> scale;  // default 1 / sqrt(head_dim)
  Kernel kernel = Kernel::kFlash;
  void* stream = nullptr;  // cudaStream_t / hipStream_t; null: the default stream
};

// Validates (host side, nothing touches the GPU), then queues the kernel. An empty problem
// (batch, heads_q or seq_q zero) succeeds without touching the GPU.
Status forward(const Tensors& tensors, const Call& call);

// The backward (<attention/attention.hpp>'s semantics) from the forward's saved logsumexp,
// which both forward kernels write when Tensors::logsumexp is given: the eager backward
// kernels for every dtype (Call::kernel is not used), float32 arithmetic, head dims up to
// 256, no atomics (the same bits on every run). Validates on the host, then queues.
Status backward(const BackwardTensors& tensors, const Call& call);

// Whether the kernel handles the dtype and head dims of a valid call (sdpa uses flash when it
// does, eager otherwise, as PyTorch's SDPA falls back to its math path).
bool flash_supports(const Tensors& tensors);

// The targets the kernels were compiled for ("sm_80 sm_90 compute_90", "gfx90a").
const char* compiled_targets();

}  // namespace backplane::attention::gpu
