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

// Fills *problem when the status is ok.
Status make_problem(Activation activation, const DLTensor* input, const DLTensor* output,
                    kernels::Memory memory, Problem* problem);

}  // namespace backplane::activation
