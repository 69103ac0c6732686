// Attention kernels against LibTorch, with the machine's rooflines, in one program and one run:
//   roofline/copy                         256 MiB parallel memcpy (bytes = read + write)
//   roofline/sgemm                        2048^3 float32 through at::mm_out (LibTorch's BLAS)
//   attention/<case>/libtorch             at::scaled_dot_product_attention (its fused CPU kernel)
//   attention/<case>/backplane            backplane::attention::forward, sdpa
//   attention/decode_.../libtorch_folded  at::scaled_dot_product_attention with the query heads
//                                         of a kv head folded into its rows (no enable_gqa):
//                                         LibTorch's fastest way to decode with GQA
//   attention/decode_.../backplane_plugin the cpu plugin's sdpa kernel, called directly
//   attention/decode_.../backplane_torch  the same through backplane::torch::Attention: its
//                                         time over backplane_plugin's is what the bridge adds
// All with the same thread count: BACKPLANE_BENCH_THREADS, default hardware_concurrency().
// Each backplane benchmark reports its ratios as counters (against the latest libtorch and
// roofline runs of this process); bench/attention_report.py recomputes them from medians.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "attention/attention.hpp"

#ifdef BACKPLANE_BENCH_LIBTORCH
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/scaled_dot_product_attention.h>
#endif
#ifdef BACKPLANE_BENCH_TORCH_BRIDGE
#include <backplane/torch/attention.hpp>
#endif

namespace {

namespace attn = backplane::attention;

int bench_threads() {
  if (const char* env = std::getenv("BACKPLANE_BENCH_THREADS")) {
    const int n = std::atoi(env);
    if (n > 0) return n;
  }
  const unsigned n = std::thread::hardware_concurrency();
  return n ? static_cast<int>(n) : 1;
}

int setup_threads() {
  static const int threads = [] {
    const int n = bench_threads();
    attn::set_num_threads(n);
#ifdef BACKPLANE_BENCH_LIBTORCH
    at::set_num_threads(n);
#endif
    return n;
  }();
  return threads;
}

// Seconds per iteration of the latest run of each benchmark in this process.
std::map<std::string, double>& seconds() {
  static std::map<std::string, double> s;
  return s;
}

// Times the benchmark loop itself, for the cross-benchmark ratios.
class LoopTimer {
 public:
  explicit LoopTimer(benchmark::State& state) : state_(state) {}
  void start() { t0_ = std::chrono::steady_clock::now(); }
  double stop() {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    return state_.iterations() ? s / static_cast<double>(state_.iterations()) : 0.0;
  }

 private:
  benchmark::State& state_;
  std::chrono::steady_clock::time_point t0_;
};

// ------------------------------------------------------------------ rooflines

constexpr size_t kCopyBytes = size_t{256} << 20;

void RooflineCopy(benchmark::State& state) {
  const int threads = setup_threads();
  static std::unique_ptr<char[]> src(new char[kCopyBytes]), dst(new char[kCopyBytes]);
  std::memset(src.get(), 1, kCopyBytes);
  std::memset(dst.get(), 2, kCopyBytes);
  const size_t chunk = kCopyBytes / static_cast<size_t>(threads);
  auto copy = [&] {
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) {
      pool.emplace_back(
          [&, t] { std::memcpy(dst.get() + t * chunk, src.get() + t * chunk, chunk); });
    }
    std::memcpy(dst.get(), src.get(), chunk);
    for (auto& th : pool) th.join();
  };
  LoopTimer timer(state);
  timer.start();
  for (auto _ : state) {
    copy();
    benchmark::ClobberMemory();
  }
  seconds()["roofline/copy"] = timer.stop();
  state.counters["bytes"] = benchmark::Counter(
      2.0 * kCopyBytes, benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1024);
  state.counters["threads"] = threads;
}
BENCHMARK(RooflineCopy)->Name("roofline/copy")->Unit(benchmark::kMillisecond)->UseRealTime();

