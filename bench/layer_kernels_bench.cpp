// The layer kernels against LibTorch, in backplane-bench's run (same process, same threads):
//   rmsnorm/<rows>x<hidden>_<dtype>/{backplane,libtorch}         at::rms_norm (its fused op)
//   silu_and_mul/<rows>x2x<d>_<dtype>/{backplane,libtorch}       at::silu(x1) * x2, into out
//   rotary/<b>x<heads>x<seq>x<dim>_<dtype>/{backplane,libtorch}  transformers'
//       apply_rotary_pos_emb on query and key (q * cos + rotate_half(q) * sin), full-width
//       cos and sin made beforehand as the model's rotary module does
//   rotary_interleaved/<b>x<heads>x<seq>x<dim>_<dtype>/{backplane,libtorch}  GPT-J's
//       rotate_every_two on query and key, cos and sin repeated per pair beforehand
//   roofline/scale_{stream,inplace}/16777216_<dtype>  scale_roofline.hpp's bare loop, y = -x with
//       the kernels' conversions, over rmsnorm's element count out of place (streamed) and
//       over rotary's query and key in place: what this CPU gives bfloat16 per byte
// Threads: BACKPLANE_BENCH_THREADS, default hardware_concurrency(), for both (as attention).
// Counter `bytes` is what the op must read and write at the least, per second (one pass over
// each input and output); bench/layer_kernels_report.py divides it by roofline/copy's and
// gives the ratio to LibTorch from the medians. `speedup_vs_libtorch` here is from this run's
// latest libtorch benchmark of the case.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "activation/activation.hpp"
#include "common/threads.hpp"
#include "layer_threads.hpp"
#include "rmsnorm/rmsnorm.hpp"
#include "rotary/rotary.hpp"
#include "scale_roofline.hpp"

#ifdef BACKPLANE_BENCH_LIBTORCH
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#endif

namespace backplane::bench {

int layer_threads() {
  static const int threads = [] {
    int n = 0;
    if (const char* env = std::getenv("BACKPLANE_BENCH_THREADS")) n = std::atoi(env);
    if (n <= 0) n = static_cast<int>(std::thread::hardware_concurrency());
    n = n > 0 ? n : 1;
    backplane::kernels::set_num_threads(n);
#ifdef BACKPLANE_BENCH_LIBTORCH
    at::set_num_threads(n);
#endif
    return n;
  }();
  return threads;
}

}  // namespace backplane::bench

namespace {

namespace bk = backplane::kernels;

using backplane::bench::layer_threads;

enum class Op { kRmsNorm, kSiluAndMul, kRotary, kRotaryInterleaved };
enum class Type { kF32, kBF16 };

struct LayerCase {
  Op op;
  Type type;
  std::vector<int64_t> dims;  // rmsnorm: rows, hidden; silu: rows, d; rotary: b, heads, seq, dim
  std::string name;           // "<op>/<case>"

