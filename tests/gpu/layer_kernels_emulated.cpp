// The CUDA layer kernels' source compiled for the CPU emulator, for the ctest
// layer_kernels_emulated_test (layer_kernels_check.cpp in its emulated build).
#include "cuda_emulator.hpp"
// (order matters: the emulator defines the CUDA names the kernel sources use)
#include "activation/cuda/activation.cu"
#include "rmsnorm/cuda/rmsnorm.cu"
#include "rotary/cuda/rotary.cu"
