// The kernels' own source run on CPU threads (gpu_emulator.hpp) against a plain double
// precision reference on the same values: the tiling, the online softmax, causal skipping and
// masking, GQA, masks, strides and the padding of head dims, on both the NVIDIA path (with
// ldmatrix / mma.sync / cp.async emulated from their PTX definitions) and the AMD path, and the
// eager kernel. Small shapes: every GPU thread is a CPU thread here.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "cpu/problem.hpp"
#include "emulated_kernels.hpp"
#include "validate.hpp"

namespace {

namespace gpu = backplane::attention::gpu;
namespace cpu = backplane::attention::cpu;

enum class Path { kNvidia, kAmd, kEager };
enum class Mask { kNone, kBool, kAdditive };
enum class Layout { kCompact, kTransposed, kDimStride2 };

struct Case {
  std::string name;
  Path path = Path::kNvidia;
  gpu::ElementType dtype = gpu::ElementType::kBfloat16;
  int64_t b = 1, hq = 2, hkv = 2, sq = 8, sk = 8, d = 64, dv = 0;
  bool causal = false;
  Mask mask = Mask::kNone;
  Layout layout = Layout::kCompact;
};

void PrintTo(const Case& c, std::ostream* os) {
  *os << c.name;
}

float quantize(float x, gpu::ElementType t) {
  if (t == gpu::ElementType::kBfloat16) return cpu::bf16_to_f32(cpu::f32_to_bf16(x));
  if (t == gpu::ElementType::kFloat16) return cpu::f16_to_f32(cpu::f32_to_f16(x));
  return x;
}

// A logical 4-d tensor: float values in compact order, and its "device" copy in a layout.
struct Tensor {
  int64_t shape[4];
  int64_t strides[4];
  gpu::ElementType dtype;
  std::vector<float> values;
  std::vector<unsigned char> device;
  DLTensor dl{}, host{};

  Tensor(int64_t n0, int64_t n1, int64_t n2, int64_t n3, gpu::ElementType t, Layout layout)
      : shape{n0, n1, n2, n3}, dtype(t) {
    const int64_t step = layout == Layout::kDimStride2 ? 2 : 1;
    if (layout == Layout::kTransposed) {
      strides[0] = n1 * n2 * n3, strides[1] = n3, strides[2] = n1 * n3, strides[3] = 1;
    } else {
      strides[3] = step, strides[2] = n3 * step, strides[1] = n2 * n3 * step;
      strides[0] = n1 * n2 * n3 * step;
    }
    values.assign(static_cast<size_t>(n0 * n1 * n2 * n3), 0.0f);
    device.assign(static_cast<size_t>(std::max<int64_t>(n0 * n1 * n2 * n3 * step, 1)) * bytes(),
                  0xff);  // NaN in every dtype: an element never written shows
    dl.data = device.data();
    dl.device = {kDLCUDA, 0};
    dl.ndim = 4;
    dl.dtype = t == gpu::ElementType::kFloat32    ? DLDataType{kDLFloat, 32, 1}
               : t == gpu::ElementType::kBfloat16 ? DLDataType{kDLBfloat, 16, 1}
                                                  : DLDataType{kDLFloat, 16, 1};
    dl.shape = shape;
    dl.strides = strides;
    host.data = values.data();
    host.device = {kDLCPU, 0};
    host.ndim = 4;
    host.dtype = {kDLFloat, 32, 1};
    host.shape = shape;
  }
  size_t bytes() const { return dtype == gpu::ElementType::kFloat32 ? 4 : 2; }

