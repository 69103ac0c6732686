// Kernel checks of the conformance suite: every attention_forward kernel a plugin registers runs
// within its declared requirements (dtypes, head sizes) and gives the right answer, and refuses
// bad calls with an error status, writing nothing, instead of crashing; where the plugin also
// registers the implementation's attention_backward (ABI 1.6), its forward's logsumexp and the
// backward's gradients are right too.
#include "host_tensor.hpp"

#include <backplane/conformance.hpp>
#include <backplane/error.hpp>
#include <backplane/runtime/device_info.hpp>
#include <backplane/runtime/kernels.hpp>
#include <backplane/runtime/runtime.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace backplane::conformance {

void link_kernel_checks() {}

namespace {

// Where a device's tensors live, for DLPack, and whether they are host memory the suite can
// make (the cpu, and devices of types without a DLPack code that share the host's memory).
// DLPack 0.7 added kDLOneAPI (14); Debian's header (0.6) does not name it.
constexpr auto kDLOneApiDevice = static_cast<DLDeviceType>(14);

struct TensorPlace {
  DLDeviceType type;
  bool host_memory;
};

std::optional<TensorPlace> tensor_place(const DeviceInfo& d) {
  const std::string& type = d.device.type();
  if (type == "cpu") return TensorPlace{kDLCPU, true};
  if (type == "cuda") return TensorPlace{d.plugin == "rocm" ? kDLROCM : kDLCUDA, false};
  if (type == "rocm") return TensorPlace{kDLROCM, false};
  if (type == "xpu") return TensorPlace{kDLOneApiDevice, false};
  if (type == "mps") return TensorPlace{kDLMetal, false};
  if (d.has(kCapUnifiedMemory)) return TensorPlace{kDLCPU, true};
  return std::nullopt;
}

// A kernel with each device it can run on (the host's own check, kernel_mismatch).
struct Target {
  KernelInfo kernel;
  DeviceInfo device;
  TensorPlace place;
};

std::vector<Target> attention_targets(const Runtime& rt, std::vector<std::string>* skipped) {
  std::vector<Target> out;
  for (const KernelInfo& k : rt.kernels()) {
    if (k.op != kAttentionForward) continue;
    for (const DeviceInfo& d : rt.devices(k.device_type)) {
      if (!kernel_mismatch(k, d).empty()) continue;
      const std::optional<TensorPlace> place = tensor_place(d);
      if (!place) {
        skipped->push_back(k.implementation + " on " + d.device.str() +
                           ": no DLPack device known for its tensors");
        continue;
      }
      out.push_back({k, d, *place});
    }
  }
  return out;
}

struct Shape {
  const char* name;
  int64_t batch, heads_q, heads_kv, seq_q, seq_k, head_dim;
  bool causal;
  bool mask;
};

// The tensors of one call; `data` false leaves them as placeholders on a device the suite
// cannot reach (invalid calls only: the kernel must refuse them before touching memory).
struct Call {
  Call(const Shape& s, DLDataType dtype, DLDevice device)
      : q({s.batch, s.heads_q, s.seq_q, s.head_dim}, dtype, device),
        k({s.batch, s.heads_kv, s.seq_k, s.head_dim}, dtype, device),
        v({s.batch, s.heads_kv, s.seq_k, s.head_dim}, dtype, device),
        out({s.batch, s.heads_q, s.seq_q, s.head_dim}, dtype, device),
        mask({s.batch, 1, s.seq_q, s.seq_k}, DLDataType{kDLUInt, 8, 1}, device) {
    mask.dl().dtype.code = 6;  // kDLBool (DLPack 0.8; older headers do not name it)
    q.fill_random(1);
    k.fill_random(2);
    v.fill_random(3);
    for (int64_t i = 0; i < out.size(); ++i) out.set(i, 42.0f);  // a sentinel
    const int64_t sk = s.seq_k;
    for (int64_t i = 0; i < mask.size(); ++i) {
      reinterpret_cast<uint8_t*>(mask.dl().data)[i] = (i % sk) % 3 != 1 || i % sk == 0;
    }
    args.struct_size = sizeof args;
    args.query = q.get();
    args.key = k.get();
    args.value = v.get();
    args.mask = s.mask ? mask.get() : nullptr;
    args.output = out.get();
    args.causal = s.causal ? 1 : 0;
    args.scale = 0;
  }
  HostTensor q, k, v, out, mask;
  bp_attention_args args{};
};

// softmax(q k^T / sqrt(d) + mask) v in double, from the values as stored.
std::vector<double> reference(const Shape& s, const Call& c) {
  std::vector<double> out(static_cast<size_t>(c.out.size()), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  const uint8_t* m = reinterpret_cast<const uint8_t*>(c.mask.get()->data);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads_q; ++h) {
      const int64_t hk = h / (s.heads_q / s.heads_kv);
      for (int64_t i = 0; i < s.seq_q; ++i) {
        std::vector<double> w(static_cast<size_t>(s.seq_k), 0.0);
        double max_score = -INFINITY;
        for (int64_t j = 0; j < s.seq_k; ++j) {
          bool keep = !s.causal || j <= i + (s.seq_k - s.seq_q);
          if (s.mask) keep = keep && m[(b * s.seq_q + i) * s.seq_k + j] != 0;
          if (!keep) {
            w[static_cast<size_t>(j)] = -INFINITY;
            continue;
          }
          double dot = 0;
          for (int64_t d = 0; d < s.head_dim; ++d) {
            dot +=
                static_cast<double>(c.q.get(((b * s.heads_q + h) * s.seq_q + i) * s.head_dim + d)) *
                c.k.get(((b * s.heads_kv + hk) * s.seq_k + j) * s.head_dim + d);
          }
          w[static_cast<size_t>(j)] = dot * scale;
          max_score = std::max(max_score, dot * scale);
        }
        double total = 0;
        for (double& x : w) total += (x = std::exp(x - max_score));
        for (int64_t j = 0; j < s.seq_k; ++j) {
          for (int64_t d = 0; d < s.head_dim; ++d) {
            out[static_cast<size_t>(((b * s.heads_q + h) * s.seq_q + i) * s.head_dim + d)] +=
                w[static_cast<size_t>(j)] / total *
                c.v.get(((b * s.heads_kv + hk) * s.seq_k + j) * s.head_dim + d);
          }
        }
      }
    }
  }
  return out;
}

