// The CUDA layer kernels against the CPU ones on the same inputs. For each op, dtype and shape:
// inputs made on the host, copied to the GPU, the CUDA kernel run, the result copied back and
// compared with the CPU kernel's, element by element, within one unit in the last place of the
// dtype plus float32 noise. Also the bad-argument path (a host tensor handed to a CUDA kernel).
// Prints one line per case; exits 1 on any mismatch.
//
// Two builds of this one program:
// - on an NVIDIA GPU (tests/gpu/layer_kernels_check.sh), with the CUDA runtime;
// - as the ctest layer_kernels_emulated_test (BACKPLANE_GPU_EMULATE), where the kernels' source
//   runs on CPU threads (tests/support/cuda_emulator.hpp) and the shapes too big for that are
//   left out.
#if defined(BACKPLANE_GPU_EMULATE)
#include "cuda_emulator.hpp"
#else
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#endif

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "activation/activation.hpp"
#include "rmsnorm/rmsnorm.hpp"
#include "rotary/rotary.hpp"

namespace {

using backplane::kernels::Status;

enum class Type { kF32, kBF16, kF16 };
const char* type_name(Type t) {
  return t == Type::kF32 ? "f32" : t == Type::kBF16 ? "bf16" : "f16";
}
size_t type_size(Type t) {
  return t == Type::kF32 ? 4 : 2;
}

int failures = 0;

#if defined(BACKPLANE_GPU_EMULATE)
// One CPU thread per GPU thread: a case is left out beyond this many elements. The TSan build
// sets fewer (BACKPLANE_EMULATE_MAX_ELEMENTS, tests/layer_kernels/CMakeLists.txt).
#ifndef BACKPLANE_EMULATE_MAX_ELEMENTS
#define BACKPLANE_EMULATE_MAX_ELEMENTS (int64_t{1} << 16)
#endif
constexpr int64_t kMaxElements = BACKPLANE_EMULATE_MAX_ELEMENTS;
#else
constexpr int64_t kMaxElements = INT64_MAX;
#endif

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "FAIL: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

// A tensor with a host copy and a device copy, compact row-major.
struct Pair {
  Type type;
  std::vector<int64_t> shape;
  std::vector<unsigned char> host;
  void* device = nullptr;
  DLTensor h{}, d{};

  Pair(std::vector<int64_t> dims, Type t, unsigned seed, float scale)
      : type(t), shape(std::move(dims)) {
    int64_t n = 1;
    for (int64_t x : shape) n *= x;
    host.resize(static_cast<size_t>(n) * type_size(t));
    uint32_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; ++i) {
      s = s * 1664525u + 1013904223u;
      set(i, scale * (static_cast<float>(s >> 8) / 8388608.0f - 1.0f));
    }
    check_cuda(cudaMalloc(&device, host.size()), "cudaMalloc");
    upload();
    for (DLTensor* t2 : {&h, &d}) {
      t2->ndim = static_cast<int32_t>(shape.size());
      t2->shape = shape.data();
      t2->dtype = t == Type::kF32    ? DLDataType{kDLFloat, 32, 1}
                  : t == Type::kBF16 ? DLDataType{kDLBfloat, 16, 1}
                                     : DLDataType{kDLFloat, 16, 1};
    }
    h.data = host.data();
    h.device = {kDLCPU, 0};
    d.data = device;
    d.device = {kDLCUDA, 0};
  }
  ~Pair() { cudaFree(device); }
  Pair(const Pair&) = delete;
  Pair& operator=(const Pair&) = delete;

