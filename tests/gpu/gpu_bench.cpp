// backplane's CUDA kernels timed on cuda:0 with CUDA events, for torch_peers.py to set beside
// PyTorch's on the same GPU in the same run (run_all.sh). Each case: the inputs made once on the
// device (random, fixed seed), 3 untimed calls, then 7 rounds of `reps` calls each between two
// events; the median round, per call. Outputs are preallocated (PyTorch's caching allocator
// makes its allocations about free on a GPU, so both sides time the kernel).
//
// Prints one JSON object per line on stdout:
//   {"case": "rmsnorm/4096x4096/bf16", "ms": 0.071, "flops": 0, "bytes": 67108864, "shape": [...]}
// `flops` and `bytes` are what the case must compute and move at least (for TFLOP/s and GB/s).
// A case that fails prints {"case": ..., "error": "..."} and the program exits 1.
//
// Attention runs through the cuda plugin (Runtime::attention_kernel, as a host application
// calls it); the layer kernels are called directly (kernels/<op>/<op>.hpp), as the in-tree
// packages' libraries call them.
#include <cuda_runtime_api.h>
#include <backplane/error.hpp>
#include <backplane/runtime/kernels.hpp>
#include <backplane/runtime/runtime.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "activation/activation.hpp"
#include "rmsnorm/rmsnorm.hpp"
#include "rotary/rotary.hpp"

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorName(status) + ": " +
                             cudaGetErrorString(status));
  }
}

void check(const backplane::kernels::Status& status, const char* what) {
  if (!status.ok()) throw std::runtime_error(std::string(what) + ": " + status.message);
}

enum class DType { kF32, kBf16, kF16 };

const char* name_of(DType t) {
  return t == DType::kF32 ? "f32" : t == DType::kBf16 ? "bf16" : "f16";
}

size_t bytes_of(DType t) {
  return t == DType::kF32 ? 4 : 2;
}

uint16_t to_bits(float f, DType t) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  if (t == DType::kBf16) return static_cast<uint16_t>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
  // float16 for values of magnitude below 8 (these inputs): round the mantissa, rebias.
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  const uint32_t abs = b & 0x7fffffffu;
  if (abs < 0x38800000u) return sign;
  uint32_t r = abs - (112u << 23);
  r += 0xfffu + ((r >> 13) & 1u);
  return static_cast<uint16_t>(sign | (r >> 13));
}

// A compact row-major tensor in device memory.
class DeviceTensor {
 public:
  DeviceTensor(std::vector<int64_t> shape, DType dtype, unsigned seed, float scale = 1.0f)
      : shape_(std::move(shape)) {
    int64_t n = 1;
    for (int64_t d : shape_) n *= d;
    count_ = static_cast<size_t>(n);
    bytes_ = count_ * bytes_of(dtype);
    check(cudaMalloc(&data_, std::max<size_t>(bytes_, 1)), "cudaMalloc");
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, scale);
    if (dtype == DType::kF32) {
      std::vector<float> host(count_);
      for (float& x : host) x = normal(rng);
      check(cudaMemcpy(data_, host.data(), bytes_, cudaMemcpyHostToDevice), "cudaMemcpy");
    } else {
      std::vector<uint16_t> host(count_);
      for (uint16_t& x : host) x = to_bits(normal(rng), dtype);
      check(cudaMemcpy(data_, host.data(), bytes_, cudaMemcpyHostToDevice), "cudaMemcpy");
    }
    dl_.data = data_;
    dl_.device = {kDLCUDA, 0};
    dl_.ndim = static_cast<int32_t>(shape_.size());
    dl_.dtype = dtype == DType::kF32    ? DLDataType{kDLFloat, 32, 1}
                : dtype == DType::kBf16 ? DLDataType{kDLBfloat, 16, 1}
                                        : DLDataType{kDLFloat, 16, 1};
    dl_.shape = shape_.data();
  }
  ~DeviceTensor() { cudaFree(data_); }
  DeviceTensor(const DeviceTensor&) = delete;
  DeviceTensor& operator=(const DeviceTensor&) = delete;

  const DLTensor* dl() const { return &dl_; }
  size_t bytes() const { return bytes_; }

 private:
  std::vector<int64_t> shape_;
  size_t count_ = 0;
  size_t bytes_ = 0;
  void* data_ = nullptr;
  DLTensor dl_{};
};

