// The Example NPU's attention_forward kernel: float32, on tensors in host memory (the NPU shares
// the host's memory, so its tensors are kDLCPU DLTensors). Every argument is checked before any
// data is read; a refused call returns its reason and writes nothing.
#pragma once

#include <backplane/plugin.h>

#include <string>

namespace example_npu {

inline constexpr int kMaxHeadDim = 256;

// Empty on success, else why the call was refused (BP_INVALID_ARGUMENT).
std::string attention_forward(const bp_attention_args& args);

}  // namespace example_npu
