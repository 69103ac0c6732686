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

Status check_logsumexp(const DLTensor* lse, const char* name, const DLTensor& query,
                       kernels::Memory memory, const CheckedCall& call, StridedView* view) {
  if (Status s = kernels::check_placement(kOp, lse, name, memory); !s.ok()) return s;
  if (Status s = check_device(*lse, name, query, memory); !s.ok()) return s;
  const int64_t want[3] = {call.batch, call.heads_q, call.seq_q};
  const std::string layout = "[batch, heads_q, seq_q] = [" + std::to_string(want[0]) + ", " +
                             std::to_string(want[1]) + ", " + std::to_string(want[2]) + "]";
  if (lse->ndim != 3) {
    return error(std::string(name) + " must have 3 dims " + layout + ", got " +
                 std::to_string(lse->ndim) + " dims");
  }
  if (Status s = kernels::check_layout(kOp, *lse, name, 3); !s.ok()) return s;
  for (int i = 0; i < 3; ++i) {
    if (lse->shape[i] != want[i]) {
      return error(std::string(name) + " shape " + dims_string(*lse) + " must be " + layout);
    }
  }
  const DLDataType t = lse->dtype;
  if (t.code != kDLFloat || t.bits != 32 || t.lanes != 1) {
    return error(std::string(name) + " has dtype " + dtype_string(t) +
                 "; it must be float32 whatever the query's dtype");
  }
  if (Status s = kernels::check_data(kOp, *lse, name); !s.ok()) return s;
  view->data = base_of(*lse);
  for (int d = 0; d < 3; ++d) view->stride[d] = stride_of(*lse, d);
  view->stride[3] = 0;
  return Status::Ok();
}

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
  if (tensors.logsumexp) {  // written, like the output
    const DLTensor& lse = *tensors.logsumexp;
    if (Status s = check_logsumexp(&lse, "logsumexp", q, memory, c, &c.lse); !s.ok()) return s;
    if (Status s = kernels::check_written(kOp, lse, "logsumexp"); !s.ok()) return s;
    const DLTensor* others[] = {tensors.query, tensors.key, tensors.value, tensors.output,
                                tensors.mask};
    const char* other_names[] = {"query", "key", "value", "output", "mask"};
    for (int i = 0; i < 5; ++i) {
      if (others[i] && overlaps(lse, *others[i])) {
        return error(std::string("logsumexp overlaps ") + other_names[i] +
                     " in memory; write it to a separate buffer");
      }
    }
  }
  *call = c;
  return Status::Ok();
}

}  // namespace backplane::attention

namespace backplane::attention {
namespace {

constexpr const char* kBackwardOp = "attention_backward";

}  // namespace

Status backward_status(Status s) {
  const std::string prefix = std::string(kOp) + ": ";
  if (!s.ok() && s.message.compare(0, prefix.size(), prefix) == 0) {
    s.message = std::string(kBackwardOp) + ": " + s.message.substr(prefix.size());
  }
  return s;
}

namespace {

// A gradient (or the output's gradient) shaped and typed like its operand.
Status check_gradient(const DLTensor* g, const char* name, const DLTensor& like,
                      const char* like_name, const char* layout, kernels::Memory memory,
                      bool written) {
  if (Status s = check_operand(g, name, layout, memory); !s.ok()) return s;
  if (Status s = check_device(*g, name, like, memory); !s.ok()) return s;
  if (!kernels::same_dtype(g->dtype, like.dtype)) {
    return error(std::string(name) + " has dtype " + dtype_string(g->dtype) + " but " + like_name +
                 " has " + dtype_string(like.dtype) + "; a gradient has its operand's dtype");
  }
  if (Status s = kernels::check_data(kOp, *g, name); !s.ok()) return s;
  for (int i = 0; i < 4; ++i) {
    if (g->shape[i] != like.shape[i]) {
      return error(std::string(name) + " shape " + dims_string(*g) + " must equal " + like_name +
                   "'s " + dims_string(like));
    }
  }
  if (written) return kernels::check_written(kOp, *g, name);
  return Status::Ok();
}

}  // namespace

Status check_backward_call(const BackwardTensors& tensors, std::optional<double> scale,
                           kernels::Memory memory, CheckedBackward* checked) {
  Tensors fwd;
  fwd.query = tensors.query;
  fwd.key = tensors.key;
  fwd.value = tensors.value;
  fwd.mask = tensors.mask;
  fwd.output = tensors.output;
  CheckedBackward c;
  if (Status s = check_call(fwd, scale, memory, &c.call); !s.ok()) return backward_status(s);
  const DLTensor& q = *tensors.query;
  if (!tensors.logsumexp) {
    return kernels::invalid(
        kBackwardOp,
        "logsumexp is NULL; pass the logsumexp the forward wrote "
        "(Tensors::logsumexp): the backward recomputes the probabilities from it");
  }
  if (Status s = check_logsumexp(tensors.logsumexp, "logsumexp", q, memory, c.call, &c.call.lse);
      !s.ok()) {
    return backward_status(s);
  }
  struct Gradient {
    const DLTensor* t;
    const char* name;
    const DLTensor* like;
    const char* like_name;
    const char* layout;
    StridedView* view;
  } grads[] = {
      {tensors.grad_output, "grad_output", tensors.output, "output",
       "[batch, heads_q, seq_q, head_dim_v]", &c.grad_out},
      {tensors.grad_query, "grad_query", tensors.query, "query",
       "[batch, heads_q, seq_q, head_dim]", &c.grad_q},
      {tensors.grad_key, "grad_key", tensors.key, "key", "[batch, heads_kv, seq_k, head_dim]",
       &c.grad_k},
      {tensors.grad_value, "grad_value", tensors.value, "value",
       "[batch, heads_kv, seq_k, head_dim_v]", &c.grad_v},
  };
  for (int i = 0; i < 4; ++i) {
    const Gradient& g = grads[i];
    const bool written = i > 0;
    Status s = check_gradient(g.t, g.name, *g.like, g.like_name, g.layout, memory, written);
    if (!s.ok()) return backward_status(s);
    *g.view = view_of(*g.t);
  }
  // What the backward writes overlaps nothing it reads and no other gradient.
  const DLTensor* read[] = {tensors.query,  tensors.key,       tensors.value,      tensors.mask,
                            tensors.output, tensors.logsumexp, tensors.grad_output};
  const char* read_names[] = {"query",  "key",       "value",      "mask",
                              "output", "logsumexp", "grad_output"};
  for (int i = 1; i < 4; ++i) {
    const DLTensor& w = *grads[i].t;
    for (int r = 0; r < 7; ++r) {
      if (read[r] && overlaps(w, *read[r])) {
        return kernels::invalid(kBackwardOp,
                                std::string(grads[i].name) + " overlaps " + read_names[r] +
                                    " in memory; write each gradient to its own buffer");
      }
    }
    for (int o = 1; o < i; ++o) {
      if (overlaps(w, *grads[o].t)) {
        return kernels::invalid(kBackwardOp,
                                std::string(grads[i].name) + " overlaps " + grads[o].name +
                                    " in memory; write each gradient to its own buffer");
      }
    }
  }
  *checked = c;
  return Status::Ok();
}

}  // namespace backplane::attention
