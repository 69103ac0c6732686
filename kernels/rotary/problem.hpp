// Internal: a validated rotary_embedding call, flat, for the CPU and CUDA kernels.
#pragma once

#include <cstdint>

#include "common/tensor.hpp"
#include "rotary/rotary.hpp"

namespace backplane::rotary {

// query or key: base and strides (elements) of [batch, heads, seq]; the last dim is contiguous.
struct Operand {
  char* data = nullptr;
  int64_t heads = 0;
  int64_t stride[3] = {0, 0, 0};
};

// cos or sin: base and strides of [batch, seq] (batch stride 0 when broadcast).
struct Table {
  const char* data = nullptr;
  int64_t stride[2] = {0, 0};
};

struct Problem {
  Style style = Style::kNeox;
  kernels::DType dtype = kernels::DType::kF32;        // query and key
  kernels::DType table_dtype = kernels::DType::kF32;  // cos and sin
  int64_t batch = 0, seq = 0, head_dim = 0;
  int64_t half = 0;    // rotary_dim / 2: the pairs per row
  Operand query, key;  // key.data NULL: none
  Table cos, sin;
};

// Fills *problem when the status is ok.
Status make_problem(const Tensors& tensors, Style style, kernels::Memory memory, Problem* problem);

}  // namespace backplane::rotary