double tolerance(const std::string& dtype) {
  return dtype == "float32" || dtype == "float64" ? 1e-4 : 2e-2;
}

// Skips the test, saying why, when the plugin has no kernel the suite can call: a plugin without
// kernels has nothing to pass here, and must not look as if it had.
std::vector<Target> targets_or_skip(const Runtime& rt, std::vector<std::string>* skipped,
                                    bool* skip) {
  std::vector<Target> targets = attention_targets(rt, skipped);
  *skip = targets.empty();
  return targets;
}

std::string skip_reason(const std::vector<std::string>& skipped) {
  std::string out = "no attention_forward kernel of this plugin can be called here";
  for (const std::string& s : skipped) out += "; " + s;
  return out;
}

}  // namespace

TEST_P(PluginConformance, KernelsRunWithinTheirRequirements) {
  const Runtime rt = open();
  std::vector<std::string> skipped;
  bool skip = false;
  const std::vector<Target> targets = targets_or_skip(rt, &skipped, &skip);
  if (skip) GTEST_SKIP() << skip_reason(skipped);
  for (const Target& t : targets) {
    if (!t.place.host_memory) {
      skipped.push_back(t.kernel.implementation + " on " + t.device.device.str() +
                        ": its tensors are not in host memory");
      continue;
    }
    AttentionKernel kernel = rt.attention_kernel(t.device.device, t.kernel.implementation);
    const int64_t widest = t.kernel.max_head_dim > 0 ? std::min(t.kernel.max_head_dim, 256) : 256;
    const Shape shapes[] = {
        {"plain", 1, 2, 2, 3, 5, 8, false, false},
        {"causal_grouped_query", 2, 4, 2, 2, 6, 16, true, false},
        {"bool_mask", 1, 2, 1, 4, 4, 8, false, true},
        {"widest_head", 1, 1, 1, 2, 3, widest, false, false},
    };
    std::vector<std::string> dtypes = t.kernel.dtypes;
    if (dtypes.empty()) dtypes = {"float32"};
    for (const std::string& dtype : dtypes) {
      const std::optional<DLDataType> dl = dlpack_dtype(dtype);
      if (!dl) {
        skipped.push_back(t.kernel.implementation + ": dtype " + dtype + " not known to the suite");
        continue;
      }
      for (const Shape& s : shapes) {
        SCOPED_TRACE(t.kernel.implementation + " on " + t.device.device.str() + ", " + dtype +
                     ", " + s.name);
        Call call(s, *dl, DLDevice{t.place.type, *t.device.device.index()});
        ASSERT_NO_THROW(kernel(call.args));
        const std::vector<double> want = reference(s, call);
        double worst = 0;
        for (int64_t i = 0; i < call.out.size(); ++i) {
          worst = std::max(worst, std::fabs(call.out.get(i) - want[static_cast<size_t>(i)]));
        }
        EXPECT_LE(worst, tolerance(dtype)) << "largest difference from the reference";
      }
    }
  }
  for (const std::string& s : skipped) std::cout << "[ note ] not run: " << s << "\n";
}