  template <class Fn>
  void each(Fn fn) const {
    size_t i = 0;
    for (int64_t a = 0; a < shape[0]; ++a)
      for (int64_t b = 0; b < shape[1]; ++b)
        for (int64_t c = 0; c < shape[2]; ++c)
          for (int64_t d = 0; d < shape[3]; ++d)
            fn(i++, static_cast<size_t>(a * strides[0] + b * strides[1] + c * strides[2] +
                                        d * strides[3]));
  }
  void fill(const std::function<float(size_t)>& make) {
    for (size_t i = 0; i < values.size(); ++i) values[i] = quantize(make(i), dtype);
    each([&](size_t i, size_t off) {
      if (dtype == gpu::ElementType::kFloat32) {
        std::memcpy(&device[off * 4], &values[i], 4);
      } else {
        const uint16_t bits = dtype == gpu::ElementType::kBfloat16 ? cpu::f32_to_bf16(values[i])
                                                                   : cpu::f32_to_f16(values[i]);
        std::memcpy(&device[off * 2], &bits, 2);
      }
    });
  }
  std::vector<float> read() const {
    std::vector<float> out(values.size());
    each([&](size_t i, size_t off) {
      if (dtype == gpu::ElementType::kFloat32) {
        std::memcpy(&out[i], &device[off * 4], 4);
      } else {
        uint16_t bits;
        std::memcpy(&bits, &device[off * 2], 2);
        out[i] =
            dtype == gpu::ElementType::kBfloat16 ? cpu::bf16_to_f32(bits) : cpu::f16_to_f32(bits);
      }
    });
    return out;
  }
};

double tolerance(gpu::ElementType t) {
  return t == gpu::ElementType::kFloat32 ? 1e-5 : t == gpu::ElementType::kBfloat16 ? 2e-2 : 3e-3;
}

// softmax(scale q k^T + mask) v in double, straight from the definition; compact inputs.
std::vector<float> reference(const Case& c, const std::vector<float>& q,
                             const std::vector<float>& k, const std::vector<float>& v,
                             const std::vector<uint8_t>& keep, const std::vector<float>& additive) {
  const int64_t dv = c.dv ? c.dv : c.d;
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
  std::vector<float> out(static_cast<size_t>(c.b * c.hq * c.sq * dv));
  for (int64_t b = 0; b < c.b; ++b) {
    for (int64_t h = 0; h < c.hq; ++h) {
      const int64_t hk = h / (c.hq / c.hkv);
      for (int64_t i = 0; i < c.sq; ++i) {
        std::vector<double> score(static_cast<size_t>(c.sk), -INFINITY);
        double top = -INFINITY;
        for (int64_t j = 0; j < c.sk; ++j) {
          if (c.causal && j > i + c.sk - c.sq) continue;
          if (c.mask == Mask::kBool && !keep[static_cast<size_t>(i * c.sk + j)]) continue;
          double dot = 0.0;
          for (int64_t x = 0; x < c.d; ++x) {
            dot +=
                static_cast<double>(q[static_cast<size_t>(((b * c.hq + h) * c.sq + i) * c.d + x)]) *
                k[static_cast<size_t>(((b * c.hkv + hk) * c.sk + j) * c.d + x)];
          }
          double s = dot * scale;
          if (c.mask == Mask::kAdditive) {
            s += additive[static_cast<size_t>(((b * c.hq + h) * c.sq + i) * c.sk + j)];
          }
          score[static_cast<size_t>(j)] = s;
          top = std::max(top, s);
        }
        for (int64_t x = 0; x < dv; ++x) {
          double num = 0.0, den = 0.0;
          if (top != -INFINITY) {
            for (int64_t j = 0; j < c.sk; ++j) {
              const double e = std::exp(score[static_cast<size_t>(j)] - top);
              den += e;
              num += e * v[static_cast<size_t>(((b * c.hkv + hk) * c.sk + j) * dv + x)];
            }
          }
          out[static_cast<size_t>(((b * c.hq + h) * c.sq + i) * dv + x)] =
              den > 0.0 ? static_cast<float>(num / den) : 0.0f;
        }
      }
    }
  }
  return out;
}

void run_case(const Case& c) {
  SCOPED_TRACE(c.name);
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t dv = c.dv ? c.dv : c.d;
  Tensor q(c.b, c.hq, c.sq, c.d, c.dtype, c.layout);
  Tensor k(c.b, c.hkv, c.sk, c.d, c.dtype, c.layout);
  Tensor v(c.b, c.hkv, c.sk, dv, c.dtype, c.layout);
  Tensor out(c.b, c.hq, c.sq, dv, c.dtype, Layout::kCompact);
  for (Tensor* t : {&q, &k, &v}) t->fill([&](size_t) { return normal(rng); });
  // bool: [sq, sk] keeping ~70% and nothing of query row 0; additive: [b, hq, sq, sk] in
  // float32 with -inf on every third key of odd heads.
  Tensor mask(1, 1, c.sq, c.sk, gpu::ElementType::kFloat32, Layout::kCompact);
  std::vector<uint8_t> keep(static_cast<size_t>(c.sq * c.sk));
  DLTensor bool_dl{};
  int64_t bool_shape[2] = {c.sq, c.sk};
  Tensor additive(c.b, c.hq, c.sq, c.sk, gpu::ElementType::kFloat32, Layout::kCompact);
  if (c.mask == Mask::kBool) {
    std::bernoulli_distribution kept(0.7);
    for (size_t i = 0; i < keep.size(); ++i)
      keep[i] = i < static_cast<size_t>(c.sk) ? 0 : kept(rng);
    bool_dl.data = keep.data();
    bool_dl.device = {kDLCUDA, 0};
    bool_dl.ndim = 2;
    bool_dl.dtype = {kDLUInt, 8, 1};
    bool_dl.shape = bool_shape;
  } else if (c.mask == Mask::kAdditive) {
    const int64_t sq = c.sq, sk = c.sk, hq = c.hq;
    additive.fill([&](size_t i) {
      const int64_t key = static_cast<int64_t>(i) % sk;
      const int64_t head = static_cast<int64_t>(i) / (sq * sk) % hq;
      return head % 2 == 1 && key % 3 == 0 ? -INFINITY : 0.25f * static_cast<float>(key % 5);
    });
  }
  const DLTensor* device_mask = c.mask == Mask::kBool       ? &bool_dl
                                : c.mask == Mask::kAdditive ? &additive.dl
                                                            : nullptr;

  backplane::attention::Tensors t;
  t.query = &q.dl, t.key = &k.dl, t.value = &v.dl, t.output = &out.dl, t.mask = device_mask;
  gpu::Params params{};
  const gpu::Kernel kernel = c.path == Path::kEager ? gpu::Kernel::kEager : gpu::Kernel::kFlash;
  const backplane::attention::Status r =
      gpu::make_params(t, c.causal, std::nullopt, kernel, gpu::Platform::kCuda, &params);
  ASSERT_TRUE(r.ok()) << r.message;
  if (c.path == Path::kNvidia) gpu::emulate_flash_nvidia(params);
  if (c.path == Path::kAmd) gpu::emulate_flash_amd(params);
  if (c.path == Path::kEager) gpu::emulate_eager(params);

  const std::vector<float> expected =
      reference(c, q.values, k.values, v.values, keep, additive.values);
  const std::vector<float> got = out.read();
  double worst = 0.0;
  size_t bad = 0, first_bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - expected[i]);
    if (!(err <= tolerance(c.dtype))) {
      if (bad++ == 0) first_bad = i;
    }
    if (!(err <= worst)) worst = std::isnan(err) ? INFINITY : err;
  }
  EXPECT_EQ(bad, 0u) << "max abs error " << worst << "; first bad element " << first_bad << ": got "
                     << got[first_bad] << ", expected " << expected[first_bad];
}