#ifdef BACKPLANE_BENCH_LIBTORCH
void RooflineSgemm(benchmark::State& state) {
  const int threads = setup_threads();
  const int64_t n = 2048;
  static std::vector<float> a, b, c;
  a.resize(n * n);
  b.resize(n * n);
  c.resize(n * n);
  std::mt19937 rng(1);
  std::normal_distribution<float> dist;
  for (auto& x : a) x = dist(rng);
  for (auto& x : b) x = dist(rng);
  const auto opts = at::TensorOptions().dtype(at::kFloat);
  at::Tensor ta = at::from_blob(a.data(), {n, n}, opts);
  at::Tensor tb = at::from_blob(b.data(), {n, n}, opts);
  at::Tensor tc = at::from_blob(c.data(), {n, n}, opts);
  LoopTimer timer(state);
  timer.start();
  for (auto _ : state) {
    at::mm_out(tc, ta, tb);
    benchmark::ClobberMemory();
  }
  seconds()["roofline/sgemm"] = timer.stop();
  state.counters["flops"] =
      benchmark::Counter(2.0 * n * n * n, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = threads;
}
BENCHMARK(RooflineSgemm)->Name("roofline/sgemm")->Unit(benchmark::kMillisecond)->UseRealTime();
#endif

// ------------------------------------------------------------------ attention cases

enum class Kind { kPrefill, kDecode };

struct AttnCase {
  const char* name;
  Kind kind;
  int64_t batch, heads_q, heads_kv, seq_q, seq_k, head_dim;
  bool causal;
  bool bf16;

  int64_t elem() const { return bf16 ? 2 : 4; }
  // Causal prefill: only the visible half of the score matrix counts.
  double flops() const {
    const double full = 4.0 * static_cast<double>(batch * heads_q * seq_q * seq_k * head_dim);
    return causal ? full / 2 : full;
  }
  double kv_bytes() const {
    return 2.0 * static_cast<double>(batch * heads_kv * seq_k * head_dim * elem());
  }
};

const AttnCase kCases[] = {
    {"prefill_causal_1x32x1024x128_f32", Kind::kPrefill, 1, 32, 32, 1024, 1024, 128, true, false},
    {"decode_1x32q8kv_1x4096x128_f32", Kind::kDecode, 1, 32, 8, 1, 4096, 128, false, false},
    {"prefill_causal_1x32x1024x128_bf16", Kind::kPrefill, 1, 32, 32, 1024, 1024, 128, true, true},
};

uint16_t to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

// Contiguous q, k, v, out of one case, allocated and filled once.
struct Buffers {
  std::vector<int64_t> qs, ks, os;
  std::vector<uint8_t> q, k, v, out;
  DLTensor tq{}, tk{}, tv{}, tout{};

  explicit Buffers(const AttnCase& c) {
    qs = {c.batch, c.heads_q, c.seq_q, c.head_dim};
    ks = {c.batch, c.heads_kv, c.seq_k, c.head_dim};
    os = qs;
    auto fill = [&](std::vector<uint8_t>& buf, const std::vector<int64_t>& shape, uint32_t seed) {
      int64_t n = 1;
      for (int64_t s : shape) n *= s;
      buf.resize(static_cast<size_t>(n * c.elem()));
      std::mt19937 rng(seed);
      std::normal_distribution<float> dist;
      for (int64_t i = 0; i < n; ++i) {
        const float x = dist(rng);
        if (c.bf16) {
          const uint16_t h = to_bf16(x);
          std::memcpy(buf.data() + 2 * i, &h, 2);
        } else {
          std::memcpy(buf.data() + 4 * i, &x, 4);
        }
      }
    };
    fill(q, qs, 1);
    fill(k, ks, 2);
    fill(v, ks, 3);
    fill(out, os, 4);
    const DLDataType dt = c.bf16 ? DLDataType{kDLBfloat, 16, 1} : DLDataType{kDLFloat, 32, 1};
    auto make = [&](DLTensor& t, std::vector<uint8_t>& buf, std::vector<int64_t>& shape) {
      t.data = buf.data();
      t.device = {kDLCPU, 0};
      t.ndim = 4;
      t.dtype = dt;
      t.shape = shape.data();
      t.strides = nullptr;
      t.byte_offset = 0;
    };
    make(tq, q, qs);
    make(tk, k, ks);
    make(tv, v, ks);
    make(tout, out, os);
  }
};

Buffers& buffers(const AttnCase& c) {
  static std::map<std::string, std::unique_ptr<Buffers>> all;
  auto& b = all[c.name];
  if (!b) b = std::make_unique<Buffers>(c);
  return *b;
}

void add_size_counters(benchmark::State& state, const AttnCase& c) {
  if (c.kind == Kind::kPrefill) {
    state.counters["flops"] =
        benchmark::Counter(c.flops(), benchmark::Counter::kIsIterationInvariantRate);
  } else {
    state.counters["bytes"] = benchmark::Counter(
        c.kv_bytes(), benchmark::Counter::kIsIterationInvariantRate, benchmark::Counter::kIs1024);
  }
  state.counters["threads"] = setup_threads();
}

#ifdef BACKPLANE_BENCH_LIBTORCH
void AttentionLibTorch(benchmark::State& state, const AttnCase* c) {
  setup_threads();
  Buffers& b = buffers(*c);
  const auto opts = at::TensorOptions().dtype(c->bf16 ? at::kBFloat16 : at::kFloat);
  const at::Tensor q = at::from_blob(b.q.data(), b.qs, opts);
  const at::Tensor k = at::from_blob(b.k.data(), b.ks, opts);
  const at::Tensor v = at::from_blob(b.v.data(), b.ks, opts);
  const bool gqa = c->heads_q != c->heads_kv;
  LoopTimer timer(state);
  timer.start();
  for (auto _ : state) {
    at::Tensor out =
        at::scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, c->causal, std::nullopt, gqa);
    benchmark::DoNotOptimize(out.data_ptr());
  }
  seconds()[std::string("attention/") + c->name + "/libtorch"] = timer.stop();
  add_size_counters(state, *c);
}