  int64_t element_bytes() const { return type == Type::kF32 ? 4 : 2; }
  // What the op reads and writes at the least.
  double bytes() const {
    const double es = static_cast<double>(element_bytes());
    switch (op) {
      case Op::kRmsNorm:  // x in, out; the weight once
        return es * static_cast<double>(dims[0] * dims[1] * 2 + dims[1]);
      case Op::kSiluAndMul:  // [rows, 2d] in, [rows, d] out
        return es * static_cast<double>(dims[0] * dims[1] * 3);
      case Op::kRotary:
      case Op::kRotaryInterleaved: {  // query and key in and out; cos and sin [seq, dim / 2]
        const double qk = es * static_cast<double>(dims[0] * dims[1] * dims[2] * dims[3]);
        return 4 * qk + 4.0 * static_cast<double>(dims[2] * dims[3]);
      }
    }
    return 0;
  }
};

std::vector<LayerCase>& cases() {
  static std::vector<LayerCase> c = {
      {Op::kRmsNorm, Type::kF32, {4096, 4096}, "rmsnorm/4096x4096_f32"},
      {Op::kRmsNorm, Type::kBF16, {4096, 4096}, "rmsnorm/4096x4096_bf16"},
      {Op::kSiluAndMul, Type::kF32, {2048, 11008}, "silu_and_mul/2048x2x11008_f32"},
      {Op::kSiluAndMul, Type::kBF16, {2048, 11008}, "silu_and_mul/2048x2x11008_bf16"},
      {Op::kRotary, Type::kF32, {1, 32, 2048, 128}, "rotary/1x32x2048x128_f32"},
      {Op::kRotary, Type::kBF16, {1, 32, 2048, 128}, "rotary/1x32x2048x128_bf16"},
      {Op::kRotaryInterleaved,
       Type::kF32,
       {1, 32, 2048, 128},
       "rotary_interleaved/1x32x2048x128_f32"},
      {Op::kRotaryInterleaved,
       Type::kBF16,
       {1, 32, 2048, 128},
       "rotary_interleaved/1x32x2048x128_bf16"},
  };
  return c;
}

std::map<std::string, double>& seconds() {
  static std::map<std::string, double> s;
  return s;
}

// Dense host buffers with DLPack views, filled with small values of the case's dtype, 64-byte
// aligned as LibTorch's CPU allocations are.
struct Buffer {
  std::vector<uint16_t> storage;
  std::vector<int64_t> shape;
  DLTensor dl{};

  Buffer(std::vector<int64_t> dims, Type type, float fill) : shape(std::move(dims)) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const int64_t units = type == Type::kF32 ? 2 * n : n;
    storage.assign(static_cast<size_t>(units + 32), 0);
    const auto address = reinterpret_cast<uintptr_t>(storage.data());
    auto* base = storage.data() + (64 - address % 64) % 64 / 2;
    for (int64_t i = 0; i < n; ++i) {
      const float v = fill * static_cast<float>((i * 7919) % 17 - 8) / 8.0f;
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      if (type == Type::kF32) {
        std::memcpy(base + 2 * i, &v, 4);
      } else {
        base[i] = static_cast<uint16_t>(bits >> 16);
      }
    }
    dl.data = base;
    dl.device = {kDLCPU, 0};
    dl.ndim = static_cast<int32_t>(shape.size());
    dl.dtype = type == Type::kF32 ? DLDataType{kDLFloat, 32, 1} : DLDataType{kDLBfloat, 16, 1};
    dl.shape = shape.data();
  }
};

