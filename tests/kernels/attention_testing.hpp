// Test support for the attention kernels: host tensors behind DLTensor views, the case table
// shared by the eager and the LibTorch comparisons, and the error metric.
#pragma once

#include <dlpack/dlpack.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "attention/attention.hpp"
#include "cpu/problem.hpp"

namespace backplane::attention::testing {

using cpu::DType;

inline DLDataType dl_dtype(DType t) {
  switch (t) {
    case DType::kF32:
      return {kDLFloat, 32, 1};
    case DType::kBF16:
      return {kDLBfloat, 16, 1};
    case DType::kF16:
      return {kDLFloat, 16, 1};
  }
  return {};
}

inline const char* dtype_name(DType t) {
  return t == DType::kF32 ? "f32" : t == DType::kBF16 ? "bf16" : "f16";
}

inline float round_to(DType t, float x) {
  switch (t) {
    case DType::kF32:
      return x;
    case DType::kBF16:
      return cpu::bf16_to_f32(cpu::f32_to_bf16(x));
    case DType::kF16:
      return cpu::f16_to_f32(cpu::f32_to_f16(x));
  }
  return x;
}

// A tensor of logical shape [n0, n1, n2, n3] (or fewer dims) stored in its own buffer. With
// `permute` = {0, 2, 1, 3} the storage is [n0, n2, n1, n3] and the view is non-contiguous (the
// [batch, seq, heads, dim] layout of most models).
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(std::vector<int64_t> shape, DLDataType dtype, std::vector<int> permute = {})
      : shape_(std::move(shape)), dtype_(dtype) {
    const int nd = static_cast<int>(shape_.size());
    if (permute.empty())
      for (int i = 0; i < nd; ++i) permute.push_back(i);
    // storage dims in permute order, row-major; strides mapped back to logical dims
    strides_.assign(nd, 0);
    int64_t s = 1;
    for (int i = nd - 1; i >= 0; --i) {
      strides_[permute[i]] = s;
      s *= shape_[permute[i]];
    }
    numel_ = s;
    bytes_.assign(static_cast<size_t>(numel_ * element_size()) + 64, 0);
    view_.data = bytes_.data();
    view_.device = {kDLCPU, 0};
    view_.ndim = nd;
    view_.dtype = dtype_;
    view_.shape = shape_.data();
    view_.strides = strides_.data();
    view_.byte_offset = 0;
  }

