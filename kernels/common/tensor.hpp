// DLPack tensor checks and views shared by every kernel library (attention on CPU and GPU,
// rmsnorm, activation, rotary): each check returns InvalidArgument with "<op>: <argument> ...",
// the bad value and what would be accepted. A library runs the checks in the order below; each
// assumes the ones before it passed, and after them the views (numel, spans, rows) cannot
// overflow.
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
// The DType of `t`; false when it is none of them (or has lanes).
bool to_dtype(DLDataType t, DType* out);
bool same_dtype(DLDataType a, DLDataType b);

std::string dims_string(const DLTensor& t);
std::string dtype_string(DLDataType t);
int64_t numel(const DLTensor& t);
int64_t element_bytes(const DLTensor& t);       // bits * lanes, rounded up to bytes
int64_t stride_of(const DLTensor& t, int dim);  // elements; compact row-major when NULL
char* base_of(const DLTensor& t);               // data + byte_offset

// Where a kernel library runs: the DLPack device types its tensors may live on.
//   kHost: kDLCPU or kDLCUDAHost (pinned host memory), device_id 0 as DLPack sets it.
//   kCuda: kDLCUDA or kDLCUDAManaged; kRocm: kDLROCM; device_id a GPU ordinal (>= 0).
enum class Memory { kHost, kCuda, kRocm };

Status invalid(const char* op, const std::string& message);

// 1. Not NULL, and on `memory` with a device_id it allows.
Status check_placement(const char* op, const DLTensor* t, const char* name, Memory memory);

// `t` is on `other`'s device (the same GPU); names both when not.
Status check_same_device(const char* op, const DLTensor& t, const char* name, const DLTensor& other,
                         const char* other_name);

// 2. min_ndim to 8 dims with a shape, no negative size, and an extent that fits in int64: the
// product of the sizes, each (size - 1) * stride, and the span in bytes (so a huge shape or
// stride is refused here, not overflowed later).
Status check_layout(const char* op, const DLTensor& t, const char* name, int min_ndim);

// 3. When `t` has elements: data not NULL, data + byte_offset and the span of its strides
// inside the user address space (nothing wraps; negative strides stay above address 0), and
// aligned to whole-byte elements. Run after the dtype is known to be one the kernel takes.
Status check_data(const char* op, const DLTensor& t, const char* name);

// The layer kernels' tensor argument: 1-3 above (1 to 8 dims), a supported dtype (written to
// *dtype), and a contiguous last dim (stride 1).
Status check_tensor(const char* op, const DLTensor* t, const char* name, Memory memory,
                    DType* dtype);

// A tensor the kernel writes has no stride 0 on a dim of size > 1.
Status check_written(const char* op, const DLTensor& t, const char* name);

// `t` has `other`'s dtype (the message names both).
Status check_same_dtype(const char* op, const DLTensor& t, const char* name, const DLTensor& other,
                        const char* other_name);

// "input" and "output" have the same shape (message: "<op>: output shape [..] must equal
// input's [..]").
Status check_same_shape(const char* op, const DLTensor& t, const char* name, const DLTensor& other,
                        const char* other_name);

// Whether a and b share at least one byte of the range their elements span, and whether they
// are the same view (data, offset, shape and strides), which in-place operations accept.
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

}  // namespace backplane::kernels