std::vector<Case> cases() {
  using gpu::ElementType;
  std::vector<Case> all;
  for (Path path : {Path::kNvidia, Path::kAmd}) {
    const std::string p = path == Path::kNvidia ? "nvidia " : "amd ";
    Case c;
    c.path = path;
    c.name = p + "bf16 d64 GQA 2/1 70x70 causal: two query blocks, partial tiles";
    c.hkv = 1, c.sq = c.sk = 70, c.causal = true;
    all.push_back(c);
    c = Case{}, c.path = path;
    c.name = p + "f16 d128 sq5 sk130 bool mask, row 0 fully masked";
    c.dtype = ElementType::kFloat16, c.d = 128, c.sq = 5, c.sk = 130, c.mask = Mask::kBool;
    all.push_back(c);
    c = Case{}, c.path = path;
    c.name = p + "bf16 d256 sq20 sk45 causal, additive mask, [b, s, h, d] memory";
    c.d = 256, c.sq = 20, c.sk = 45, c.causal = true, c.mask = Mask::kAdditive;
    c.layout = Layout::kTransposed;
    all.push_back(c);
  }
  Case c;
  c.name = "nvidia bf16 d36 dim stride 2 (element-wise loads) 33x33";
  c.d = 36, c.sq = c.sk = 33, c.layout = Layout::kDimStride2;
  all.push_back(c);
  c = Case{}, c.name = "nvidia bf16 d128 dv64 40x40";
  c.d = 128, c.dv = 64, c.sq = c.sk = 40;
  all.push_back(c);
  c = Case{}, c.name = "nvidia f16 sq70 sk20 causal: the first 50 rows see no key";
  c.dtype = gpu::ElementType::kFloat16, c.hq = 1, c.hkv = 1, c.sq = 70, c.sk = 20;
  c.causal = true;
  all.push_back(c);
  c = Case{}, c.name = "nvidia bf16 no keys: zeros", c.sq = 3, c.sk = 0;
  all.push_back(c);
  c = Case{}, c.path = Path::kEager, c.name = "eager f32 d96 sq9 sk70 causal bool mask";
  c.dtype = gpu::ElementType::kFloat32, c.hq = 4, c.d = 96, c.sq = 9, c.sk = 70;
  c.causal = true, c.mask = Mask::kBool;
  all.push_back(c);
  c = Case{}, c.path = Path::kEager, c.name = "eager bf16 d256 sq3 sk300 [b, s, h, d] memory";
  c.d = 256, c.sq = 3, c.sk = 300, c.layout = Layout::kTransposed;
  all.push_back(c);
  c = Case{}, c.path = Path::kEager, c.name = "eager f16 d40 dv24 sq4 sk5 additive mask";
  c.dtype = gpu::ElementType::kFloat16, c.d = 40, c.dv = 24, c.sq = 4, c.sk = 5;
  c.mask = Mask::kAdditive;
  all.push_back(c);
  return all;
}

class Emulated : public ::testing::TestWithParam<Case> {};

TEST_P(Emulated, MatchesTheReference) {
  run_case(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Kernels, Emulated, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& param) {
                           return "case" + std::to_string(param.index);
                         });

}  // namespace