// The logsumexp and the gradients of a backward call in double, from the values as stored:
// P = softmax(S), dV = P^T dO, dS = P (dO V^T - rowsum(dO O)), dQ = scale dS K, dK = scale dS^T Q.
struct Gradients {
  std::vector<double> lse, dq, dk, dv;
};
Gradients reference_backward(const Shape& s, const Call& c, const HostTensor& dout) {
  Gradients g;
  g.lse.assign(static_cast<size_t>(s.batch * s.heads_q * s.seq_q), 0.0);
  g.dq.assign(static_cast<size_t>(c.q.size()), 0.0);
  g.dk.assign(static_cast<size_t>(c.k.size()), 0.0);
  g.dv.assign(static_cast<size_t>(c.v.size()), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.head_dim));
  const uint8_t* m = reinterpret_cast<const uint8_t*>(c.mask.get()->data);
  const int64_t d = s.head_dim;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads_q; ++h) {
      const int64_t hk = h / (s.heads_q / s.heads_kv);
      for (int64_t i = 0; i < s.seq_q; ++i) {
        const int64_t row = (b * s.heads_q + h) * s.seq_q + i;
        std::vector<double> p(static_cast<size_t>(s.seq_k), -INFINITY);
        double top = -INFINITY;
        for (int64_t j = 0; j < s.seq_k; ++j) {
          bool keep = !s.causal || j <= i + (s.seq_k - s.seq_q);
          if (s.mask) keep = keep && m[(b * s.seq_q + i) * s.seq_k + j] != 0;
          if (!keep) continue;
          double dot = 0;
          for (int64_t e = 0; e < d; ++e) {
            dot += static_cast<double>(c.q.get(row * d + e)) *
                   c.k.get(((b * s.heads_kv + hk) * s.seq_k + j) * d + e);
          }
          p[static_cast<size_t>(j)] = dot * scale;
          top = std::max(top, dot * scale);
        }
        if (top == -INFINITY) {
          g.lse[static_cast<size_t>(row)] = -INFINITY;
          continue;
        }
        double total = 0;
        for (double x : p) total += std::exp(x - top);
        const double lse = top + std::log(total);
        g.lse[static_cast<size_t>(row)] = lse;
        std::vector<double> dp(static_cast<size_t>(s.seq_k), 0.0);
        double delta = 0;
        for (int64_t j = 0; j < s.seq_k; ++j) {
          double& pj = p[static_cast<size_t>(j)];
          pj = std::exp(pj - lse);
          for (int64_t e = 0; e < d; ++e) {
            dp[static_cast<size_t>(j)] += static_cast<double>(dout.get(row * d + e)) *
                                          c.v.get(((b * s.heads_kv + hk) * s.seq_k + j) * d + e);
          }
          delta += pj * dp[static_cast<size_t>(j)];
        }
        for (int64_t j = 0; j < s.seq_k; ++j) {
          const double pj = p[static_cast<size_t>(j)];
          const double ds = pj * (dp[static_cast<size_t>(j)] - delta) * scale;
          const int64_t kv = ((b * s.heads_kv + hk) * s.seq_k + j) * d;
          for (int64_t e = 0; e < d; ++e) {
            g.dv[static_cast<size_t>(kv + e)] += pj * dout.get(row * d + e);
            g.dq[static_cast<size_t>(row * d + e)] += ds * c.k.get(kv + e);
            g.dk[static_cast<size_t>(kv + e)] += ds * c.q.get(row * d + e);
          }
        }
      }
    }
  }
  return g;
}

