// The shared attention argument rules (checks.hpp), in the order the errors are reported:
// each operand alone, then dtypes, data, shapes, scale, overlaps, and the mask last.
#include "attention/checks.hpp"

#include <cmath>
#include <sstream>
#include <string>

namespace backplane::attention {
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

// Present, in `memory`, and a layout that fits; q, k, v and output (with a `layout`) have 4 dims.
Status check_operand(const DLTensor* t, const char* name, const char* layout,
                     kernels::Memory memory) {
  if (Status s = kernels::check_placement(kOp, t, name, memory); !s.ok()) return s;
  if (layout && t->ndim != 4) {
    const bool readable = t->ndim >= 0 && t->ndim <= 8 && (t->ndim == 0 || t->shape);
    return error(std::string(name) + " must have 4 dims " + layout + ", got " +
                 std::to_string(t->ndim) + " dims" + (readable ? " " + dims_string(*t) : ""));
  }
  return kernels::check_layout(kOp, *t, name, 0);
}

// Device memory only: `t` is on query's GPU.
Status check_device(const DLTensor& t, const char* name, const DLTensor& query,
                    kernels::Memory memory) {
  if (memory == kernels::Memory::kHost) return Status::Ok();
  return kernels::check_same_device(kOp, t, name, query, "query");
}

StridedView view_of(const DLTensor& t) {
  StridedView v;
  v.data = base_of(t);
  for (int d = 0; d < 4; ++d) v.stride[d] = stride_of(t, d);
  return v;
}

Status check_shapes(const DLTensor& q, const DLTensor& k, const DLTensor& v, const DLTensor& o,
                    CheckedCall* c) {
  c->batch = q.shape[0];
  c->heads_q = q.shape[1];
  c->seq_q = q.shape[2];
  c->head_dim = q.shape[3];
  c->heads_kv = k.shape[1];
  c->seq_k = k.shape[2];
  c->head_dim_v = v.shape[3];
  if (k.shape[0] != c->batch || v.shape[0] != c->batch) {
    return error("batch sizes differ: query " + dims_string(q) + ", key " + dims_string(k) +
                 ", value " + dims_string(v));
  }
  if (k.shape[3] != c->head_dim) {
    return error("key head_dim " + std::to_string(k.shape[3]) + " differs from query head_dim " +
                 std::to_string(c->head_dim) + " (query " + dims_string(q) + ", key " +
                 dims_string(k) + ")");
  }
  if (v.shape[1] != c->heads_kv || v.shape[2] != c->seq_k) {
    return error("value " + dims_string(v) + " must have key's heads_kv and seq_k (key " +
                 dims_string(k) + ")");
  }
  if (c->head_dim == 0 && c->seq_k > 0) return error("head_dim must be at least 1, got 0");
  if (c->heads_kv == 0 ? c->heads_q != 0 : c->heads_q % c->heads_kv != 0) {
    return error("heads_q (" + std::to_string(c->heads_q) + ") must be a multiple of heads_kv (" +
                 std::to_string(c->heads_kv) + ") for grouped-query attention");
  }
  const int64_t want_out[4] = {c->batch, c->heads_q, c->seq_q, c->head_dim_v};
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
  return Status::Ok();
}

Status check_mask(const DLTensor& m, const DLTensor& q, const DLTensor& o, kernels::Memory memory,
                  CheckedCall* c) {
  if (Status s = check_operand(&m, "mask", nullptr, memory); !s.ok()) return s;
  if (Status s = check_device(m, "mask", q, memory); !s.ok()) return s;
  if (m.ndim > 4) {
    return error("mask has " + std::to_string(m.ndim) + " dims " + dims_string(m) +
                 "; it must broadcast to [batch, heads_q, seq_q, seq_k] (at most 4 dims)");
  }
  const DLDataType mt = m.dtype;
  if (mt.lanes == 1 && mt.bits == 8 && (mt.code == kDLBoolCode || mt.code == kDLUInt)) {
    c->mask_dtype = MaskDtype::kBool;
  } else if (mt.lanes == 1 && mt.code == kDLFloat && mt.bits == 32) {
    c->mask_dtype = MaskDtype::kAdditiveF32;
  } else if (mt.lanes == 1 && mt.code == q.dtype.code && mt.bits == q.dtype.bits) {
    c->mask_dtype = MaskDtype::kAdditiveQueryDtype;
  } else {
    return error("mask has dtype " + dtype_string(mt) +
                 "; expected bool (keep where true), or an additive float32 or " +
                 dtype_string(q.dtype) + " (the query's dtype)");
  }
  if (Status s = kernels::check_data(kOp, m, "mask"); !s.ok()) return s;
  const int64_t target[4] = {c->batch, c->heads_q, c->seq_q, c->seq_k};
  c->mask.data = base_of(m);
  for (int d = 0; d < 4; ++d) {
    const int md = d - (4 - m.ndim);
    if (md < 0) {
      c->mask.stride[d] = 0;
      continue;
    }
    const int64_t size = m.shape[md];
    if (size != target[d] && size != 1) {
      return error("mask shape " + dims_string(m) +
                   " does not broadcast to [batch, heads_q, seq_q, seq_k] = " +
                   dims_string(target) + ": mask dim " + std::to_string(md) + " is " +
                   std::to_string(size) + ", expected " + std::to_string(target[d]) + " or 1");
    }
    c->mask.stride[d] = size == 1 ? 0 : stride_of(m, md);
  }
  if (overlaps(o, m)) {
    return error("output overlaps mask in memory; write the result to a separate buffer");
  }
  return Status::Ok();
}

}  // namespace

Status check_call(const Tensors& tensors, std::optional<double> scale, kernels::Memory memory,
                  CheckedCall* call) {
  const char* layouts[] = {
      "[batch, heads_q, seq_q, head_dim]", "[batch, heads_kv, seq_k, head_dim]",
      "[batch, heads_kv, seq_k, head_dim_v]", "[batch, heads_q, seq_q, head_dim_v]"};
  const DLTensor* all[] = {tensors.query, tensors.key, tensors.value, tensors.output};
  const char* names[] = {"query", "key", "value", "output"};
  for (int i = 0; i < 4; ++i) {
    if (Status s = check_operand(all[i], names[i], layouts[i], memory); !s.ok()) return s;
  }
  const DLTensor& q = *tensors.query;
  const DLTensor& o = *tensors.output;
  for (int i = 1; i < 4; ++i) {
    if (Status s = check_device(*all[i], names[i], q, memory); !s.ok()) return s;
  }

  CheckedCall c;
  if (!kernels::to_dtype(q.dtype, &c.dtype)) {
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
  if (Status s = check_shapes(q, *tensors.key, *tensors.value, o, &c); !s.ok()) return s;

  c.scale =
      scale ? *scale : (c.head_dim > 0 ? 1.0 / std::sqrt(static_cast<double>(c.head_dim)) : 1.0);
  if (!std::isfinite(c.scale)) return error("scale must be finite, got " + std::to_string(c.scale));

  StridedView* views[] = {&c.q, &c.k, &c.v, &c.out};
  for (int i = 0; i < 4; ++i) *views[i] = view_of(*all[i]);
  for (int i = 0; i < 3; ++i) {
    if (overlaps(o, *all[i])) {
      return error(std::string("output overlaps ") + names[i] +
                   " in memory; write the result to a separate buffer");
    }
  }
  if (tensors.mask) {
    if (Status s = check_mask(*tensors.mask, q, o, memory, &c); !s.ok()) return s;
  }
  *call = c;
  return Status::Ok();
}

}  // namespace backplane::attention
