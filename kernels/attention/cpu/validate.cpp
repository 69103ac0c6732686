// Argument checks: every user error becomes an InvalidArgument status naming the argument.
#include "cpu/problem.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>

namespace backplane::attention::cpu {
namespace {

// DLPack 0.8 added kDLBool (6); Debian's header (0.6) predates it.
constexpr uint8_t kDLBoolCode = 6;

std::string dims_string(const DLTensor& t) {
  std::ostringstream s;
  s << '[';
  for (int i = 0; i < t.ndim; ++i) s << (i ? ", " : "") << t.shape[i];
  s << ']';
  return s.str();
}

std::string dims_string(const int64_t (&d)[4]) {
  std::ostringstream s;
  s << '[' << d[0] << ", " << d[1] << ", " << d[2] << ", " << d[3] << ']';
  return s.str();
}

std::string dtype_string(DLDataType t) {
  std::string base;
  switch (t.code) {
    case kDLInt:
      base = "int";
      break;
    case kDLUInt:
      base = "uint";
      break;
    case kDLFloat:
      base = "float";
      break;
    case kDLBfloat:
      base = "bfloat";
      break;
    case kDLComplex:
      base = "complex";
      break;
    case kDLBoolCode:
      base = "bool";
      break;
    default:
      base = "code" + std::to_string(t.code) + "_";
      break;
  }
  std::string s = base + std::to_string(t.bits);
  if (t.lanes != 1) s += "x" + std::to_string(t.lanes);
  return s;
}

bool to_dtype(DLDataType t, DType* out) {
  if (t.lanes != 1) return false;
  if (t.code == kDLFloat && t.bits == 32)
    *out = DType::kF32;
  else if (t.code == kDLBfloat && t.bits == 16)
    *out = DType::kBF16;
  else if (t.code == kDLFloat && t.bits == 16)
    *out = DType::kF16;
  else
    return false;
  return true;
}

const char* device_name(int type) {
  switch (type) {
    case kDLCPU:
      return "kDLCPU";
    case kDLCUDA:
      return "kDLCUDA";
    case kDLCUDAHost:
      return "kDLCUDAHost";
    case kDLROCM:
      return "kDLROCM";
    case kDLROCMHost:
      return "kDLROCMHost";
    case kDLMetal:
      return "kDLMetal";
    case kDLVulkan:
      return "kDLVulkan";
    case kDLOpenCL:
      return "kDLOpenCL";
    case kDLCUDAManaged:
      return "kDLCUDAManaged";
    default:
      return "unknown";
  }
}

int64_t numel(const DLTensor& t) {
  int64_t n = 1;
  for (int i = 0; i < t.ndim; ++i) n *= t.shape[i];
  return n;
}

int64_t element_bytes(const DLTensor& t) {
  return (t.dtype.bits * t.dtype.lanes + 7) / 8;
}

// Stride of dim i in elements (compact row-major when strides is NULL).
int64_t stride_of(const DLTensor& t, int i) {
  if (t.strides) return t.strides[i];
  int64_t s = 1;
  for (int j = t.ndim - 1; j > i; --j) s *= t.shape[j];
  return s;
}

const char* base_ptr(const DLTensor& t) {
  return static_cast<const char*>(t.data) + t.byte_offset;
}

// Byte range [lo, hi) the tensor's elements span; empty for a tensor without elements.
struct Span {
  uintptr_t lo = 0, hi = 0;
  bool empty() const { return lo == hi; }
};
Span span_of(const DLTensor& t) {
  if (numel(t) == 0 || !t.data) return {};
  int64_t lo = 0, hi = 0;
  for (int i = 0; i < t.ndim; ++i) {
    const int64_t reach = (t.shape[i] - 1) * stride_of(t, i);
    (reach < 0 ? lo : hi) += reach;
  }
  const int64_t es = element_bytes(t);
  const auto base = reinterpret_cast<uintptr_t>(base_ptr(t));
  return {base + static_cast<uintptr_t>(lo * es), base + static_cast<uintptr_t>((hi + 1) * es)};
}

bool overlaps(Span a, Span b) {
  return !a.empty() && !b.empty() && a.lo < b.hi && b.lo < a.hi;
}

Status error(const std::string& message) {
  return Status::InvalidArgument("attention: " + message);
}

// Checks that do not depend on the other tensors.
Status check_tensor(const DLTensor* t, const char* name, bool four_dims, const char* layout) {
  if (!t) return error(std::string(name) + " is NULL");
  if (t->device.device_type != kDLCPU) {
    return error(std::string(name) + " is on device " + device_name(t->device.device_type) +
                 "; the CPU kernels need kDLCPU memory");
  }
  if (t->ndim < 0 || t->ndim > 8 || (t->ndim > 0 && !t->shape)) {
    return error(std::string(name) + " has an invalid shape (ndim " + std::to_string(t->ndim) +
                 (t->ndim > 0 && !t->shape ? ", shape NULL)" : ")"));
  }
  if (four_dims && t->ndim != 4) {
    return error(std::string(name) + " must have 4 dims " + layout + ", got " +
                 std::to_string(t->ndim) + " dims " + dims_string(*t));
  }
  for (int i = 0; i < t->ndim; ++i) {
    if (t->shape[i] < 0) {
      return error(std::string(name) + " has a negative size in shape " + dims_string(*t));
    }
  }
  if (numel(*t) > 0) {
    if (!t->data) return error(std::string(name) + " data is NULL");
    const int64_t es = element_bytes(*t);
    if (reinterpret_cast<uintptr_t>(base_ptr(*t)) % static_cast<uintptr_t>(es) != 0) {
      return error(std::string(name) + " data (data + byte_offset) is not aligned to its " +
                   std::to_string(es) + "-byte elements");
    }
  }
  return Status::Ok();
}

}  // namespace

Status make_problem(const Tensors& tensors, const Options& options, Problem* problem) {
  const char* qkv_layout[] = {
      "[batch, heads_q, seq_q, head_dim]", "[batch, heads_kv, seq_k, head_dim]",
      "[batch, heads_kv, seq_k, head_dim_v]", "[batch, heads_q, seq_q, head_dim_v]"};
  const DLTensor* all[] = {tensors.query, tensors.key, tensors.value, tensors.output};
  const char* names[] = {"query", "key", "value", "output"};
  for (int i = 0; i < 4; ++i) {
    Status s = check_tensor(all[i], names[i], true, qkv_layout[i]);
    if (!s.ok()) return s;
  }
  const DLTensor& q = *tensors.query;
  const DLTensor& k = *tensors.key;
  const DLTensor& v = *tensors.value;
  const DLTensor& o = *tensors.output;

  DType dtype;
  if (!to_dtype(q.dtype, &dtype)) {
    return error("query has dtype " + dtype_string(q.dtype) +
                 "; supported: float32, bfloat16, float16");
  }
  for (int i = 1; i < 4; ++i) {
    if (all[i]->dtype.code != q.dtype.code || all[i]->dtype.bits != q.dtype.bits ||
        all[i]->dtype.lanes != q.dtype.lanes) {
      return error(std::string(names[i]) + " has dtype " + dtype_string(all[i]->dtype) +
                   " but query has " + dtype_string(q.dtype) +
                   "; query, key, value and output must share one dtype");
    }
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
                   "head_dim_v] = " + dims_string(want_out));
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
    op->data = base_ptr(*all[i]);
    for (int d = 0; d < 4; ++d) op->stride[d] = stride_of(*all[i], d);
  }

  const Span out_span = span_of(o);
  for (int i = 0; i < 3; ++i) {
    if (overlaps(out_span, span_of(*all[i]))) {
      return error(std::string("output overlaps ") + names[i] +
                   " in memory; write the result to a separate buffer");
    }
  }

  if (tensors.mask) {
    const DLTensor& m = *tensors.mask;
    Status s = check_tensor(&m, "mask", false, "");
    if (!s.ok()) return s;
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
    const int64_t target[4] = {p.batch, p.heads_q, p.seq_q, p.seq_k};
    p.mask.data = base_ptr(m);
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
    if (overlaps(out_span, span_of(m))) {
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
