// Bad arguments to the layer kernels: each is refused with InvalidArgument and a message that
// names the argument and what would be accepted; nothing is written. Also the definitions on
// values worked out by hand (in-place RMSNorm, the residual written back, rotary pairs).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "activation/activation.hpp"
#include "rmsnorm/rmsnorm.hpp"
#include "rotary/rotary.hpp"

namespace backplane {
namespace {

using kernels::Status;
using kernels::StatusCode;

// A float32 host tensor (other dtypes and devices by changing dl after construction).
struct Host {
  std::vector<float> data;
  std::vector<int64_t> shape, strides;
  DLTensor dl{};

  explicit Host(std::vector<int64_t> dims, float fill = 1.0f) : shape(std::move(dims)) {
    int64_t n = 1;
    strides.assign(shape.size(), 1);
    for (size_t i = shape.size(); i-- > 0;) {
      strides[i] = n;
      n *= shape[i];
    }
    data.assign(static_cast<size_t>(n), fill);
    dl.data = data.data();
    dl.device = {kDLCPU, 0};
    dl.ndim = static_cast<int32_t>(shape.size());
    dl.dtype = {kDLFloat, 32, 1};
    dl.shape = shape.data();
    dl.strides = strides.data();
  }
  Host(const Host&) = delete;
  Host& operator=(const Host&) = delete;
  operator const DLTensor*() const { return &dl; }
};

struct ErrorCase {
  const char* name;
  std::function<Status()> call;
  const char* message;  // a substring of the expected message
};

Status norm(Host& x, Host& w, Host& out, Host* residual = nullptr, double eps = 1e-6) {
  return rmsnorm::forward_cpu({x, w, residual ? &residual->dl : nullptr, out}, eps);
}

Status rope(Host& q, Host* k, Host& cos, Host& sin, int style = 0) {
  return rotary::forward_cpu({q, k ? &k->dl : nullptr, cos, sin},
                             static_cast<rotary::Style>(style));
}

std::vector<ErrorCase> error_cases() {
  using activation::Activation;
  std::vector<ErrorCase> cases;
  auto add = [&](const char* name, std::function<Status()> call, const char* message) {
    cases.push_back({name, std::move(call), message});
  };
  // ---- rms_norm
  add(
      "norm input NULL",
      [] {
        Host w({4}), o({2, 4});
        return rmsnorm::forward_cpu({nullptr, w, nullptr, o}, 1e-6);
      },
      "rms_norm: input is NULL");
  add(
      "norm weight wrong length",
      [] {
        Host x({2, 4}), w({5}), o({2, 4});
        return norm(x, w, o);
      },
      "rms_norm: weight shape [5] must be [hidden] = [4]");
  add(
      "norm output shape",
      [] {
        Host x({2, 4}), w({4}), o({4, 2});
        return norm(x, w, o);
      },
      "rms_norm: output shape [4, 2] must equal input's [2, 4]");
  add(
      "norm dtype int",
      [] {
        Host x({2, 4}), w({4}), o({2, 4});
        x.dl.dtype = {kDLInt, 32, 1};
        return norm(x, w, o);
      },
      "rms_norm: input has dtype int32; supported: float32, bfloat16, float16");
  add(
      "norm mixed dtypes",
      [] {
        Host x({2, 4}), w({4}), o({2, 4});
        w.dl.dtype = {kDLBfloat, 16, 1};
        return norm(x, w, o);
      },
      "rms_norm: weight has dtype bfloat16 but input has float32");
  add(
      "norm on cuda",
      [] {
        Host x({2, 4}), w({4}), o({2, 4});
        x.dl.device = {kDLCUDA, 0};
        return norm(x, w, o);
      },
      "rms_norm: input is on device kDLCUDA; the CPU kernels need kDLCPU memory");
  add(
      "norm strided last dim",
      [] {
        Host x({2, 4}), w({4}), o({2, 4});
        x.shape = {2, 2};
        x.strides = {4, 2};
        o.shape = {2, 2};
        w.shape = {2};
        return norm(x, w, o);
      },
      "rms_norm: input must be contiguous in its last dim (stride 1), got stride 2");
  add(
      "norm negative epsilon",
      [] {
        Host x({2, 4}), w({4}), o({2, 4});
        return norm(x, w, o, nullptr, -1.0);
      },
      "rms_norm: epsilon must be finite and >= 0");
  add(
      "norm partial overlap",
      [] {
        Host x({3, 4}), w({4});
        Host& o = x;
        DLTensor shifted = o.dl;
        shifted.byte_offset = 4 * sizeof(float);
        shifted.shape[0] = 2;
        Host in({2, 4});
        in.dl = x.dl;
        return rmsnorm::forward_cpu({&in.dl, w, nullptr, &shifted}, 1e-6);
      },
      "rms_norm: output overlaps input without being the same view");
  add(
      "norm residual overlaps input",
      [] {
        Host x({2, 4}), w({4}), o({2, 4});
        return rmsnorm::forward_cpu({x, w, x, o}, 1e-6);
      },
      "rms_norm: residual overlaps input");
  add(
      "norm output broadcast",
      [] {
        Host x({2, 4}), w({4}), o({2, 4});
        o.strides = {0, 1};
        return norm(x, w, o);
      },
      "rms_norm: output has stride 0 on dim 0");
  add(
      "norm misaligned",
      [] {
        Host x({2, 4}), w({4}), o({2, 4});
        x.dl.byte_offset = 2;
        return norm(x, w, o);
      },
      "rms_norm: input data (data + byte_offset) is not aligned");
  add(
      "norm no dims",
      [] {
        Host x({2, 4}), w({4}), o({2, 4});
        x.dl.ndim = 0;
        return norm(x, w, o);
      },
      "rms_norm: input must have 1 to 8 dims");
  // ---- gated activations
  add(
      "act odd width",
      [] {
        Host x({2, 5}), o({2, 2});
        return activation::forward_cpu(Activation::kSilu, x, o);
      },
      "silu_and_mul: input's last dim must be even");
  add(
      "act output shape",
      [] {
        Host x({2, 8}), o({2, 8});
        return activation::forward_cpu(Activation::kGelu, x, o);
      },
      "gelu_and_mul: output shape [2, 8] must be input's with the last dim halved: [2, 4]");
  add(
      "act in place",
      [] {
        Host x({2, 8});
        Host o({2, 4});
        o.dl.data = x.data.data();
        return activation::forward_cpu(Activation::kGeluTanh, x, o);
      },
      "gelu_tanh_and_mul: output overlaps input");
  add(
      "act output NULL",
      [] {
        Host x({2, 8});
        return activation::forward_cpu(Activation::kSilu, x, nullptr);
      },
      "silu_and_mul: output is NULL");
  add(
      "act unknown activation",
      [] {
        Host x({2, 8}), o({2, 4});
        return activation::forward_cpu(static_cast<Activation>(9), x, o);
      },
      "activation must be kSilu, kGelu or kGeluTanh");
  // ---- rotary_embedding
  add(
      "rope query 3 dims",
      [] {
        Host q({2, 3, 8}), c({3, 4}), s({3, 4});
        return rope(q, nullptr, c, s);
      },
      "rotary_embedding: query must have 4 dims [batch, heads_q, seq, head_dim], got [2, 3, 8]");
  add(
      "rope key seq",
      [] {
        Host q({1, 2, 3, 8}), k({1, 2, 4, 8}), c({3, 4}), s({3, 4});
        return rope(q, &k, c, s);
      },
      "rotary_embedding: key shape [1, 2, 4, 8] must be [batch, heads_k, seq, head_dim]");
  add(
      "rope rotary too wide",
      [] {
        Host q({1, 2, 3, 8}), c({3, 5}), s({3, 5});
        return rope(q, nullptr, c, s);
      },
      "rotary_embedding: rotary_dim = 2 * cos.shape[-1] = 10 exceeds head_dim 8");
  add(
      "rope table seq",
      [] {
        Host q({1, 2, 3, 8}), c({4, 4}), s({4, 4});
        return rope(q, nullptr, c, s);
      },
      "rotary_embedding: cos shape [4, 4] must be [seq, rotary_dim / 2] or [batch or 1, seq, "
      "rotary_dim / 2]");
  add(
      "rope sin shape",
      [] {
        Host q({1, 2, 3, 8}), c({3, 4}), s({3, 2});
        return rope(q, nullptr, c, s);
      },
      "rotary_embedding: sin shape [3, 2] must equal cos's [3, 4]");
  add(
      "rope table dtype",
      [] {
        Host q({1, 2, 3, 8}), c({3, 4}), s({3, 4});
        q.dl.dtype = {kDLBfloat, 16, 1};
        c.dl.dtype = s.dl.dtype = {kDLFloat, 16, 1};
        return rope(q, nullptr, c, s);
      },
      "rotary_embedding: cos has dtype float16; expected float32 or query's bfloat16");
  add(
      "rope style",
      [] {
        Host q({1, 2, 3, 8}), c({3, 4}), s({3, 4});
        return rope(q, nullptr, c, s, 2);
      },
      "rotary_embedding: style 2 is unknown");
  add(
      "rope key is query",
      [] {
        Host q({1, 2, 3, 8}), c({3, 4}), s({3, 4});
        return rope(q, &q, c, s);
      },
      "rotary_embedding: query and key overlap");
  return cases;
}

TEST(LayerKernelErrors, EachBadArgumentIsNamed) {
  for (const ErrorCase& c : error_cases()) {
    SCOPED_TRACE(c.name);
    const Status s = c.call();
    EXPECT_EQ(s.code, StatusCode::kInvalidArgument) << s.message;
    EXPECT_NE(s.message.find(c.message), std::string::npos)
        << "message: " << s.message << "\nexpected to contain: " << c.message;
  }
}

TEST(LayerKernelErrors, RefusedCallsWriteNothing) {
  Host x({2, 4}, 3.0f), w({5}), o({2, 4}, -7.0f);
  EXPECT_FALSE(norm(x, w, o).ok());
  for (float v : o.data) EXPECT_EQ(v, -7.0f);
}

TEST(RmsNormByHand, InPlaceWithResidual) {
  // x = [1, 2], residual = [2, 2]: residual becomes [3, 4]; rms = sqrt((9 + 16) / 2).
  Host x({1, 2}), r({1, 2}, 2.0f), w({2}, 2.0f);
  x.data = {1.0f, 2.0f};
  x.dl.data = x.data.data();
  const Status s = rmsnorm::forward_cpu({x, w, r, x}, 0.0);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_FLOAT_EQ(r.data[0], 3.0f);
  EXPECT_FLOAT_EQ(r.data[1], 4.0f);
  const float rms = std::sqrt(12.5f);
  EXPECT_FLOAT_EQ(x.data[0], 2.0f * 3.0f / rms);
  EXPECT_FLOAT_EQ(x.data[1], 2.0f * 4.0f / rms);
}

TEST(RotaryByHand, QuarterTurnMovesEachPair) {
  // cos 0, sin 1: (x1, x2) -> (-x2, x1). Neox pairs (0, 2), (1, 3); interleaved (0, 1), (2, 3).
  for (int style : {0, 1}) {
    Host q({1, 1, 1, 5}), c({1, 2}, 0.0f), s({1, 2}, 1.0f);
    q.data = {1, 2, 3, 4, 5};
    ASSERT_TRUE(rope(q, nullptr, c, s, style).ok());
    const std::vector<float> want =
        style == 0 ? std::vector<float>{-3, -4, 1, 2, 5} : std::vector<float>{-2, 1, -4, 3, 5};
    EXPECT_EQ(q.data, want) << "style " << style;
  }
}

TEST(ActivationByHand, SiluOfZeroAndGeluOfOne) {
  Host x({1, 4});
  x.data = {0.0f, 1.0f, 5.0f, 2.0f};
  Host o({1, 2});
  ASSERT_TRUE(activation::forward_cpu(activation::Activation::kSilu, x, o).ok());
  EXPECT_FLOAT_EQ(o.data[0], 0.0f);
  EXPECT_NEAR(o.data[1], 2.0f / (1.0f + std::exp(-1.0f)), 1e-6f);
  ASSERT_TRUE(activation::forward_cpu(activation::Activation::kGelu, x, o).ok());
  EXPECT_NEAR(o.data[1], 2.0f * 0.5f * (1.0f + std::erf(1.0f / std::sqrt(2.0f))), 1e-6f);
}

}  // namespace
}  // namespace backplane