  const DLTensor* dl() const { return &view_; }
  DLTensor* dl() { return &view_; }
  int64_t numel() const { return numel_; }
  const std::vector<int64_t>& shape() const { return shape_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  void* data() { return bytes_.data(); }
  int64_t element_size() const { return (dtype_.bits + 7) / 8; }

  // Offset in elements of the logical index.
  int64_t offset(const std::vector<int64_t>& idx) const {
    int64_t o = 0;
    for (size_t i = 0; i < idx.size(); ++i) o += idx[i] * strides_[i];
    return o;
  }

  float get(int64_t storage_index) const {
    const uint8_t* p = bytes_.data() + storage_index * element_size();
    if (dtype_.bits == 32) {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    uint16_t h;
    std::memcpy(&h, p, 2);
    return dtype_.code == kDLBfloat ? cpu::bf16_to_f32(h) : cpu::f16_to_f32(h);
  }
  void set(int64_t storage_index, float x) {
    uint8_t* p = bytes_.data() + storage_index * element_size();
    if (dtype_.bits == 32) {
      std::memcpy(p, &x, 4);
    } else if (dtype_.bits == 8) {
      *p = x != 0.0f ? 1 : 0;
    } else {
      const uint16_t h = dtype_.code == kDLBfloat ? cpu::f32_to_bf16(x) : cpu::f32_to_f16(x);
      std::memcpy(p, &h, 2);
    }
  }

  // Values in logical row-major order (as float).
  std::vector<float> logical() const {
    std::vector<float> out(static_cast<size_t>(numel_));
    std::vector<int64_t> idx(shape_.size(), 0);
    for (int64_t n = 0; n < numel_; ++n) {
      out[static_cast<size_t>(n)] = get(offset(idx));
      for (int i = static_cast<int>(idx.size()) - 1; i >= 0; --i) {
        if (++idx[i] < shape_[i]) break;
        idx[i] = 0;
      }
    }
    return out;
  }

  void fill_normal(std::mt19937& rng, float stddev = 1.0f) {
    std::normal_distribution<float> dist(0.0f, stddev);
    for (int64_t i = 0; i < numel_; ++i) set(i, dist(rng));
  }

 private:
  std::vector<int64_t> shape_, strides_;
  DLDataType dtype_{};
  int64_t numel_ = 0;
  std::vector<uint8_t> bytes_;
  DLTensor view_{};
};

enum class MaskType { kNone, kBool, kAdditive };

struct Case {
  std::string name;
  int64_t batch, heads_q, heads_kv, seq_q, seq_k, head_dim;
  bool causal;
  DType dtype;
  MaskType mask = MaskType::kNone;
  std::vector<int64_t> mask_shape = {};  // default [batch, heads_q, seq_q, seq_k]
  bool transposed = false;               // q, k, v, out as [b, s, h, d] storage
  int64_t head_dim_v = 0;                // 0: head_dim
  DType mask_dtype = DType::kF32;        // additive masks
};

// Test names show the case's name rather than its bytes.
inline void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

// The shared table: every head_dim (64, 72, 80, 96, 128, 256) and seq length (1, 7, 64, 127,
// 1024, 4097) appears; causal and not; seq_q != seq_k both ways; GQA 32/8 and MQA; bool and
// additive masks; the three dtypes; [b, s, h, d] views; a value head_dim that differs.
inline std::vector<Case> case_table() {
  const auto f32 = DType::kF32, bf16 = DType::kBF16, f16 = DType::kF16;
  std::vector<Case> t = {
      {"d64_s1", 2, 4, 4, 1, 1, 64, false, f32},
      {"d80_s7_causal", 1, 4, 4, 7, 7, 80, true, f32},
      {"d96_s64_causal_boolmask", 1, 2, 2, 64, 64, 96, true, f32, MaskType::kBool},
      {"d128_s127_causal_mqa", 2, 4, 1, 127, 127, 128, true, f32},
      {"d256_s1024_addmask_broadcast",
       1,
       2,
       2,
       1024,
       1024,
       256,
       false,
       f32,
       MaskType::kAdditive,
       {1024, 1024}},
      {"d64_s4097_causal", 1, 1, 1, 4097, 4097, 64, true, f32},
      {"d128_gqa32x8_q7_k1024_causal", 1, 32, 8, 7, 1024, 128, true, f32},
      {"d128_gqa32x8_decode_k4097", 1, 32, 8, 1, 4097, 128, false, f32},
      {"d80_mqa_decode_k4097_splitkv", 1, 8, 1, 1, 4097, 80, true, f32},
      {"d80_q127_k64_causal_emptyrows", 1, 4, 2, 127, 64, 80, true, f32},
      {"d96_q64_k1024_keypadding_bool",
       2,
       4,
       2,
       64,
       1024,
       96,
       false,
       f32,
       MaskType::kBool,
       {2, 1, 1, 1024}},
      {"d128_s127_transposed_causal", 2, 4, 2, 127, 127, 128, true, f32, MaskType::kNone, {}, true},
      {"d64_q7_k127_dv96", 1, 2, 2, 7, 127, 64, false, f32, MaskType::kNone, {}, false, 96},
      // Long heads: K/V panels in a window of one block; 16 rows of one kv head: split-KV.
      {"d256_q64_k4097_causal_window", 1, 2, 1, 64, 4097, 256, true, f32},
      {"d128_mqa16_k4097_splitkv", 1, 16, 1, 1, 4097, 128, false, f32},
      {"d1_dv130_odd_sizes", 1, 3, 1, 21, 50, 1, true, f32, MaskType::kNone, {}, false, 130},
      // K tiles transposed 16 columns at a time, then the rest one by one; a partial last tile.
      {"d72_s45_causal_gqa", 1, 4, 2, 45, 45, 72, true, f32},
      // Decoding with 1 and 2 query rows per kv head: P.V in chunks wider than the tiles'.
      {"d128_mha_decode_k777", 1, 2, 2, 1, 777, 128, true, f32},
      {"d256_gqa4x2_decode_k300", 2, 4, 2, 1, 300, 256, false, f32},
      {"bf16_d128_s1024_causal_gqa", 1, 8, 2, 1024, 1024, 128, true, bf16},
      {"bf16_d64_s127_boolmask", 1, 4, 4, 127, 127, 64, false, bf16, MaskType::kBool},
      {"bf16_d80_s64_transposed", 2, 2, 2, 64, 64, 80, true, bf16, MaskType::kNone, {}, true},
      {"bf16_d256_q1_k4097_mqa", 1, 4, 1, 1, 4097, 256, false, bf16},
      {"bf16_d128_gqa4x2_decode_k500", 1, 4, 2, 1, 500, 128, false, bf16},
      {"bf16_d96_s7_addmask_bf16",
       1,
       2,
       1,
       7,
       7,
       96,
       true,
       bf16,
       MaskType::kAdditive,
       {},
       false,
       0,
       bf16},
      {"f16_d96_q64_k127_causal", 1, 4, 1, 64, 127, 96, true, f16},
      {"f16_d256_decode_k4097", 1, 2, 2, 1, 4097, 256, false, f16},
      {"f16_d128_s1024_addmask_f16",
       1,
       2,
       2,
       1024,
       1024,
       128,
       true,
       f16,
       MaskType::kAdditive,
       {1, 1, 1024, 1024},
       false,
       0,
       f16},
      {"f16_d64_s127_transposed", 1, 4, 2, 127, 127, 64, false, f16, MaskType::kNone, {}, true},
  };
  return t;
}

// Inputs and outputs of one case; values drawn from N(0, 1) (Q scaled so the softmax is
// neither flat nor one-hot), rounded to the case's dtype.
struct Instance {
  Case c;
  HostTensor q, k, v, mask, out;
  bool has_mask = false;

  explicit Instance(const Case& cs, uint32_t seed = 1234) : c(cs) {
    std::mt19937 rng(seed);
    const DLDataType dt = dl_dtype(c.dtype);
    const int64_t dv = c.head_dim_v ? c.head_dim_v : c.head_dim;
    std::vector<int> perm;
    if (c.transposed) perm = {0, 2, 1, 3};
    q = HostTensor({c.batch, c.heads_q, c.seq_q, c.head_dim}, dt, perm);
    k = HostTensor({c.batch, c.heads_kv, c.seq_k, c.head_dim}, dt, perm);
    v = HostTensor({c.batch, c.heads_kv, c.seq_k, dv}, dt, perm);
    out = HostTensor({c.batch, c.heads_q, c.seq_q, dv}, dt, perm);
    q.fill_normal(rng, 1.5f);
    k.fill_normal(rng);
    v.fill_normal(rng);
    if (c.mask != MaskType::kNone) {
      has_mask = true;
      std::vector<int64_t> ms = c.mask_shape;
      if (ms.empty()) ms = {c.batch, c.heads_q, c.seq_q, c.seq_k};
      const DLDataType mdt =
          c.mask == MaskType::kBool ? DLDataType{6 /* kDLBool */, 8, 1} : dl_dtype(c.mask_dtype);
      mask = HostTensor(ms, mdt);
      std::uniform_real_distribution<float> u(0.0f, 1.0f);
      for (int64_t i = 0; i < mask.numel(); ++i) {
        const float x = u(rng);
        if (c.mask == MaskType::kBool) {
          mask.set(i, x < 0.8f ? 1.0f : 0.0f);  // 20% masked; some rows fully masked by chance
        } else {
          mask.set(i, x < 0.1f ? -INFINITY : (x - 0.5f) * 4.0f);
        }
      }
    }
  }

  Tensors tensors() const {
    Tensors t;
    t.query = q.dl();
    t.key = k.dl();
    t.value = v.dl();
    t.mask = has_mask ? mask.dl() : nullptr;
    t.output = out.dl();
    return t;
  }
  Options options(Implementation impl) const {
    Options o;
    o.causal = c.causal;
    o.implementation = impl;
    return o;
  }
};

// The forward with its logsumexp, the output's gradient and the three gradients of one case.
struct Training {
  Instance in;
  HostTensor lse, dout, dq, dk, dv;

  explicit Training(const Case& c) : in(c) {
    lse = HostTensor({c.batch, c.heads_q, c.seq_q}, {kDLFloat, 32, 1});
    std::vector<int> perm;
    if (c.transposed) perm = {0, 2, 1, 3};
    const DLDataType dt = dl_dtype(c.dtype);
    dout = HostTensor(in.out.shape(), dt, perm);
    dq = HostTensor(in.q.shape(), dt, perm);
    dk = HostTensor(in.k.shape(), dt, perm);
    dv = HostTensor(in.v.shape(), dt, perm);
    std::mt19937 rng(99);
    dout.fill_normal(rng);
  }
  Tensors forward_tensors() {
    Tensors t = in.tensors();
    t.logsumexp = lse.dl();
    return t;
  }
  BackwardTensors backward_tensors() {
    BackwardTensors t;
    t.query = in.q.dl();
    t.key = in.k.dl();
    t.value = in.v.dl();
    t.mask = in.has_mask ? in.mask.dl() : nullptr;
    t.output = in.out.dl();
    t.logsumexp = lse.dl();
    t.grad_output = dout.dl();
    t.grad_query = dq.dl();
    t.grad_key = dk.dl();
    t.grad_value = dv.dl();
    return t;
  }
  Status run(Implementation impl = Implementation::kSdpa, RunInfo* info = nullptr) {
    Status s = forward(forward_tensors(), in.options(impl));
    if (!s.ok()) return s;
    return backward(backward_tensors(), in.options(impl), info);
  }
};

// The backward's reference in float64, straight from the definition, on the case's (rounded)
// inputs: S = scale Q K^T + mask (causal bottom-right), P = softmax(S), and the gradients for
// an output gradient `dout`; the logsumexp too. All in logical row-major order.
struct Gradients {
  std::vector<double> lse, dq, dk, dv;
};
inline Gradients reference_backward(const Instance& in, const HostTensor& dout) {
  const Case& c = in.c;
  cpu::Problem p;
  Options o = in.options(Implementation::kEager);
  (void)cpu::make_problem(in.tensors(), o, &p);
  const int64_t B = c.batch, HQ = c.heads_q, HK = c.heads_kv, SQ = c.seq_q, SK = c.seq_k;
  const int64_t D = c.head_dim, DV = c.head_dim_v ? c.head_dim_v : c.head_dim, G = HQ / HK;
  const std::vector<float> q = in.q.logical(), k = in.k.logical(), v = in.v.logical();
  const std::vector<float> go = dout.logical();
  Gradients g;
  g.lse.assign(static_cast<size_t>(B * HQ * SQ), 0.0);
  g.dq.assign(q.size(), 0.0);
  g.dk.assign(k.size(), 0.0);
  g.dv.assign(v.size(), 0.0);
  const double scale = p.scale;
  std::vector<double> prob(static_cast<size_t>(SK)), dprob(static_cast<size_t>(SK));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < HQ; ++h)
      for (int64_t i = 0; i < SQ; ++i) {
        const int64_t hk = h / G;
        const size_t qrow = static_cast<size_t>(((b * HQ + h) * SQ + i) * D);
        const size_t orow = static_cast<size_t>(((b * HQ + h) * SQ + i) * DV);
        const size_t kbase = static_cast<size_t>((b * HK + hk) * SK * D);
        const size_t vbase = static_cast<size_t>((b * HK + hk) * SK * DV);
        double mx = -INFINITY;
        for (int64_t j = 0; j < SK; ++j) {
          double s = 0.0;
          for (int64_t e = 0; e < D; ++e) s += double(q[qrow + e]) * k[kbase + j * D + e];
          s = s * scale + (in.has_mask ? cpu::mask_bias(p, b, h, i, j) : 0.0f);
          if (c.causal && j > i + SK - SQ) s = -INFINITY;
          prob[j] = s;
          mx = std::max(mx, s);
        }
        double& lse = g.lse[static_cast<size_t>((b * HQ + h) * SQ + i)];
        if (mx == -INFINITY) {
          lse = -INFINITY;
          continue;  // no key: zero gradients
        }
        double sum = 0.0;
        for (int64_t j = 0; j < SK; ++j) sum += std::exp(prob[j] - mx);
        lse = mx + std::log(sum);
        double delta = 0.0;
        for (int64_t j = 0; j < SK; ++j) {
          prob[j] = std::exp(prob[j] - lse);
          double dp = 0.0;
          for (int64_t e = 0; e < DV; ++e) dp += double(go[orow + e]) * v[vbase + j * DV + e];
          dprob[j] = dp;
          delta += prob[j] * dp;
        }
        for (int64_t j = 0; j < SK; ++j) {
          const double ds = prob[j] * (dprob[j] - delta) * scale;
          for (int64_t e = 0; e < DV; ++e) g.dv[vbase + j * DV + e] += prob[j] * go[orow + e];
          for (int64_t e = 0; e < D; ++e) {
            g.dq[qrow + e] += ds * k[kbase + j * D + e];
            g.dk[kbase + j * D + e] += ds * q[qrow + e];
          }
        }
      }
  return g;
}

// Normwise relative error: max |a - b| / max |b| (b the reference); both in logical order.
inline double rel_error(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, ref = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    if (!(d <= diff)) diff = d;  // NaN propagates
    ref = std::max(ref, std::fabs(static_cast<double>(b[i])));
  }
  return ref > 0.0 ? diff / ref : diff;
}

inline double rel_error(const std::vector<float>& a, const std::vector<double>& b) {
  double diff = 0.0, ref = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    if (!(d <= diff)) diff = d;  // NaN propagates
    ref = std::max(ref, std::fabs(b[i]));
  }
  return ref > 0.0 ? diff / ref : diff;
}

// The documented tolerances (normwise relative, see kernels/attention/README.md).
inline double tolerance(DType t) {
  switch (t) {
    case DType::kF32:
      return 1e-5;
    case DType::kBF16:
      return 1.6e-2;
    case DType::kF16:
      return 2e-3;
  }
  return 0.0;
}

}  // namespace backplane::attention::testing
