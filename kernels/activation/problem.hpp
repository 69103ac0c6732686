// Internal: a validated gated-activation call, flat, for the CPU and CUDA kernels.
#pragma once

#include <cstdint>

#include "activation/activation.hpp"
#include "common/tensor.hpp"

namespace backplane::activation {

struct Problem {
  Activation activation = Activation::kSilu;
  kernels::DType dtype = kernels::DType::kF32;
  int64_t rows = 0;
  int64_t d = 0;  // output columns; the input row holds 2 * d
  kernels::Rows input, output;
};

struct BackwardProblem {
  Activation activation = Activation::kSilu;
  kernels::DType dtype = kernels::DType::kF32;
  int64_t rows = 0;
  int64_t d = 0;  // grad_output columns; input and grad_input rows hold 2 * d
  kernels::Rows grad_output, input, grad_input;
};

// Fills *problem when the status is ok.
Status make_backward_problem(Activation activation, const DLTensor* grad_output,
                             const DLTensor* input, const DLTensor* grad_input,
                             kernels::Memory memory, BackwardProblem* problem);

// Fills *problem when the status is ok.
Status make_problem(Activation activation, const DLTensor* input, const DLTensor* output,
                    kernels::Memory memory, Problem* problem);

}  // namespace backplane::activation