// max |got - want| over the elements.
double worst_difference(const HostTensor& got, const std::vector<double>& want) {
  double worst = 0;
  for (int64_t i = 0; i < got.size(); ++i) {
    worst = std::max(worst, std::fabs(got.get(i) - want[static_cast<size_t>(i)]));
  }
  return worst;
}

TEST_P(PluginConformance, BackwardKernelsGiveTheGradients) {
  const Runtime rt = open();
  std::vector<std::string> skipped;
  bool skip = false;
  const std::vector<Target> targets = targets_or_skip(rt, &skipped, &skip);
  if (skip) GTEST_SKIP() << skip_reason(skipped);
  bool ran = false;
  for (const Target& t : targets) {
    const AttentionKernel kernel = rt.attention_kernel(t.device.device, t.kernel.implementation);
    if (!kernel.has_backward() || !t.place.host_memory) continue;
    const Shape shapes[] = {
        {"plain", 1, 2, 2, 3, 5, 8, false, false},
        {"causal_grouped_query", 2, 4, 2, 2, 6, 16, true, false},
        {"bool_mask", 1, 2, 1, 4, 4, 8, false, true},
    };
    std::vector<std::string> dtypes = t.kernel.dtypes;
    if (dtypes.empty()) dtypes = {"float32"};
    for (const std::string& dtype : dtypes) {
      const std::optional<DLDataType> dl = dlpack_dtype(dtype);
      if (!dl) continue;
      for (const Shape& s : shapes) {
        SCOPED_TRACE(t.kernel.implementation + " on " + t.device.device.str() + ", " + dtype +
                     ", " + s.name + " (backward)");
        const DLDevice device{t.place.type, *t.device.device.index()};
        Call call(s, *dl, device);
        HostTensor lse({s.batch, s.heads_q, s.seq_q}, DLDataType{kDLFloat, 32, 1}, device);
        HostTensor dout({s.batch, s.heads_q, s.seq_q, s.head_dim}, *dl, device);
        HostTensor dq({s.batch, s.heads_q, s.seq_q, s.head_dim}, *dl, device);
        HostTensor dk({s.batch, s.heads_kv, s.seq_k, s.head_dim}, *dl, device);
        HostTensor dv({s.batch, s.heads_kv, s.seq_k, s.head_dim}, *dl, device);
        dout.fill_random(4);
        AttentionArguments fwd;
        fwd.query = call.q.get(), fwd.key = call.k.get(), fwd.value = call.v.get();
        fwd.mask = call.args.mask, fwd.output = call.out.get(), fwd.logsumexp = lse.get();
        fwd.causal = s.causal;
        ASSERT_NO_THROW(kernel(fwd));
        AttentionBackwardArguments bwd;
        bwd.query = fwd.query, bwd.key = fwd.key, bwd.value = fwd.value, bwd.mask = fwd.mask;
        bwd.output = fwd.output, bwd.logsumexp = lse.get(), bwd.grad_output = dout.get();
        bwd.grad_query = dq.get(), bwd.grad_key = dk.get(), bwd.grad_value = dv.get();
        bwd.causal = s.causal;
        ASSERT_NO_THROW(kernel.backward(bwd));
        const Gradients want = reference_backward(s, call, dout);
        EXPECT_LE(worst_difference(lse, want.lse), 1e-4) << "logsumexp";
        EXPECT_LE(worst_difference(dq, want.dq), tolerance(dtype)) << "grad_query";
        EXPECT_LE(worst_difference(dk, want.dk), tolerance(dtype)) << "grad_key";
        EXPECT_LE(worst_difference(dv, want.dv), tolerance(dtype)) << "grad_value";
        ran = true;
      }
    }
  }
  if (!ran) GTEST_SKIP() << "no attention kernel of this plugin has a backward callable here";
}