// Decoding with GQA: the heads_q / heads_kv query heads of each kv head become that head's rows,
// q [batch, heads_kv, group * seq_q, head_dim] (a view of the same buffer when seq_q is 1), so
// LibTorch runs plain multi-head attention on the un-repeated K and V.
void AttentionLibTorchFolded(benchmark::State& state, const AttnCase* c) {
  setup_threads();
  Buffers& b = buffers(*c);
  const auto opts = at::TensorOptions().dtype(c->bf16 ? at::kBFloat16 : at::kFloat);
  const int64_t group = c->heads_q / c->heads_kv;
  const at::Tensor q =
      at::from_blob(b.q.data(), {c->batch, c->heads_kv, group * c->seq_q, c->head_dim}, opts);
  const at::Tensor k = at::from_blob(b.k.data(), b.ks, opts);
  const at::Tensor v = at::from_blob(b.v.data(), b.ks, opts);
  LoopTimer timer(state);
  timer.start();
  for (auto _ : state) {
    at::Tensor out = at::scaled_dot_product_attention(q, k, v);
    benchmark::DoNotOptimize(out.data_ptr());
  }
  seconds()[std::string("attention/") + c->name + "/libtorch_folded"] = timer.stop();
  add_size_counters(state, *c);
}
#endif

#ifdef BACKPLANE_BENCH_TORCH_BRIDGE
// The cpu plugin has its own copy of the kernels and of their thread pool, which keeps its
// default size (hardware_concurrency): measured only when that is the thread count of the run.
bool plugin_threads_match(benchmark::State& state) {
  if (static_cast<unsigned>(setup_threads()) == std::thread::hardware_concurrency()) return true;
  state.SkipWithError(
      "the cpu plugin's kernels run on hardware_concurrency() threads; "
      "unset BACKPLANE_BENCH_THREADS to compare");
  return false;
}

const backplane::Runtime& plugin_runtime() {
  static const backplane::Runtime runtime = [] {
    backplane::RuntimeOptions options = backplane::RuntimeOptions::from_environment();
    if (!options.only_plugins) options.only_plugins = std::vector<std::string>{"cpu"};
    return backplane::Runtime::open(options);
  }();
  return runtime;
}

// The plugin's sdpa kernel called directly over the DLTensors: the baseline of the bridge, with
// the same copy of the kernels and the same thread pool.
void AttentionBackplanePlugin(benchmark::State& state, const AttnCase* c) {
  if (!plugin_threads_match(state)) return;
  Buffers& b = buffers(*c);
  const backplane::AttentionKernel sdpa =
      plugin_runtime().attention_kernel(backplane::Device("cpu"), "sdpa");
  bp_attention_args args{};
  args.struct_size = sizeof args;
  args.query = &b.tq;
  args.key = &b.tk;
  args.value = &b.tv;
  args.output = &b.tout;
  args.causal = c->causal ? 1 : 0;
  LoopTimer timer(state);
  timer.start();
  for (auto _ : state) {
    sdpa(args);
    benchmark::ClobberMemory();
  }
  seconds()[std::string("attention/") + c->name + "/backplane_plugin"] = timer.stop();
  add_size_counters(state, *c);
}

