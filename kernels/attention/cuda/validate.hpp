// Host-side checks of a GPU attention call, run before anything touches the GPU; pure C++ so
// they build and are tested without a GPU toolkit. Messages follow the CPU kernels' style:
// "attention: <argument> ...; <what would be accepted>".
#pragma once

#include <attention/attention.hpp>

#include <optional>
#include <string>

#include "attention_gpu.hpp"
#include "params.hpp"

namespace backplane::attention::gpu {

// Which DLPack devices the build serves: NVIDIA (kDLCUDA, kDLCUDAManaged) or AMD (kDLROCM).
enum class Platform { kCuda, kRocm };

// Fills `params` when the call is valid for `kernel`; otherwise an InvalidArgument result
// naming the argument. An empty problem is valid (`params` says so through its sizes).
Status make_params(const Tensors& tensors, bool causal, std::optional<double> scale, Kernel kernel,
                   Platform platform, Params* params);

// The same for a backward call (the eager backward kernel's limits: head dims up to 256).
Status make_backward_params(const BackwardTensors& tensors, bool causal,
                            std::optional<double> scale, Platform platform, BackwardParams* params);

// The problem has nothing to write (batch, heads_q or seq_q is 0; or head_dim_v is, and no
// logsumexp is asked for).
bool is_empty(const Params& params);

}  // namespace backplane::attention::gpu
