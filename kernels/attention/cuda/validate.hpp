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

// The problem has no output element to write (batch, heads_q, seq_q or head_dim_v is 0).
bool is_empty(const Params& params);

}  // namespace backplane::attention::gpu
