// Argument checks for the GPU kernels: the CPU kernels' rules (kernels/attention/cpu/
// validate.cpp) on kernels/common's per-tensor checks, plus what a GPU launch needs: device
// memory of one GPU, sizes that fit the grid, and the dtypes and head dims each kernel was
// built for.
#include "validate.hpp"

#include <common/tensor.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>

namespace backplane::attention::gpu {
namespace {

using kernels::base_of;
using kernels::dims_string;
using kernels::dtype_string;
using kernels::element_bytes;
using kernels::numel;
using kernels::overlaps;
using kernels::stride_of;

constexpr const char* kOp = "attention";
// DLPack 0.8 added kDLBool (6); Debian's header (0.6) predates it.
constexpr uint8_t kDLBoolCode = 6;
// gridDim.y and gridDim.z (heads_q and batch) are limited to 65535 on both vendors.
constexpr int64_t kMaxGridYZ = 65535;

std::string dims_string(const int64_t (&d)[4]) {
  std::ostringstream s;
  s << '[' << d[0] << ", " << d[1] << ", " << d[2] << ", " << d[3] << ']';
  return s.str();
}

bool to_element_type(kernels::DType t, ElementType* out) {
  switch (t) {
    case kernels::DType::kF32:
      *out = ElementType::kFloat32;
      return true;
    case kernels::DType::kBF16:
      *out = ElementType::kBfloat16;
      return true;
    case kernels::DType::kF16:
      *out = ElementType::kFloat16;
      return true;
  }
  return false;
}

kernels::Memory memory_of(Platform platform) {
  return platform == Platform::kCuda ? kernels::Memory::kCuda : kernels::Memory::kRocm;
}

Status error(const std::string& message) {
  return kernels::invalid(kOp, message);
}

// Present, in the platform's device memory, and a layout that fits; q, k, v and output (with
// a `layout`) have 4 dims.
Status check_operand(const DLTensor* t, const char* name, const char* layout, Platform platform) {
  Status s = kernels::check_placement(kOp, t, name, memory_of(platform));
  if (!s.ok()) return s;
  if (layout && t->ndim != 4) {
    const bool readable = t->ndim >= 0 && t->ndim <= 8 && (t->ndim == 0 || t->shape);
    return error(std::string(name) + " must have 4 dims " + layout + ", got " +
                 std::to_string(t->ndim) + " dims" + (readable ? " " + dims_string(*t) : ""));
  }
  return kernels::check_layout(kOp, *t, name, 0);
}

bool fits_int32(int64_t x) {
  return x <= std::numeric_limits<int32_t>::max();
}

// 16-byte copies: dim stride 1, the other strides multiples of 8 two-byte elements, aligned base.
bool vectorizable(const DLTensor& t, int64_t head_dim) {
  if (element_bytes(t) != 2 || head_dim % 8 != 0 || stride_of(t, 3) != 1) return false;
  for (int i = 0; i < 3; ++i) {
    if (stride_of(t, i) % 8 != 0) return false;
  }
  return reinterpret_cast<uintptr_t>(base_of(t)) % 16 == 0;
}

}  // namespace

bool is_empty(const Params& p) {
  return p.batch == 0 || p.heads_q == 0 || p.seq_q == 0 || p.head_dim_v == 0;
}

Status make_params(const Tensors& tensors, bool causal, std::optional<double> scale, Kernel kernel,
                   Platform platform, Params* params) {
  const char* layouts[] = {
      "[batch, heads_q, seq_q, head_dim]", "[batch, heads_kv, seq_k, head_dim]",
      "[batch, heads_kv, seq_k, head_dim_v]", "[batch, heads_q, seq_q, head_dim_v]"};
  const DLTensor* all[] = {tensors.query, tensors.key, tensors.value, tensors.output};
  const char* names[] = {"query", "key", "value", "output"};
  for (int i = 0; i < 4; ++i) {
    if (Status s = check_operand(all[i], names[i], layouts[i], platform); !s.ok()) return s;
  }
  const DLTensor& q = *tensors.query;
  const DLTensor& k = *tensors.key;
  const DLTensor& v = *tensors.value;
  const DLTensor& o = *tensors.output;
  for (int i = 1; i < 4; ++i) {
    if (Status s = kernels::check_same_device(kOp, *all[i], names[i], q, "query"); !s.ok()) {
      return s;
    }
  }

  Params p{};
  kernels::DType dtype;
  if (!kernels::to_dtype(q.dtype, &dtype) || !to_element_type(dtype, &p.dtype)) {
    return error("query has dtype " + dtype_string(q.dtype) +
                 "; supported: float32, bfloat16, float16");
  }
  for (int i = 1; i < 4; ++i) {
    if (!kernels::same_dtype(all[i]->dtype, q.dtype)) {
      return error(std::string(names[i]) + " has dtype " + dtype_string(all[i]->dtype) +
                   " but query has " + dtype_string(q.dtype) +
                   "; query, key, value and output must share one dtype");
    }
  }
  for (int i = 0; i < 4; ++i) {
    if (Status s = kernels::check_data(kOp, *all[i], names[i]); !s.ok()) return s;
  }
  if (kernel == Kernel::kFlash && p.dtype == ElementType::kFloat32) {
    return error(
        "query has dtype float32; the flash kernel takes bfloat16 or float16 (tensor cores), "
        "use eager or sdpa for float32");
  }

  const int64_t batch = q.shape[0], heads_q = q.shape[1], seq_q = q.shape[2], head_dim = q.shape[3],
                heads_kv = k.shape[1], seq_k = k.shape[2], head_dim_v = v.shape[3];
  if (k.shape[0] != batch || v.shape[0] != batch) {
    return error("batch sizes differ: query " + dims_string(q) + ", key " + dims_string(k) +
                 ", value " + dims_string(v));
  }
  if (k.shape[3] != head_dim) {
    return error("key head_dim " + std::to_string(k.shape[3]) + " differs from query head_dim " +
                 std::to_string(head_dim) + " (query " + dims_string(q) + ", key " +
                 dims_string(k) + ")");
  }
  if (v.shape[1] != heads_kv || v.shape[2] != seq_k) {
    return error("value " + dims_string(v) + " must have key's heads_kv and seq_k (key " +
                 dims_string(k) + ")");
  }
  if (head_dim == 0 && seq_k > 0) return error("head_dim must be at least 1, got 0");
  if (heads_kv == 0 ? heads_q != 0 : heads_q % heads_kv != 0) {
    return error("heads_q (" + std::to_string(heads_q) + ") must be a multiple of heads_kv (" +
                 std::to_string(heads_kv) + ") for grouped-query attention");
  }
  const int64_t want_out[4] = {batch, heads_q, seq_q, head_dim_v};
  for (int i = 0; i < 4; ++i) {
    if (o.shape[i] != want_out[i]) {
      return error("output shape " + dims_string(o) + " must be [batch, heads_q, seq_q, " +
                   "head_dim_v] = " + dims_string(want_out) + " (query " + dims_string(q) +
                   ", value " + dims_string(v) + ")");
    }
  }
  for (int i = 0; i < 4 && numel(o) > 0; ++i) {
    if (o.shape[i] > 1 && stride_of(o, i) == 0) {
      return error("output has stride 0 on dim " + std::to_string(i) +
                   " of size > 1: its elements would overlap");
    }
  }
  if (head_dim > kMaxHeadDim || head_dim_v > kMaxHeadDim) {
    return error("head_dim " + std::to_string(head_dim) + " and head_dim_v " +
                 std::to_string(head_dim_v) + ": the GPU kernels take head dims up to " +
                 std::to_string(kMaxHeadDim));
  }
  if (batch > kMaxGridYZ || heads_q > kMaxGridYZ) {
    return error("batch " + std::to_string(batch) + " and heads_q " + std::to_string(heads_q) +
                 " must each be at most " + std::to_string(kMaxGridYZ) +
                 " (one grid dimension each)");
  }
  if (!fits_int32(seq_q) || !fits_int32(seq_k)) {
    return error("seq_q " + std::to_string(seq_q) + " and seq_k " + std::to_string(seq_k) +
                 " must fit in 32 bits");
  }

  const double scale_value =
      scale ? *scale : (head_dim > 0 ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : 1.0);
  if (!std::isfinite(scale_value)) {
    return error("scale must be finite, got " + std::to_string(scale_value));
  }

  p.batch = static_cast<int32_t>(batch);
  p.heads_q = static_cast<int32_t>(heads_q);
  p.heads_kv = static_cast<int32_t>(heads_kv);
  p.seq_q = static_cast<int32_t>(seq_q);
  p.seq_k = static_cast<int32_t>(seq_k);
  p.head_dim = static_cast<int32_t>(head_dim);
  p.head_dim_v = static_cast<int32_t>(head_dim_v);
  p.group = heads_kv > 0 ? static_cast<int32_t>(heads_q / heads_kv) : 1;
  p.scale = static_cast<float>(scale_value);
  p.causal = causal ? 1 : 0;
  p.device_id = q.device.device_id;
  p.q = base_of(q);
  p.k = base_of(k);
  p.v = base_of(v);
  p.out = base_of(o);
  for (int d = 0; d < 4; ++d) {
    p.q_stride[d] = stride_of(q, d);
    p.k_stride[d] = stride_of(k, d);
    p.v_stride[d] = stride_of(v, d);
    p.out_stride[d] = stride_of(o, d);
  }
  p.vector_loads =
      vectorizable(q, head_dim) && vectorizable(k, head_dim) && vectorizable(v, head_dim_v);

  for (int i = 0; i < 3; ++i) {
    if (overlaps(o, *all[i])) {
      return error(std::string("output overlaps ") + names[i] +
                   " in memory; write the result to a separate buffer");
    }
  }

  p.mask_type = MaskType::kNone;
  if (tensors.mask) {
    if (Status s = check_operand(tensors.mask, "mask", nullptr, platform); !s.ok()) return s;
    const DLTensor& m = *tensors.mask;
    if (Status s = kernels::check_same_device(kOp, m, "mask", q, "query"); !s.ok()) return s;
    if (m.ndim > 4) {
      return error("mask has " + std::to_string(m.ndim) + " dims " + dims_string(m) +
                   "; it must broadcast to [batch, heads_q, seq_q, seq_k] (at most 4 dims)");
    }
    const DLDataType mt = m.dtype;
    if (mt.lanes == 1 && mt.bits == 8 && (mt.code == kDLBoolCode || mt.code == kDLUInt)) {
      p.mask_type = MaskType::kBool;
    } else if (mt.lanes == 1 && mt.code == kDLFloat && mt.bits == 32) {
      p.mask_type = MaskType::kAdditiveF32;
    } else if (mt.lanes == 1 && mt.code == q.dtype.code && mt.bits == q.dtype.bits) {
      p.mask_type =
          p.dtype == ElementType::kBfloat16 ? MaskType::kAdditiveBf16 : MaskType::kAdditiveF16;
    } else {
      return error("mask has dtype " + dtype_string(mt) +
                   "; expected bool (keep where true), or an additive float32 or " +
                   dtype_string(q.dtype) + " (the query's dtype)");
    }
    if (Status s = kernels::check_data(kOp, m, "mask"); !s.ok()) return s;
    const int64_t target[4] = {batch, heads_q, seq_q, seq_k};
    p.mask = base_of(m);
    for (int d = 0; d < 4; ++d) {
      const int md = d - (4 - m.ndim);
      if (md < 0) {
        p.mask_stride[d] = 0;
        continue;
      }
      const int64_t size = m.shape[md];
      if (size != target[d] && size != 1) {
        return error("mask shape " + dims_string(m) +
                     " does not broadcast to [batch, heads_q, seq_q, seq_k] = " +
                     dims_string(target) + ": mask dim " + std::to_string(md) + " is " +
                     std::to_string(size) + ", expected " + std::to_string(target[d]) + " or 1");
      }
      p.mask_stride[d] = size == 1 ? 0 : stride_of(m, md);
    }
    if (overlaps(o, m)) {
      return error("output overlaps mask in memory; write the result to a separate buffer");
    }
  }
  *params = p;
  return {};
}

}  // namespace backplane::attention::gpu
