// DLPack tensor checks and views shared by the layer kernels (rmsnorm, activation, rotary):
// every check returns InvalidArgument with "<op>: <argument> ..." and what would be accepted.
#pragma once

#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.hpp"

namespace backplane::kernels {

enum class DType { kF32, kBF16, kF16 };

const char* dtype_name(DType t);  // "float32", "bfloat16", "float16"
inline size_t dtype_size(DType t) {
  return t == DType::kF32 ? 4 : 2;
}

std::string dims_string(const DLTensor& t);
std::string dtype_string(DLDataType t);
int64_t numel(const DLTensor& t);
int64_t stride_of(const DLTensor& t, int dim);  // elements; compact row-major when NULL
char* base_of(const DLTensor& t);               // data + byte_offset

// Where the kernels run: the device types a tensor may live on.
enum class Memory { kHost, kCuda };

// The checks every tensor argument gets: not NULL, on `memory`, 1 to 8 dims with a shape, no
// negative size, data present and aligned to the element when there are elements, a supported
// dtype (written to *dtype), and a contiguous last dim.
Status check_tensor(const char* op, const DLTensor* t, const char* name, Memory memory,
                    DType* dtype);

// A tensor the kernel writes has no stride 0 on a dim of size > 1.
Status check_written(const char* op, const DLTensor& t, const char* name);

// `t` has `other`'s dtype (the message names both).
Status check_same_dtype(const char* op, const DLTensor& t, const char* name, const DLTensor& other,
                        const char* other_name);

// Whether a and b share at least one byte, and whether they are the same view (data, offset,
// shape and strides), which in-place operations accept.
bool overlaps(const DLTensor& a, const DLTensor& b);
bool same_view(const DLTensor& a, const DLTensor& b);

// A tensor as rows of `cols` contiguous elements: the last dim is the row, the leading dims
// (any strides, merged where they are compact) number the rows in row-major order.
struct Rows {
  char* data = nullptr;  // byte_offset applied
  int64_t rows = 0;
  int64_t cols = 0;
  int lead = 0;  // leading dims after merging
  int64_t shape[8] = {};
  int64_t stride[8] = {};  // elements

  // Element offset of the first element of `row`.
  int64_t offset(int64_t row) const {
    if (lead == 1) return row * stride[0];
    int64_t off = 0;
    for (int d = lead - 1; d >= 0; --d) {
      off += (row % shape[d]) * stride[d];
      row /= shape[d];
    }
    return off;
  }
};
Rows rows_of(const DLTensor& t);

// "input" and "output" have the same shape (message: "<op>: output shape [..] must equal
// input's [..]").
Status check_same_shape(const char* op, const DLTensor& t, const char* name, const DLTensor& other,
                        const char* other_name);

Status invalid(const char* op, const std::string& message);

}  // namespace backplane::kernels
