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
  bool inverse = false;  // the rotation back (sin negated): the backward
};

#ifdef __CUDACC__
#define BACKPLANE_ROTARY_HOST_DEVICE __host__ __device__
#else
#define BACKPLANE_ROTARY_HOST_DEVICE
#endif

// Rows are numbered batch-major, then the query heads and the key heads, then seq: where row
// `row` of `heads` (query's plus key's) starts, in elements from its operand's data, and the
// operand. The CUDA kernel numbers its rows so; the CPU kernel walks blocks of positions.
struct RowStart {
  const Operand* operand;
  int64_t element;
  int64_t batch, seq;
};

BACKPLANE_ROTARY_HOST_DEVICE inline RowStart row_start(const Problem& p, int64_t heads,
                                                       int64_t row) {
  const int64_t s = row % p.seq;
  const int64_t bh = row / p.seq;
  const int64_t b = bh / heads;
  int64_t h = bh % heads;
  const Operand* o = h < p.query.heads ? &p.query : &p.key;
  if (h >= p.query.heads) h -= p.query.heads;
  return {o, b * o->stride[0] + h * o->stride[1] + s * o->stride[2], b, s};
}

// Fills *problem when the status is ok. inverse: the backward's problem (its messages name
// rotary_embedding_backward).
Status make_problem(const Tensors& tensors, Style style, kernels::Memory memory, Problem* problem,
                    bool inverse = false);

}  // namespace backplane::rotary
