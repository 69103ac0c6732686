// Internal: a validated rms_norm call, flat, for the CPU and CUDA kernels.
#pragma once

#include <cstdint>

#include "common/tensor.hpp"
#include "rmsnorm/rmsnorm.hpp"

namespace backplane::rmsnorm {

struct Problem {
  kernels::DType dtype = kernels::DType::kF32;
  int64_t rows = 0;
  int64_t hidden = 0;
  kernels::Rows input, residual, output;  // residual.data NULL: none
  const void* weight = nullptr;
  float epsilon = 0.0f;
};

struct BackwardProblem {
  kernels::DType dtype = kernels::DType::kF32;
  int64_t rows = 0;
  int64_t hidden = 0;
  kernels::Rows grad_output, input, grad_residual, grad_input;  // grad_residual.data NULL: none
  const void* weight = nullptr;
  void* grad_weight = nullptr;
  float epsilon = 0.0f;
};

// Fills *problem when the status is ok.
Status make_backward_problem(const BackwardTensors& tensors, double epsilon, kernels::Memory memory,
                             BackwardProblem* problem);

// Fills *problem when the status is ok.
Status make_problem(const Tensors& tensors, double epsilon, kernels::Memory memory,
                    Problem* problem);

}  // namespace backplane::rmsnorm