// cos and sin of the model's rotary angles (position * 10000^(-i / half)), float32 [seq, half].
// A real rotation keeps the values' size however often it is applied in place; a table of other
// numbers shrinks them into the subnormal range within a few iterations, and the benchmark then
// times the FPU's slow path for subnormals instead of the kernel.
void fill_rotation(Buffer& cos, Buffer& sin) {
  const int64_t seq = cos.shape[0], half = cos.shape[1];
  auto* c = static_cast<float*>(cos.dl.data);
  auto* s = static_cast<float*>(sin.dl.data);
  for (int64_t pos = 0; pos < seq; ++pos) {
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<double>(pos) *
                           std::pow(10000.0, -static_cast<double>(i) / static_cast<double>(half));
      c[pos * half + i] = static_cast<float>(std::cos(angle));
      s[pos * half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

void finish(benchmark::State& state, const LayerCase& c, const std::string& impl, double secs) {
  seconds()[c.name + "/" + impl] = secs;
  state.counters["bytes"] = benchmark::Counter(
      c.bytes(), benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1024);
  state.counters["threads"] = layer_threads();
  const auto torch = seconds().find(c.name + "/libtorch");
  if (impl == "backplane" && torch != seconds().end() && secs > 0) {
    state.counters["speedup_vs_libtorch"] = torch->second / secs;
  }
}

double per_iteration(benchmark::State& state, std::chrono::steady_clock::time_point t0) {
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return state.iterations() ? s / static_cast<double>(state.iterations()) : 0.0;
}

void LayerBackplane(benchmark::State& state, const LayerCase* c) {
  layer_threads();
  const std::vector<int64_t>& d = c->dims;
  std::vector<Buffer> bufs;
  bufs.reserve(4);
  std::function<backplane::kernels::Status()> call;
  switch (c->op) {
    case Op::kRmsNorm: {
      bufs.emplace_back(std::vector<int64_t>{d[0], d[1]}, c->type, 1.0f);
      bufs.emplace_back(std::vector<int64_t>{d[1]}, c->type, 1.0f);
      bufs.emplace_back(std::vector<int64_t>{d[0], d[1]}, c->type, 0.0f);
      call = [&] {
        return backplane::rmsnorm::forward_cpu({&bufs[0].dl, &bufs[1].dl, nullptr, &bufs[2].dl},
                                               1e-6);
      };
      break;
    }
    case Op::kSiluAndMul: {
      bufs.emplace_back(std::vector<int64_t>{d[0], 2 * d[1]}, c->type, 1.0f);
      bufs.emplace_back(std::vector<int64_t>{d[0], d[1]}, c->type, 0.0f);
      call = [&] {
        return backplane::activation::forward_cpu(backplane::activation::Activation::kSilu,
                                                  &bufs[0].dl, &bufs[1].dl);
      };
      break;
    }
    case Op::kRotary:
    case Op::kRotaryInterleaved: {
      bufs.emplace_back(d, c->type, 1.0f);
      bufs.emplace_back(d, c->type, 1.0f);
      bufs.emplace_back(std::vector<int64_t>{d[2], d[3] / 2}, Type::kF32, 0.0f);
      bufs.emplace_back(std::vector<int64_t>{d[2], d[3] / 2}, Type::kF32, 0.0f);
      fill_rotation(bufs[2], bufs[3]);
      const auto style = c->op == Op::kRotary ? backplane::rotary::Style::kNeox
                                              : backplane::rotary::Style::kInterleaved;
      call = [&, style] {
        return backplane::rotary::forward_cpu({&bufs[0].dl, &bufs[1].dl, &bufs[2].dl, &bufs[3].dl},
                                              style);
      };
      break;
    }
  }
  if (const auto s = call(); !s.ok()) {
    state.SkipWithError(s.message.c_str());
    return;
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    call();
    benchmark::ClobberMemory();
  }
  finish(state, *c, "backplane", per_iteration(state, t0));
}

#ifdef BACKPLANE_BENCH_LIBTORCH
void LayerLibTorch(benchmark::State& state, const LayerCase* c) {
  layer_threads();
  const std::vector<int64_t>& d = c->dims;
  const at::ScalarType dtype = c->type == Type::kF32 ? at::kFloat : at::kBFloat16;
  const auto opts = at::TensorOptions().dtype(dtype);
  std::function<void()> call;
  switch (c->op) {
    case Op::kRmsNorm: {
      const at::Tensor x = at::randn({d[0], d[1]}, opts), w = at::randn({d[1]}, opts);
      call = [=] { benchmark::DoNotOptimize(at::rms_norm(x, {d[1]}, w, 1e-6)); };
      break;
    }
    case Op::kSiluAndMul: {
      const at::Tensor x = at::randn({d[0], 2 * d[1]}, opts);
      at::Tensor out = at::empty({d[0], d[1]}, opts);
      call = [=]() mutable {
        at::mul_out(out, at::silu(x.narrow(-1, 0, d[1])), x.narrow(-1, d[1], d[1]));
      };
      break;
    }
    case Op::kRotary:
    case Op::kRotaryInterleaved: {
      const at::Tensor q = at::randn({d[0], d[1], d[2], d[3]}, opts), k = at::randn_like(q);
      const at::Tensor freqs = at::randn({d[2], d[3] / 2});
      const int64_t half = d[3] / 2;
      // GPT-NeoX pairs the two halves of a row (rotate_half), GPT-J adjacent elements
      // (rotate_every_two); each repeats the angles to match: [seq, dim].
      std::function<at::Tensor(const at::Tensor&)> rotate;
      at::Tensor angles;
      if (c->op == Op::kRotary) {
        angles = at::cat({freqs, freqs}, -1);
        rotate = [half](const at::Tensor& x) {
          return at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
        };
      } else {
        angles = freqs.repeat_interleave(2, -1);
        rotate = [](const at::Tensor& x) {
          using at::indexing::None;
          using at::indexing::Slice;
          const at::Tensor even = x.index({"...", Slice(None, None, 2)});
          const at::Tensor odd = x.index({"...", Slice(1, None, 2)});
          return at::stack({-odd, even}, -1).flatten(-2);
        };
      }
      const at::Tensor cos = angles.cos().to(dtype), sin = angles.sin().to(dtype);
      call = [=] {
        benchmark::DoNotOptimize(q * cos + rotate(q) * sin);
        benchmark::DoNotOptimize(k * cos + rotate(k) * sin);
      };
      break;
    }
  }
  call();
  const auto t0 = std::chrono::steady_clock::now();
  for (auto _ : state) {
    call();
    benchmark::ClobberMemory();
  }
  finish(state, *c, "libtorch", per_iteration(state, t0));
}
#endif

// Whether each of n elements of `after` is its `before` with the sign flipped: -x, which is
// exact in both dtypes.
bool negated(const void* before, const void* after, int64_t n, size_t element_bytes) {
  const uint32_t sign = element_bytes == 2 ? 0x8000u : 0x80000000u;
  for (int64_t i = 0; i < n; ++i) {
    uint32_t a = 0, b = 0;
    const size_t at = static_cast<size_t>(i) * element_bytes;
    std::memcpy(&a, static_cast<const char*>(before) + at, element_bytes);
    std::memcpy(&b, static_cast<const char*>(after) + at, element_bytes);
    if ((a ^ b) != sign) return false;
  }
  return true;
}

// n = 2^24: rmsnorm's [4096, 4096], and rotary's query and key of [1, 32, 2048, 128] together.
// The factor is -1, so values stay as they are however often the loop runs in place.
void ScaleRoofline(benchmark::State& state, Type type, bool in_place) {
  layer_threads();
  constexpr int64_t n = int64_t{1} << 24;
  Buffer in({n}, type, 1.0f), out({in_place ? 1 : n}, type, 0.0f);
  void* to = in_place ? in.dl.data : out.dl.data;
  const bool bf16 = type == Type::kBF16;
  const size_t element_bytes = bf16 ? 2 : 4;
  const auto* first = static_cast<const char*>(in.dl.data);
  const std::vector<char> before(first, first + n * static_cast<int64_t>(element_bytes));
  backplane::bench::scale_roofline(bf16, in.dl.data, to, n, -1.0f);
  if (!negated(before.data(), to, n, element_bytes)) {
    state.SkipWithError("roofline/scale: the loop's output is not -input");
    return;
  }
  for (auto _ : state) {
    backplane::bench::scale_roofline(bf16, in.dl.data, to, n, -1.0f);
    benchmark::ClobberMemory();
  }
  state.counters["bytes"] = benchmark::Counter(2.0 * static_cast<double>(n * element_bytes),
                                               benchmark::Counter::kIsIterationInvariantRate,
                                               benchmark::Counter::kIs1024);
  state.counters["threads"] = layer_threads();
}

[[maybe_unused]] const bool registered = [] {
  for (const bool in_place : {false, true}) {
    for (const Type type : {Type::kF32, Type::kBF16}) {
      const std::string name = std::string("roofline/scale_") + (in_place ? "inplace" : "stream") +
                               "/16777216_" + (type == Type::kF32 ? "f32" : "bf16");
      benchmark::RegisterBenchmark(name.c_str(), ScaleRoofline, type, in_place)
          ->Unit(benchmark::kMillisecond)
          ->UseRealTime();
    }
  }
  for (const LayerCase& c : cases()) {
#ifdef BACKPLANE_BENCH_LIBTORCH
    benchmark::RegisterBenchmark((c.name + "/libtorch").c_str(), LayerLibTorch, &c)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
#endif
    benchmark::RegisterBenchmark((c.name + "/backplane").c_str(), LayerBackplane, &c)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  return true;
}();

}  // namespace