  int64_t size() const { return static_cast<int64_t>(host.size() / type_size(type)); }
  void set(int64_t i, float v) {
    unsigned char* p = host.data() + i * static_cast<int64_t>(type_size(type));
    if (type == Type::kF32) {
      std::memcpy(p, &v, 4);
    } else if (type == Type::kBF16) {
      const __nv_bfloat16 b = __float2bfloat16(v);
      std::memcpy(p, &b, 2);
    } else {
      const __half b = __float2half(v);
      std::memcpy(p, &b, 2);
    }
  }
  static float get(const unsigned char* base, Type type, int64_t i) {
    const unsigned char* p = base + i * static_cast<int64_t>(type_size(type));
    if (type == Type::kF32) {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    if (type == Type::kBF16) {
      __nv_bfloat16 b;
      std::memcpy(&b, p, 2);
      return __bfloat162float(b);
    }
    __half b;
    std::memcpy(&b, p, 2);
    return __half2float(b);
  }
  void upload() {
    check_cuda(cudaMemcpy(device, host.data(), host.size(), cudaMemcpyHostToDevice), "upload");
  }
  std::vector<unsigned char> download() const {
    std::vector<unsigned char> out(host.size());
    check_cuda(cudaMemcpy(out.data(), device, out.size(), cudaMemcpyDeviceToHost), "download");
    return out;
  }
};

// The device copy of `p` against its host copy (which the CPU kernel wrote).
void compare(const std::string& name, const Pair& p) {
  const std::vector<unsigned char> gpu = p.download();
  const double rtol = p.type == Type::kF32 ? 3e-5 : p.type == Type::kBF16 ? 8e-3 : 1e-3;
  int64_t bad = 0, first = -1;
  double worst = 0;
  for (int64_t i = 0; i < p.size(); ++i) {
    const double c = Pair::get(p.host.data(), p.type, i), g = Pair::get(gpu.data(), p.type, i);
    const double err = std::fabs(c - g);
    worst = std::max(worst, err);
    if (!(err <= 1e-5 + rtol * std::fabs(c))) {
      if (first < 0) first = i;
      ++bad;
    }
  }
  if (bad == 0) {
    std::printf("PASS %s (max |cpu - cuda| %.3g)\n", name.c_str(), worst);
    return;
  }
  ++failures;
  std::printf("FAIL %s: %lld of %lld elements differ; first #%lld: cpu %.8g, cuda %.8g\n",
              name.c_str(), static_cast<long long>(bad), static_cast<long long>(p.size()),
              static_cast<long long>(first), Pair::get(p.host.data(), p.type, first),
              Pair::get(gpu.data(), p.type, first));
}

bool ok(const Status& s, const std::string& name) {
  if (s.ok()) return true;
  ++failures;
  std::printf("FAIL %s: %s\n", name.c_str(), s.message.c_str());
  return false;
}

void rmsnorm_cases(Type t) {
  // 3x100: four warps a row in three blocks, the block reduction's __syncthreads in a case small
  // enough for the TSan build (tests/layer_kernels/CMakeLists.txt).
  const std::vector<std::vector<int64_t>> shapes = {{1, 1},    {3, 17},      {3, 100},
                                                    {257, 33}, {4096, 4096}, {7, 8193}};
  for (const auto& shape : shapes) {
    if (shape[0] * shape[1] > kMaxElements) continue;
    for (bool residual : {false, true}) {
      const std::string name = std::string("rms_norm") + (residual ? "+residual " : " ") +
                               std::to_string(shape[0]) + "x" + std::to_string(shape[1]) + " " +
                               type_name(t);
      Pair x(shape, t, 1, 2.0f), w({shape[1]}, t, 2, 1.0f), r(shape, t, 3, 2.0f),
          out(shape, t, 4, 0.0f);
      const backplane::rmsnorm::Tensors host{&x.h, &w.h, residual ? &r.h : nullptr, &out.h};
      const backplane::rmsnorm::Tensors dev{&x.d, &w.d, residual ? &r.d : nullptr, &out.d};
      if (!ok(backplane::rmsnorm::forward_cuda(dev, 1e-6, nullptr), name)) continue;
      check_cuda(cudaDeviceSynchronize(), name.c_str());
      if (!ok(backplane::rmsnorm::forward_cpu(host, 1e-6), name + " (cpu)")) continue;
      compare(name, out);
      if (residual) compare(name + " residual", r);
      // The backward from an output gradient (with the residual add: its gradient too), against
      // the CPU backward; x is the rows the forward normalized.
      const std::string bname = "rms_norm_backward" + name.substr(name.find(' '));
      const Pair& rows = residual ? r : x;
      Pair g(shape, t, 7, 1.0f), gres(shape, t, 8, 1.0f), gx(shape, t, 9, 0.0f),
          gw({shape[1]}, t, 10, 0.0f);
      const backplane::rmsnorm::BackwardTensors bhost{
          &g.h, &rows.h, &w.h, residual ? &gres.h : nullptr, &gx.h, &gw.h};
      const backplane::rmsnorm::BackwardTensors bdev{
          &g.d, &rows.d, &w.d, residual ? &gres.d : nullptr, &gx.d, &gw.d};
      if (!ok(backplane::rmsnorm::backward_cuda(bdev, 1e-6, nullptr), bname)) continue;
      check_cuda(cudaDeviceSynchronize(), bname.c_str());
      if (!ok(backplane::rmsnorm::backward_cpu(bhost, 1e-6), bname + " (cpu)")) continue;
      compare(bname + " grad_input", gx);
      compare(bname + " grad_weight", gw);
    }
  }
}

void activation_cases(Type t) {
  using backplane::activation::Activation;
  const std::vector<std::vector<int64_t>> shapes = {{1, 2}, {3, 34}, {300, 66}, {2048, 22016}};
  for (Activation a : {Activation::kSilu, Activation::kGelu, Activation::kGeluTanh}) {
    for (const auto& shape : shapes) {
      if (shape[0] * shape[1] > kMaxElements) continue;
      const std::string name = std::string(backplane::activation::op_name(a)) + " " +
                               std::to_string(shape[0]) + "x" + std::to_string(shape[1]) + " " +
                               type_name(t);
      Pair x(shape, t, 5, 6.0f), out({shape[0], shape[1] / 2}, t, 6, 0.0f);
      if (!ok(backplane::activation::forward_cuda(a, &x.d, &out.d, nullptr), name)) continue;
      check_cuda(cudaDeviceSynchronize(), name.c_str());
      if (!ok(backplane::activation::forward_cpu(a, &x.h, &out.h), name + " (cpu)")) continue;
      compare(name, out);
      // The backward, from an output gradient, against the CPU backward.
      const std::string bname =
          std::string(backplane::activation::backward_op_name(a)) + name.substr(name.find(' '));
      Pair grad({shape[0], shape[1] / 2}, t, 11, 2.0f), grad_input(shape, t, 12, 0.0f);
      if (!ok(backplane::activation::backward_cuda(a, &grad.d, &x.d, &grad_input.d, nullptr),
              bname)) {
        continue;
      }
      check_cuda(cudaDeviceSynchronize(), bname.c_str());
      if (!ok(backplane::activation::backward_cpu(a, &grad.h, &x.h, &grad_input.h),
              bname + " (cpu)")) {
        continue;
      }
      compare(bname, grad_input);
    }
  }
}

void rotary_cases(Type t) {
  using backplane::rotary::Style;
  struct Shape {
    int64_t b, hq, hk, s, d, rot;
  };
  const Shape shapes[] = {{1, 1, 1, 1, 2, 2},
                          {2, 4, 2, 7, 64, 64},
                          {1, 3, 1, 5, 24, 16},
                          {2, 2, 2, 9, 130, 130},
                          {1, 32, 32, 2048, 128, 128}};
  // cos and sin in float32, and (transformers' layout) in the query's dtype.
  const std::vector<Type> tables =
      t == Type::kF32 ? std::vector<Type>{t} : std::vector<Type>{Type::kF32, t};
  for (Style style : {Style::kNeox, Style::kInterleaved}) {
    for (const Shape& s : shapes) {
      for (Type table : tables) {
        if (s.b * (s.hq + s.hk) * s.s * s.d > kMaxElements) continue;
        const std::string name =
            std::string("rotary ") + (style == Style::kNeox ? "neox " : "interleaved ") +
            std::to_string(s.b) + "x" + std::to_string(s.hq) + "/" + std::to_string(s.hk) + "x" +
            std::to_string(s.s) + "x" + std::to_string(s.d) + " rot" + std::to_string(s.rot) + " " +
            type_name(t) + " (" + type_name(table) + " table)";
        Pair q({s.b, s.hq, s.s, s.d}, t, 7, 2.0f), k({s.b, s.hk, s.s, s.d}, t, 8, 2.0f);
        Pair cos({s.s, s.rot / 2}, table, 9, 1.0f), sin({s.s, s.rot / 2}, table, 10, 1.0f);
        const backplane::rotary::Tensors host{&q.h, &k.h, &cos.h, &sin.h};
        const backplane::rotary::Tensors dev{&q.d, &k.d, &cos.d, &sin.d};
        if (!ok(backplane::rotary::forward_cuda(dev, style, nullptr), name)) continue;
        check_cuda(cudaDeviceSynchronize(), name.c_str());
        if (!ok(backplane::rotary::forward_cpu(host, style), name + " (cpu)")) continue;
        compare(name + " query", q);
        compare(name + " key", k);
        // The backward (the rotation back), on the rotated values as gradients.
        if (!ok(backplane::rotary::backward_cuda(dev, style, nullptr), name + " backward"))
          continue;
        check_cuda(cudaDeviceSynchronize(), (name + " backward").c_str());
        if (!ok(backplane::rotary::backward_cpu(host, style), name + " backward (cpu)")) continue;
        compare(name + " backward query", q);
        compare(name + " backward key", k);
      }
    }
  }
}

void refusal_case() {
  Pair x({2, 8}, Type::kF32, 1, 1.0f), w({8}, Type::kF32, 2, 1.0f),
      out({2, 8}, Type::kF32, 3, 0.0f);
  const Status s = backplane::rmsnorm::forward_cuda({&x.h, &w.d, nullptr, &out.d}, 1e-6, nullptr);
  if (s.ok() || s.message.find("input is on device kDLCPU") == std::string::npos) {
    ++failures;
    std::printf("FAIL host tensor refused: got '%s'\n", s.message.c_str());
  } else {
    std::printf("PASS host tensor refused: %s\n", s.message.c_str());
  }
}

}  // namespace

int main() {
#if defined(BACKPLANE_GPU_EMULATE)
  std::printf("== the CUDA kernels' source on CPU threads (cuda_emulator.hpp)\n");
#else
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "FAIL: no CUDA device\n");
    return 1;
  }
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("== %s, compute capability %d.%d\n", prop.name, prop.major, prop.minor);
#endif
  for (Type t : {Type::kF32, Type::kBF16, Type::kF16}) {
    rmsnorm_cases(t);
    activation_cases(t);
    rotary_cases(t);
  }
  refusal_case();
  std::printf("== %s: %d failure(s)\n", failures ? "FAIL" : "PASS", failures);
  return failures ? 1 : 0;
}
