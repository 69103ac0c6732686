// Argument checks: every user error becomes an InvalidArgument status naming the argument.
// The per-tensor checks are kernels/common's, shared with the GPU kernels and the layer kernels.
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>

#include "common/tensor.hpp"
#include "cpu/problem.hpp"

namespace backplane::attention::cpu {
namespace {

using kernels::base_of;
using kernels::dims_string;
using kernels::dtype_string;
using kernels::numel;
using kernels::overlaps;
using kernels::stride_of;

constexpr const char* kOp = "attention";
// DLPack 0.8 added kDLBool (6); Debian's header (0.6) predates it.
constexpr uint8_t kDLBoolCode = 6;

std::string dims_string(const int64_t (&d)[4]) {
  std::ostringstream s;
  s << '[' << d[0] << ", " << d[1] << ", " << d[2] << ", " << d[3] << ']';
  return s.str();
}

Status error(const std::string& message) {
  return kernels::invalid(kOp, message);
}

// Present, in host memory, and a layout that fits; q, k, v and output (with a `layout`) have
// 4 dims.
Status check_operand(const DLTensor* t, const char* name, const char* layout) {
  Status s = kernels::check_placement(kOp, t, name, kernels::Memory::kHost);
  if (!s.ok()) return s;
  if (layout && t->ndim != 4) {
    const bool readable = t->ndim >= 0 && t->ndim <= 8 && (t->ndim == 0 || t->shape);
    return error(std::string(name) + " must have 4 dims " + layout + ", got " +
                 std::to_string(t->ndim) + " dims" + (readable ? " " + dims_string(*t) : ""));
  }
  return kernels::check_layout(kOp, *t, name, 0);
}

}  // namespace

Status make_problem(const Tensors& tensors, const Options& options, Problem* problem) {
  const char* qkv_layout[] = {
      "[batch, heads_q, seq_q, head_dim]", "[batch, heads_kv, seq_k, head_dim]",
      "[batch, heads_kv, seq_k, head_dim_v]", "[batch, heads_q, seq_q, head_dim_v]"};
  const DLTensor* all[] = {tensors.query, tensors.key, tensors.value, tensors.output};
  const char* names[] = {"query", "key", "value", "output"};
  for (int i = 0; i < 4; ++i) {
    Status s = check_operand(all[i], names[i], qkv_layout[i]);
    if (!s.ok()) return s;
  }
  const DLTensor& q = *tensors.query;
  const DLTensor& k = *tensors.key;
  const DLTensor& v = *tensors.value;
  const DLTensor& o = *tensors.output;

  DType dtype;
  if (!kernels::to_dtype(q.dtype, &dtype)) {
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
    Status s = kernels::check_data(kOp, *all[i], names[i]);
    if (!s.ok()) return s;
  }

  Problem p;
  p.dtype = dtype;
  p.batch = q.shape[0];
  p.heads_q = q.shape[1];
  p.seq_q = q.shape[2];
  p.head_dim = q.shape[3];
  p.heads_kv = k.shape[1];
  p.seq_k = k.shape[2];
  p.head_dim_v = v.shape[3];

  if (k.shape[0] != p.batch || v.shape[0] != p.batch) {
    return error("batch sizes differ: query " + dims_string(q) + ", key " + dims_string(k) +
                 ", value " + dims_string(v));
  }
  if (k.shape[3] != p.head_dim) {
    return error("key head_dim " + std::to_string(k.shape[3]) + " differs from query head_dim " +
                 std::to_string(p.head_dim) + " (query " + dims_string(q) + ", key " +
                 dims_string(k) + ")");
  }
  if (v.shape[1] != p.heads_kv || v.shape[2] != p.seq_k) {
    return error("value " + dims_string(v) + " must have key's heads_kv and seq_k (key " +
                 dims_string(k) + ")");
  }
  if (p.head_dim == 0 && p.seq_k > 0) return error("head_dim must be at least 1, got 0");
  if (p.heads_kv == 0 ? p.heads_q != 0 : p.heads_q % p.heads_kv != 0) {
    return error("heads_q (" + std::to_string(p.heads_q) + ") must be a multiple of heads_kv (" +
                 std::to_string(p.heads_kv) + ") for grouped-query attention");
  }
  const int64_t want_out[4] = {p.batch, p.heads_q, p.seq_q, p.head_dim_v};
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

  double scale = options.scale
                     ? *options.scale
                     : (p.head_dim > 0 ? 1.0 / std::sqrt(static_cast<double>(p.head_dim)) : 1.0);
  if (!std::isfinite(scale)) {
    return error("scale must be finite, got " + std::to_string(scale));
  }
  p.scale = static_cast<float>(scale);
  p.causal = options.causal;

  Operand* ops[] = {&p.q, &p.k, &p.v, &p.out};
  for (int i = 0; i < 4; ++i) {
    Operand* op = ops[i];
    op->data = base_of(*all[i]);
    for (int d = 0; d < 4; ++d) op->stride[d] = stride_of(*all[i], d);
  }

  for (int i = 0; i < 3; ++i) {
    if (overlaps(o, *all[i])) {
      return error(std::string("output overlaps ") + names[i] +
                   " in memory; write the result to a separate buffer");
    }
  }

  if (tensors.mask) {
    Status s = check_operand(tensors.mask, "mask", nullptr);
    if (!s.ok()) return s;
    const DLTensor& m = *tensors.mask;
    if (m.ndim > 4) {
      return error("mask has " + std::to_string(m.ndim) + " dims " + dims_string(m) +
                   "; it must broadcast to [batch, heads_q, seq_q, seq_k] (at most 4 dims)");
    }
    const DLDataType mt = m.dtype;
    if (mt.lanes == 1 && mt.bits == 8 && (mt.code == kDLBoolCode || mt.code == kDLUInt)) {
      p.mask_kind = MaskKind::kBool;
    } else if (mt.lanes == 1 && mt.code == kDLFloat && mt.bits == 32) {
      p.mask_kind = MaskKind::kAdditiveF32;
    } else if (mt.lanes == 1 && mt.code == q.dtype.code && mt.bits == q.dtype.bits) {
      p.mask_kind = dtype == DType::kBF16 ? MaskKind::kAdditiveBF16 : MaskKind::kAdditiveF16;
    } else {
      return error("mask has dtype " + dtype_string(mt) +
                   "; expected bool (keep where true), or an additive float32 or " +
                   dtype_string(q.dtype) + " (the query's dtype)");
    }
    s = kernels::check_data(kOp, m, "mask");
    if (!s.ok()) return s;
    const int64_t target[4] = {p.batch, p.heads_q, p.seq_q, p.seq_k};
    p.mask.data = base_of(m);
    for (int d = 0; d < 4; ++d) {
      const int md = d - (4 - m.ndim);
      if (md < 0) {
        p.mask.stride[d] = 0;
        continue;
      }
      const int64_t size = m.shape[md];
      if (size != target[d] && size != 1) {
        return error("mask shape " + dims_string(m) +
                     " does not broadcast to [batch, heads_q, seq_q, seq_k] = " +
                     dims_string(target) + ": mask dim " + std::to_string(md) + " is " +
                     std::to_string(size) + ", expected " + std::to_string(target[d]) + " or 1");
      }
      p.mask.stride[d] = size == 1 ? 0 : stride_of(m, md);
    }
    if (overlaps(o, m)) {
      return error("output overlaps mask in memory; write the result to a separate buffer");
    }
  }
  *problem = p;
  return Status::Ok();
}

float mask_bias(const Problem& p, int64_t b, int64_t h, int64_t i, int64_t j) {
  const int64_t off =
      b * p.mask.stride[0] + h * p.mask.stride[1] + i * p.mask.stride[2] + j * p.mask.stride[3];
  switch (p.mask_kind) {
    case MaskKind::kNone:
      return 0.0f;
    case MaskKind::kBool:
      return static_cast<const uint8_t*>(p.mask.data)[off]
                 ? 0.0f
                 : -std::numeric_limits<float>::infinity();
    case MaskKind::kAdditiveF32:
      return static_cast<const float*>(p.mask.data)[off];
    case MaskKind::kAdditiveBF16:
      return bf16_to_f32(static_cast<const uint16_t*>(p.mask.data)[off]);
    case MaskKind::kAdditiveF16:
      return f16_to_f32(static_cast<const uint16_t*>(p.mask.data)[off]);
  }
  return 0.0f;
}

}  // namespace backplane::attention::cpu