TEST_P(PluginConformance, KernelsRefuseBadTensorsWithErrors) {
  const Runtime rt = open();
  std::vector<std::string> skipped;
  bool skip = false;
  const std::vector<Target> targets = targets_or_skip(rt, &skipped, &skip);
  if (skip) GTEST_SKIP() << skip_reason(skipped);
  const Shape s{"bad", 1, 2, 2, 3, 4, 8, false, false};
  for (const Target& t : targets) {
    const AttentionKernel kernel = rt.attention_kernel(t.device.device, t.kernel.implementation);
    const std::string first = t.kernel.dtypes.empty() ? "float32" : t.kernel.dtypes[0];
    const DLDataType dtype = dlpack_dtype(first).value_or(DLDataType{kDLFloat, 32, 1});
    const DLDevice device{t.place.type, *t.device.device.index()};
    const DLDeviceType elsewhere = t.place.type == kDLCPU ? kDLCUDA : kDLCPU;
    const bool any_dtype = t.kernel.dtypes.empty() ||
                           std::find(t.kernel.dtypes.begin(), t.kernel.dtypes.end(), "float64") !=
                               t.kernel.dtypes.end();
    std::vector<int64_t> three_dims = {2, 3, 8};
    std::vector<int64_t> wrong_dim = {1, 2, 4, 16};
    std::vector<int64_t> wrong_seq = {1, 2, 5, 8};
    std::vector<int64_t> wrong_out = {1, 2, 4, 8};
    std::vector<int64_t> three_heads = {1, 3, 3, 8};
    const struct {
      const char* name;
      std::function<void(Call&)> spoil;
      bool applies;
    } cases[] = {
        {"args struct_size below ABI 1.3", [](Call& c) { c.args.struct_size = 8; }, true},
        {"query is NULL", [](Call& c) { c.args.query = nullptr; }, true},
        {"query data is NULL", [](Call& c) { c.q.dl().data = nullptr; }, true},
        {"value data is NULL", [](Call& c) { c.v.dl().data = nullptr; }, true},
        {"output data is NULL", [](Call& c) { c.out.dl().data = nullptr; }, true},
        {"float64, not a declared dtype",
         [](Call& c) {
           for (HostTensor* x : {&c.q, &c.k, &c.v, &c.out}) x->dl().dtype = {kDLFloat, 64, 1};
         },
         !any_dtype},
        {"int32 tensors",
         [](Call& c) {
           for (HostTensor* x : {&c.q, &c.k, &c.v, &c.out}) x->dl().dtype = {kDLInt, 32, 1};
         },
         true},
        {"query with 3 dims",
         [&](Call& c) {
           c.q.dl().ndim = 3;
           c.q.dl().shape = three_dims.data();
         },
         true},
        {"key head_dim differs from query's", [&](Call& c) { c.k.dl().shape = wrong_dim.data(); },
         true},
        {"value seq_k differs from key's", [&](Call& c) { c.v.dl().shape = wrong_seq.data(); },
         true},
        {"output shape differs from query's", [&](Call& c) { c.out.dl().shape = wrong_out.data(); },
         true},
        {"query heads not a multiple of key heads",
         [&](Call& c) {
           c.q.dl().shape = three_heads.data();
           c.out.dl().shape = three_heads.data();
         },
         true},
        {"tensors on another device",
         [&](Call& c) {
           for (HostTensor* x : {&c.q, &c.k, &c.v, &c.out}) x->dl().device.device_type = elsewhere;
         },
         true},
    };
    for (const auto& bad : cases) {
      if (!bad.applies) continue;
      SCOPED_TRACE(t.kernel.implementation + " on " + t.device.device.str() + ": " + bad.name);
      Call call(s, dtype, device);
      bad.spoil(call);
      const std::vector<uint8_t> before = call.out.bytes();
      try {
        kernel(call.args);
        ADD_FAILURE() << "the kernel accepted the call";
      } catch (const InvalidArgument& e) {
        EXPECT_GT(std::string(e.what()).size(), 0u);
      }
      EXPECT_EQ(call.out.bytes(), before) << "a refused call wrote its output";
    }
  }
  for (const std::string& n : skipped) std::cout << "[ note ] not run: " << n << "\n";
}

}  // namespace backplane::conformance