std::string shape_json(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

class Bench {
 public:
  explicit Bench(cudaStream_t stream) : stream_(stream) {
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~Bench() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }

  // Times `call` (which queues one kernel on the stream); prints the case's line.
  void run(const std::string& name, const std::vector<int64_t>& shape, double flops, double bytes,
           int reps, const std::function<void()>& call) {
    try {
      for (int i = 0; i < 3; ++i) call();
      check(cudaStreamSynchronize(stream_), "warm-up");
      std::vector<float> rounds;
      for (int r = 0; r < 7; ++r) {
        check(cudaEventRecord(start_, stream_), "cudaEventRecord");
        for (int i = 0; i < reps; ++i) call();
        check(cudaEventRecord(stop_, stream_), "cudaEventRecord");
        check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
        float ms = 0;
        check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
        rounds.push_back(ms / static_cast<float>(reps));
      }
      std::sort(rounds.begin(), rounds.end());
      std::printf(
          "{\"case\": \"%s\", \"ms\": %.6f, \"flops\": %.0f, \"bytes\": %.0f, \"shape\": %s}\n",
          name.c_str(), static_cast<double>(rounds[rounds.size() / 2]), flops, bytes,
          shape_json(shape).c_str());
    } catch (const std::exception& e) {
      std::string message = e.what();
      std::replace(message.begin(), message.end(), '"', '\'');
      std::printf("{\"case\": \"%s\", \"error\": \"%s\"}\n", name.c_str(), message.c_str());
      ++failures;
    }
    std::fflush(stdout);
  }

  int failures = 0;

 private:
  cudaStream_t stream_;
  cudaEvent_t start_, stop_;
};

void attention_cases(Bench& bench, const backplane::Runtime& runtime, cudaStream_t stream) {
  struct Shape {
    const char* label;
    int64_t b, hq, hkv, sq, sk, d;
    bool causal;
  };
  const Shape shapes[] = {
      {"prefill", 1, 32, 32, 4096, 4096, 128, true},
      {"prefill", 1, 32, 8, 2048, 2048, 128, false},
      {"decode", 8, 32, 8, 1, 4096, 128, false},
  };
  for (const char* implementation : {"flash_attention_2", "sdpa"}) {
    for (const Shape& s : shapes) {
      const std::string name = std::string("attention/") + implementation + "/" + s.label + "_b" +
                               std::to_string(s.b) + "_hq" + std::to_string(s.hq) + "_hkv" +
                               std::to_string(s.hkv) + "_sq" + std::to_string(s.sq) + "_sk" +
                               std::to_string(s.sk) + "_d" + std::to_string(s.d) +
                               (s.causal ? "_causal" : "") + "/bf16";
      DeviceTensor q({s.b, s.hq, s.sq, s.d}, DType::kBf16, 1),
          k({s.b, s.hkv, s.sk, s.d}, DType::kBf16, 2), v({s.b, s.hkv, s.sk, s.d}, DType::kBf16, 3),
          out({s.b, s.hq, s.sq, s.d}, DType::kBf16, 4);
      backplane::AttentionArguments call;
      call.query = q.dl();
      call.key = k.dl();
      call.value = v.dl();
      call.output = out.dl();
      call.causal = s.causal;
      call.stream = stream;
      // Causal prefill computes about half of the score matrix (bottom-right aligned).
      const double pairs = static_cast<double>(s.sq) * static_cast<double>(s.sk) *
                           (s.causal && s.sq == s.sk ? 0.5 : 1.0);
      const double flops = 4.0 * static_cast<double>(s.b * s.hq) * pairs * static_cast<double>(s.d);
      const double bytes = static_cast<double>(q.bytes() + k.bytes() + v.bytes() + out.bytes());
      try {
        const backplane::AttentionKernel kernel =
            runtime.attention_kernel(backplane::Device("cuda", 0), implementation);
        bench.run(name, {s.b, s.hq, s.hkv, s.sq, s.sk, s.d}, flops, bytes, s.sq == 1 ? 50 : 10,
                  [&] { kernel(call); });
      } catch (const backplane::Error& e) {
        std::string message = e.what();
        std::replace(message.begin(), message.end(), '"', '\'');
        std::printf("{\"case\": \"%s\", \"error\": \"%s\"}\n", name.c_str(), message.c_str());
        ++bench.failures;
      }
    }
  }
}

void layer_cases(Bench& bench, cudaStream_t stream) {
  using backplane::activation::Activation;
  for (DType t : {DType::kBf16, DType::kF32}) {
    const std::string dtype = name_of(t);
    {  // RMSNorm over a [4096, 4096] activation: one read, one write of it.
      DeviceTensor x({4096, 4096}, t, 5), w({4096}, t, 6), out({4096, 4096}, t, 7);
      const backplane::rmsnorm::Tensors tensors{x.dl(), w.dl(), nullptr, out.dl()};
      bench.run("rmsnorm/4096x4096/" + dtype, {4096, 4096}, 0,
                static_cast<double>(x.bytes() + out.bytes()), 50, [&] {
                  check(backplane::rmsnorm::forward_cuda(tensors, 1e-6, stream), "rms_norm");
                });
    }
    {  // SiLU-and-mul of a Llama MLP: [4096, 2 x 11008] -> [4096, 11008].
      DeviceTensor x({4096, 22016}, t, 8), out({4096, 11008}, t, 9);
      bench.run(
          "silu_and_mul/4096x22016/" + dtype, {4096, 22016}, 0,
          static_cast<double>(x.bytes() + out.bytes()), 20, [&] {
            check(backplane::activation::forward_cuda(Activation::kSilu, x.dl(), out.dl(), stream),
                  "silu_and_mul");
          });
    }
    {  // Rotary (neox) on q and k [1, 32, 4096, 128], in place, float32 cos/sin [4096, 64].
      DeviceTensor q({1, 32, 4096, 128}, t, 10), k({1, 32, 4096, 128}, t, 11),
          cos({4096, 64}, DType::kF32, 12), sin({4096, 64}, DType::kF32, 13);
      const backplane::rotary::Tensors tensors{q.dl(), k.dl(), cos.dl(), sin.dl()};
      bench.run(
          "rotary/1x32x4096x128/" + dtype, {1, 32, 4096, 128}, 0,
          2.0 * static_cast<double>(q.bytes() + k.bytes()), 50, [&] {
            check(backplane::rotary::forward_cuda(tensors, backplane::rotary::Style::kNeox, stream),
                  "rotary_embedding");
          });
    }
  }
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "gpu_bench: no CUDA device\n");
    return 1;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::fprintf(stderr, "gpu_bench: %s, compute capability %d.%d\n", prop.name, prop.major,
               prop.minor);
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  Bench bench(stream);
  try {
    const backplane::Runtime runtime = backplane::Runtime::open();
    attention_cases(bench, runtime, stream);
    layer_cases(bench, stream);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpu_bench: %s\n", e.what());
    return 1;
  }
  cudaStreamDestroy(stream);
  return bench.failures == 0 ? 0 : 1;
}
