// backplane::torch, the LibTorch bridge: zero-copy torch::Tensor <-> DLPack, device names
// between backplane, LibTorch and DLPack, and attention through backplane's kernels. Builds
// against LibTorch 1.13 (C++17) and 2.x (C++20).
#pragma once

#include <backplane/torch/attention.hpp>
#include <backplane/torch/device.hpp>
#include <backplane/torch/dlpack.hpp>