void AttentionBackplaneTorch(benchmark::State& state, const AttnCase* c) {
  if (!plugin_threads_match(state)) return;
  const backplane::Runtime& runtime = plugin_runtime();
  Buffers& b = buffers(*c);
  const auto opts = at::TensorOptions().dtype(c->bf16 ? at::kBFloat16 : at::kFloat);
  const at::Tensor q = at::from_blob(b.q.data(), b.qs, opts);
  const at::Tensor k = at::from_blob(b.k.data(), b.ks, opts);
  const at::Tensor v = at::from_blob(b.v.data(), b.ks, opts);
  backplane::torch::AttentionArgs args;
  args.causal = c->causal;
  args.out = at::from_blob(b.out.data(), b.os, opts);  // as the direct call: no allocation
  const backplane::torch::Attention attn(runtime, backplane::Device("cpu"), "sdpa");
  LoopTimer timer(state);
  timer.start();
  for (auto _ : state) {
    attn(q, k, v, args);
    benchmark::ClobberMemory();
  }
  const double secs = timer.stop();
  const std::string base = std::string("attention/") + c->name;
  seconds()[base + "/backplane_torch"] = secs;
  add_size_counters(state, *c);
  auto& s = seconds();
  if (s.count(base + "/backplane_plugin") && secs > 0) {
    state.counters["time_vs_plugin"] = secs / s[base + "/backplane_plugin"];
  }
}
#endif

void AttentionBackplane(benchmark::State& state, const AttnCase* c) {
  setup_threads();
  Buffers& b = buffers(*c);
  attn::Tensors t;
  t.query = &b.tq;
  t.key = &b.tk;
  t.value = &b.tv;
  t.output = &b.tout;
  attn::Options o;
  o.causal = c->causal;
  attn::RunInfo info;
  LoopTimer timer(state);
  timer.start();
  for (auto _ : state) {
    const attn::Status s = attn::forward(t, o, &info);
    if (!s.ok()) {
      state.SkipWithError(s.message.c_str());
      break;
    }
    benchmark::ClobberMemory();
  }
  const double secs = timer.stop();
  const std::string base = std::string("attention/") + c->name;
  seconds()[base + "/backplane"] = secs;
  add_size_counters(state, *c);
  state.SetLabel(std::string(info.target) + " " + info.tile_kernel);
  auto& s = seconds();
  if (s.count(base + "/libtorch") && secs > 0) {
    state.counters["speedup_vs_libtorch"] = s[base + "/libtorch"] / secs;
  }
  if (c->kind == Kind::kPrefill && s.count("roofline/sgemm") && secs > 0) {
    const double sgemm = 2.0 * 2048.0 * 2048.0 * 2048.0 / s["roofline/sgemm"];
    state.counters["roofline_fraction"] = c->flops() / secs / sgemm;
  }
  if (c->kind == Kind::kDecode && s.count("roofline/copy") && secs > 0) {
    const double copy = 2.0 * kCopyBytes / s["roofline/copy"];
    state.counters["roofline_fraction"] = c->kv_bytes() / secs / copy;
  }
}

int register_attention() {
  for (const AttnCase& c : kCases) {
    const std::string base = std::string("attention/") + c.name;
#ifdef BACKPLANE_BENCH_LIBTORCH
    benchmark::RegisterBenchmark((base + "/libtorch").c_str(), AttentionLibTorch, &c)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
#endif
    benchmark::RegisterBenchmark((base + "/backplane").c_str(), AttentionBackplane, &c)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    if (c.kind != Kind::kDecode) continue;
#ifdef BACKPLANE_BENCH_LIBTORCH
    benchmark::RegisterBenchmark((base + "/libtorch_folded").c_str(), AttentionLibTorchFolded, &c)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
#endif
#ifdef BACKPLANE_BENCH_TORCH_BRIDGE
    benchmark::RegisterBenchmark((base + "/backplane_plugin").c_str(), AttentionBackplanePlugin, &c)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    benchmark::RegisterBenchmark((base + "/backplane_torch").c_str(), AttentionBackplaneTorch, &c)
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
#endif
  }
  return 0;
}
const int registered = register_attention();

}  // namespace
