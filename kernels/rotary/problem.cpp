#include "rotary/problem.hpp"

#include <string>

namespace backplane::rotary {

using kernels::invalid;

namespace {

Operand operand_of(const DLTensor& t) {
  Operand o;
  o.data = kernels::base_of(t);
  o.heads = t.shape[1];
  for (int i = 0; i < 3; ++i) o.stride[i] = t.shape[i] == 1 ? 0 : kernels::stride_of(t, i);
  return o;
}

Table table_of(const DLTensor& t) {
  Table tb;
  tb.data = kernels::base_of(t);
  const int seq_dim = t.ndim - 2;
  tb.stride[0] = t.ndim == 3 && t.shape[0] > 1 ? kernels::stride_of(t, 0) : 0;
  tb.stride[1] = kernels::stride_of(t, seq_dim);
  return tb;
}

}  // namespace

Status make_problem(const Tensors& t, Style style, kernels::Memory memory, Problem* problem,
                    bool inverse) {
  const char* op = inverse ? "rotary_embedding_backward" : "rotary_embedding";
  if (style != Style::kNeox && style != Style::kInterleaved) {
    return invalid(op, "style " + std::to_string(static_cast<int>(style)) +
                           " is unknown; expected BP_ROTARY_NEOX (0) or BP_ROTARY_INTERLEAVED (1)");
  }
  Problem p;
  p.style = style;
  p.inverse = inverse;
  kernels::DType other;
  Status s = kernels::check_tensor(op, t.query, "query", memory, &p.dtype);
  if (s.ok() && t.key) s = kernels::check_tensor(op, t.key, "key", memory, &other);
  if (s.ok()) s = kernels::check_tensor(op, t.cos, "cos", memory, &p.table_dtype);
  if (s.ok()) s = kernels::check_tensor(op, t.sin, "sin", memory, &other);
  if (s.ok() && t.key) s = kernels::check_same_device(op, *t.key, "key", *t.query, "query");
  if (s.ok()) s = kernels::check_same_device(op, *t.cos, "cos", *t.query, "query");
  if (s.ok()) s = kernels::check_same_device(op, *t.sin, "sin", *t.query, "query");
  if (!s.ok()) return s;
  const DLTensor& q = *t.query;
  const DLTensor& c = *t.cos;
  if (q.ndim != 4) {
    return invalid(op, "query must have 4 dims [batch, heads_q, seq, head_dim], got " +
                           kernels::dims_string(q));
  }
  p.batch = q.shape[0];
  p.seq = q.shape[2];
  p.head_dim = q.shape[3];
  if (t.key) {
    const DLTensor& k = *t.key;
    s = kernels::check_same_dtype(op, k, "key", q, "query");
    if (!s.ok()) return s;
    if (k.ndim != 4 || k.shape[0] != p.batch || k.shape[2] != p.seq || k.shape[3] != p.head_dim) {
      return invalid(op, "key shape " + kernels::dims_string(k) +
                             " must be [batch, heads_k, seq, head_dim] with query's batch, seq "
                             "and head_dim (query " +
                             kernels::dims_string(q) + ")");
    }
  }
  if (c.dtype.code != q.dtype.code || c.dtype.bits != q.dtype.bits) {
    if (p.table_dtype != kernels::DType::kF32) {
      return invalid(op, "cos has dtype " + kernels::dtype_string(c.dtype) +
                             "; expected float32 or query's " + kernels::dtype_string(q.dtype));
    }
  }
  s = kernels::check_same_dtype(op, *t.sin, "sin", c, "cos");
  if (s.ok()) s = kernels::check_same_shape(op, *t.sin, "sin", c, "cos");
  if (!s.ok()) return s;
  const bool table_shape_ok =
      (c.ndim == 2 && c.shape[0] == p.seq) ||
      (c.ndim == 3 && (c.shape[0] == p.batch || c.shape[0] == 1) && c.shape[1] == p.seq);
  if (!table_shape_ok) {
    return invalid(op, "cos shape " + kernels::dims_string(c) +
                           " must be [seq, rotary_dim / 2] or [batch or 1, seq, rotary_dim / 2]"
                           " with query's batch " +
                           std::to_string(p.batch) + " and seq " + std::to_string(p.seq));
  }
  p.half = c.shape[c.ndim - 1];
  if (2 * p.half > p.head_dim) {
    return invalid(op, "rotary_dim = 2 * cos.shape[-1] = " + std::to_string(2 * p.half) +
                           " exceeds head_dim " + std::to_string(p.head_dim));
  }
  s = kernels::check_written(op, q, "query");
  if (s.ok() && t.key) s = kernels::check_written(op, *t.key, "key");
  if (!s.ok()) return s;
  const DLTensor* tables[] = {t.cos, t.sin};
  const char* table_names[] = {"cos", "sin"};
  for (int i = 0; i < 2; ++i) {
    if (kernels::overlaps(q, *tables[i])) {
      return invalid(op, std::string("query overlaps ") + table_names[i]);
    }
    if (t.key && kernels::overlaps(*t.key, *tables[i])) {
      return invalid(op, std::string("key overlaps ") + table_names[i]);
    }
  }
  if (t.key && kernels::overlaps(q, *t.key)) {
    return invalid(op,
                   "query and key overlap; each is rotated in place and must be its own "
                   "buffer");
  }
  p.query = operand_of(q);
  if (t.key) p.key = operand_of(*t.key);
  p.cos = table_of(c);
  p.sin = table_of(*t.sin);
  *problem = p;
  return Status::Ok();
}

}  // namespace backplane::rotary
