// The GPU attention kernels on a real NVIDIA GPU (run by attention_check.sh): each case runs
// through the plugin ABI (Runtime::attention_kernel on cuda:0) and is compared with the CPU
// plugin's sdpa kernel in float32 on the same bf16/fp16 values. Prints PASS/FAIL per case with
// the largest absolute error and its tolerance, then the prefill throughput; exits 1 on any
// failure. Each case that fits (kLargestBackward) is then run backward too: a forward that
// writes the logsumexp and the implementation's attention_backward, against the CPU plugin's
// sdpa forward and backward in float32.
#include <cuda_runtime_api.h>
#include <backplane/error.hpp>
#include <backplane/runtime/kernels.hpp>
#include <backplane/runtime/runtime.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

enum class DType { kF32, kBf16, kF16 };
enum class Mask { kNone, kBool, kAdditiveF32, kAdditiveSame };
// How q, k and v (and the output, for kTransposed) sit in memory.
enum class Layout {
  kCompact,     // [b, h, s, d]
  kTransposed,  // [b, s, h, d] memory, as a projection's output viewed per head
  kPadded,      // rows of d + 8 elements
  kDimStride2,  // every other element: no 16-byte copies
};

const char* dtype_name(DType t) {
  return t == DType::kF32 ? "f32" : t == DType::kBf16 ? "bf16" : "f16";
}

DLDataType dl_dtype(DType t) {
  if (t == DType::kF32) return {kDLFloat, 32, 1};
  if (t == DType::kBf16) return {kDLBfloat, 16, 1};
  return {kDLFloat, 16, 1};
}

size_t dtype_bytes(DType t) {
  return t == DType::kF32 ? 4 : 2;
}

// ---- float <-> bf16 / fp16 bits (round to nearest even) ----
uint16_t to_bf16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  if ((b & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((b >> 16) | 0x40u);
  b += 0x7fffu + ((b >> 16) & 1u);
  return static_cast<uint16_t>(b >> 16);
}
float from_bf16(uint16_t h) {
  const uint32_t b = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
// Only normal values and zero occur in these inputs; outputs are read back with from_f16.
uint16_t to_f16(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((b >> 16) & 0x8000u);
  const uint32_t abs = b & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);
  if (abs < 0x38800000u) return sign;  // flush the tiny values of these inputs to zero
  uint32_t r = abs - (112u << 23);
  r += 0xfffu + ((r >> 13) & 1u);
  return static_cast<uint16_t>(sign | (r >> 13));
}
float from_f16(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  uint32_t b;
  if (exp == 0x1f) {
    b = sign | 0x7f800000u | (mant << 13);
  } else if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  } else {
    b = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Rounds x to the dtype and back: the value the GPU will read.
float quantize(float x, DType t) {
  if (t == DType::kBf16) return from_bf16(to_bf16(x));
  if (t == DType::kF16) return from_f16(to_f16(x));
  return x;
}

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "FATAL: %s: %s\n", what, cudaGetErrorString(e));
    std::exit(2);
  }
}

// A logical [n0, n1, n2, n3] tensor: float values (compact), and a device copy in `layout`.
struct Tensor {
  int64_t shape[4] = {0, 0, 0, 0};
  int64_t strides[4] = {0, 0, 0, 0};
  DType dtype = DType::kF32;
  std::vector<float> values;  // compact [n0, n1, n2, n3], already quantized
  void* device = nullptr;
  size_t device_bytes = 0;
  DLTensor dl{};
  DLTensor cpu{};  // the float32 host view for the reference

  Tensor(const int64_t (&s)[4], DType t, Layout layout) : dtype(t) {
    std::copy(s, s + 4, shape);
    const int64_t n0 = s[0], n1 = s[1], n2 = s[2], n3 = s[3];
    int64_t span = n0 * n1 * n2 * n3;
    switch (layout) {
      case Layout::kCompact:
        strides[0] = n1 * n2 * n3, strides[1] = n2 * n3, strides[2] = n3, strides[3] = 1;
        break;
      case Layout::kTransposed:
        strides[0] = n2 * n1 * n3, strides[1] = n3, strides[2] = n1 * n3, strides[3] = 1;
        break;
      case Layout::kPadded:
        strides[0] = n1 * n2 * (n3 + 8), strides[1] = n2 * (n3 + 8), strides[2] = n3 + 8;
        strides[3] = 1;
        span = n0 * n1 * n2 * (n3 + 8);
        break;
      case Layout::kDimStride2:
        strides[0] = n1 * n2 * n3 * 2, strides[1] = n2 * n3 * 2, strides[2] = n3 * 2;
        strides[3] = 2;
        span *= 2;
        break;
    }
    values.assign(static_cast<size_t>(n0 * n1 * n2 * n3), 0.0f);
    device_bytes = static_cast<size_t>(std::max<int64_t>(span, 1)) * dtype_bytes(t);
    check_cuda(cudaMalloc(&device, device_bytes), "cudaMalloc");
    check_cuda(cudaMemset(device, 0xff, device_bytes), "cudaMemset");  // NaN in every dtype
    dl.data = device;
    dl.device = {kDLCUDA, 0};
    dl.ndim = 4;
    dl.dtype = dl_dtype(t);
    dl.shape = shape;
    dl.strides = strides;
    cpu.data = values.data();
    cpu.device = {kDLCPU, 0};
    cpu.ndim = 4;
    cpu.dtype = {kDLFloat, 32, 1};
    cpu.shape = shape;
  }
  ~Tensor() { cudaFree(device); }
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;

  size_t offset(int64_t a, int64_t b, int64_t c, int64_t d) const {
    return static_cast<size_t>(a * strides[0] + b * strides[1] + c * strides[2] + d * strides[3]);
  }
  template <class Fn>
  void each(Fn fn) const {
    size_t i = 0;
    for (int64_t a = 0; a < shape[0]; ++a)
      for (int64_t b = 0; b < shape[1]; ++b)
        for (int64_t c = 0; c < shape[2]; ++c)
          for (int64_t d = 0; d < shape[3]; ++d) fn(i++, offset(a, b, c, d));
  }

  void fill(const std::function<float(size_t)>& make) {
    for (size_t i = 0; i < values.size(); ++i) values[i] = quantize(make(i), dtype);
    std::vector<unsigned char> host(device_bytes, 0xff);
    each([&](size_t i, size_t off) {
      if (dtype == DType::kF32) {
        std::memcpy(host.data() + off * 4, &values[i], 4);
      } else {
        const uint16_t bits = dtype == DType::kBf16 ? to_bf16(values[i]) : to_f16(values[i]);
        std::memcpy(host.data() + off * 2, &bits, 2);
      }
    });
    check_cuda(cudaMemcpy(device, host.data(), device_bytes, cudaMemcpyHostToDevice), "upload");
  }

  // The device values in compact order, as float.
  std::vector<float> download() const {
    std::vector<unsigned char> host(device_bytes);
    check_cuda(cudaMemcpy(host.data(), device, device_bytes, cudaMemcpyDeviceToHost), "download");
    std::vector<float> out(values.size());
    each([&](size_t i, size_t off) {
      if (dtype == DType::kF32) {
        std::memcpy(&out[i], host.data() + off * 4, 4);
      } else {
        uint16_t bits;
        std::memcpy(&bits, host.data() + off * 2, 2);
        out[i] = dtype == DType::kBf16 ? from_bf16(bits) : from_f16(bits);
      }
    });
    return out;
  }
};

struct Case {
  std::string name;
  std::string impl = "flash_attention_2";
  DType dtype = DType::kBf16;
  int64_t b = 1, hq = 2, hkv = 2, sq = 64, sk = 64, d = 64, dv = 0;  // dv 0: d
  bool causal = false;
  Mask mask = Mask::kNone;
  Layout layout = Layout::kCompact;
  std::string expect_error;  // non-empty: the call must fail with this text
};

double tolerance(DType t) {
  return t == DType::kF32 ? 2e-4 : t == DType::kBf16 ? 2.5e-2 : 4e-3;
}

// The backward is checked on every case up to this many score entries (batch x heads x
// seq_q x seq_k): the longest sequences only forward, as the backward kernel is reference-grade.
constexpr int64_t kLargestBackward = int64_t{1} << 27;

struct Checker {
  const backplane::Runtime& runtime;
  cudaStream_t stream;
  std::mt19937 rng{1234};
  int failures = 0;
  int passed = 0;

  void run(const Case& c) {
    const int64_t dv = c.dv ? c.dv : c.d;
    std::normal_distribution<float> normal(0.0f, 1.0f);
    Tensor q({c.b, c.hq, c.sq, c.d}, c.dtype, c.layout);
    Tensor k({c.b, c.hkv, c.sk, c.d}, c.dtype, c.layout);
    Tensor v({c.b, c.hkv, c.sk, dv}, c.dtype, c.layout);
    Tensor out({c.b, c.hq, c.sq, dv}, c.dtype,
               c.layout == Layout::kTransposed ? Layout::kTransposed : Layout::kCompact);
    for (Tensor* t : {&q, &k, &v}) t->fill([&](size_t) { return normal(rng); });

    // Masks: bool [b, 1, sq, sk] with ~25% dropped and query row 0 fully masked; additive
    // float32 [sq, sk]; additive in the dtype [1, hq, 1, sk] hiding the last quarter of the
    // keys from odd heads (padding).
    std::unique_ptr<Tensor> mask;
    std::vector<uint8_t> keep;  // the bool mask's host copy (uint8 on both sides)
    void* bool_device = nullptr;
    DLTensor bool_dl{}, bool_cpu{};
    int64_t bool_shape[4] = {c.b, 1, c.sq, c.sk};
    if (c.mask == Mask::kBool) {
      keep.resize(static_cast<size_t>(c.b * c.sq * c.sk));
      std::bernoulli_distribution kept(0.75);
      for (size_t i = 0; i < keep.size(); ++i) {
        const int64_t row = static_cast<int64_t>(i / static_cast<size_t>(c.sk)) % c.sq;
        keep[i] = row == 0 ? 0 : kept(rng);
      }
      check_cuda(cudaMalloc(&bool_device, std::max<size_t>(keep.size(), 1)), "cudaMalloc mask");
      check_cuda(cudaMemcpy(bool_device, keep.data(), keep.size(), cudaMemcpyHostToDevice),
                 "upload mask");
      bool_dl.data = bool_device;
      bool_dl.device = {kDLCUDA, 0};
      bool_dl.ndim = 4;
      bool_dl.dtype = {kDLUInt, 8, 1};
      bool_dl.shape = bool_shape;
      bool_cpu = bool_dl;
      bool_cpu.data = keep.data();
      bool_cpu.device = {kDLCPU, 0};
    } else if (c.mask == Mask::kAdditiveF32) {
      const int64_t shape[4] = {1, 1, c.sq, c.sk};
      mask = std::make_unique<Tensor>(shape, DType::kF32, Layout::kCompact);
      std::uniform_real_distribution<float> bias(-3.0f, 1.0f);
      mask->fill([&](size_t) { return bias(rng); });
    } else if (c.mask == Mask::kAdditiveSame) {
      const int64_t shape[4] = {1, c.hq, 1, c.sk};
      mask = std::make_unique<Tensor>(shape, c.dtype, Layout::kCompact);
      const int64_t sk = c.sk, hidden_from = c.sk - c.sk / 4;
      mask->fill([&](size_t i) {
        const int64_t head = static_cast<int64_t>(i) / sk, key = static_cast<int64_t>(i) % sk;
        return head % 2 == 1 && key >= hidden_from ? -INFINITY : 0.5f * static_cast<float>(key % 3);
      });
    }
    const DLTensor* gpu_mask = c.mask == Mask::kBool ? &bool_dl : mask ? &mask->dl : nullptr;
    const DLTensor* cpu_mask = c.mask == Mask::kBool ? &bool_cpu : mask ? &mask->cpu : nullptr;

    bp_attention_args args{};
    args.struct_size = sizeof args;
    args.query = &q.dl;
    args.key = &k.dl;
    args.value = &v.dl;
    args.mask = gpu_mask;
    args.output = &out.dl;
    args.causal = c.causal ? 1 : 0;
    args.stream = stream;

    std::string error;
    try {
      runtime.attention_kernel(backplane::Device("cuda", 0), c.impl)(args);
      check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    } catch (const backplane::Error& e) {
      error = e.what();
    }
    if (!c.expect_error.empty()) {
      if (bool_device) cudaFree(bool_device);
      const bool ok = error.find(c.expect_error) != std::string::npos;
      report(c, ok,
             ok ? "refused: " + error
                : "expected an error with '" + c.expect_error + "', got " +
                      (error.empty() ? "success" : error));
      return;
    }
    if (!error.empty() || c.b == 0) {
      if (bool_device) cudaFree(bool_device);
      report(c, error.empty(), error.empty() ? "empty batch: success" : error);
      return;
    }

    // The reference: the CPU plugin's sdpa in float32 on the same (quantized) values.
    std::vector<float> expected(out.values.size());
    DLTensor ref_out = out.cpu;
    ref_out.data = expected.data();
    bp_attention_args ref{};
    ref.struct_size = sizeof ref;
    ref.query = &q.cpu;
    ref.key = &k.cpu;
    ref.value = &v.cpu;
    ref.mask = cpu_mask;
    ref.output = &ref_out;
    ref.causal = args.causal;
    runtime.attention_kernel(backplane::Device("cpu"), "sdpa")(ref);

    const std::vector<float> got = out.download();
    double worst = 0.0;
    size_t bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double err = std::fabs(static_cast<double>(got[i]) - expected[i]);
      if (!(err <= tolerance(c.dtype))) ++bad;  // NaN (an unwritten element) counts
      if (!(err <= worst)) worst = std::isnan(err) ? INFINITY : err;
    }
    char text[160];
    std::snprintf(text, sizeof text, "max abs err %.3g (tolerance %.3g)%s", worst,
                  tolerance(c.dtype), bad ? (", " + std::to_string(bad) + " bad").c_str() : "");
    report(c, bad == 0, text);
    if (c.b * c.hq * c.sq * std::max<int64_t>(c.sk, 1) <= kLargestBackward) {
      run_backward(c, q, k, v, gpu_mask, cpu_mask);
    }
    if (bool_device) cudaFree(bool_device);
  }

  // The backward through the same implementation's attention_backward: a forward that writes
  // the logsumexp, then the gradients of a random output gradient (in the case's layout), against
  // the CPU plugin's sdpa forward and backward in float32 on the same values. The gradients are
  // compared relative to the largest of each: dK and dV sum over the query rows.
  void run_backward(const Case& c, const Tensor& q, const Tensor& k, const Tensor& v,
                    const DLTensor* gpu_mask, const DLTensor* cpu_mask) {
    Case b = c;
    b.name = c.name + " backward";
    const backplane::AttentionKernel kernel =
        runtime.attention_kernel(backplane::Device("cuda", 0), c.impl);
    if (!kernel.has_backward()) {
      report(b, false, "the cuda plugin registered no attention_backward for " + c.impl);
      return;
    }
    const int64_t dv = v.shape[3];
    std::normal_distribution<float> normal(0.0f, 1.0f);
    Tensor out({c.b, c.hq, c.sq, dv}, c.dtype,
               c.layout == Layout::kTransposed ? Layout::kTransposed : Layout::kCompact);
    Tensor lse({c.b, c.hq, c.sq, 1}, DType::kF32, Layout::kCompact);
    lse.dl.ndim = lse.cpu.ndim = 3;  // float32 [batch, heads_q, seq_q]
    Tensor grad_out({c.b, c.hq, c.sq, dv}, c.dtype, c.layout);
    Tensor gq(q.shape, c.dtype, c.layout), gk(k.shape, c.dtype, c.layout),
        gv(v.shape, c.dtype, c.layout);
    grad_out.fill([&](size_t) { return normal(rng); });

    backplane::AttentionArguments fwd;
    fwd.query = &q.dl, fwd.key = &k.dl, fwd.value = &v.dl, fwd.mask = gpu_mask;
    fwd.output = &out.dl, fwd.logsumexp = &lse.dl, fwd.causal = c.causal, fwd.stream = stream;
    backplane::AttentionBackwardArguments bwd;
    bwd.query = &q.dl, bwd.key = &k.dl, bwd.value = &v.dl, bwd.mask = gpu_mask;
    bwd.output = &out.dl, bwd.logsumexp = &lse.dl, bwd.grad_output = &grad_out.dl;
    bwd.grad_query = &gq.dl, bwd.grad_key = &gk.dl, bwd.grad_value = &gv.dl;
    bwd.causal = c.causal, bwd.stream = stream;
    try {
      kernel(fwd);
      kernel.backward(bwd);
      check_cuda(cudaStreamSynchronize(stream), "cudaStreamSynchronize (backward)");
    } catch (const backplane::Error& e) {
      report(b, false, e.what());
      return;
    }

    // The reference, in float32 on the CPU, into host copies of the same shapes.
    std::vector<float> ref_out(out.values.size()), ref_lse(lse.values.size()),
        ref_gq(q.values.size()), ref_gk(k.values.size()), ref_gv(v.values.size());
    auto view = [](const Tensor& t, std::vector<float>& data) {
      DLTensor d = t.cpu;
      d.data = data.data();
      return d;
    };
    const DLTensor cpu_out = view(out, ref_out), cpu_lse = view(lse, ref_lse),
                   cpu_gq = view(q, ref_gq), cpu_gk = view(k, ref_gk), cpu_gv = view(v, ref_gv);
    const backplane::AttentionKernel reference =
        runtime.attention_kernel(backplane::Device("cpu"), "sdpa");
    backplane::AttentionArguments rf = fwd;
    rf.query = &q.cpu, rf.key = &k.cpu, rf.value = &v.cpu, rf.mask = cpu_mask;
    rf.output = &cpu_out, rf.logsumexp = &cpu_lse, rf.stream = nullptr;
    reference(rf);
    backplane::AttentionBackwardArguments rb;
    rb.query = &q.cpu, rb.key = &k.cpu, rb.value = &v.cpu, rb.mask = cpu_mask;
    rb.output = &cpu_out, rb.logsumexp = &cpu_lse, rb.grad_output = &grad_out.cpu;
    rb.grad_query = &cpu_gq, rb.grad_key = &cpu_gk, rb.grad_value = &cpu_gv;
    rb.causal = c.causal;
    reference.backward(rb);

    // The logsumexp within 1e-3 relative (rows that see no key: -inf on both sides), each
    // gradient within the dtype's tolerance times its largest magnitude (NaN: unwritten).
    const std::vector<float> got_lse = lse.download();
    size_t bad_lse = 0;
    for (size_t i = 0; i < got_lse.size(); ++i) {
      const bool same = got_lse[i] == ref_lse[i];  // equal infinities included
      if (!same && !(std::fabs(got_lse[i] - ref_lse[i]) <= 1e-3 * (1.0 + std::fabs(ref_lse[i]))))
        ++bad_lse;
    }
    std::string detail = bad_lse ? std::to_string(bad_lse) + " bad logsumexp rows; " : "";
    bool ok = bad_lse == 0;
    struct Gradient {
      const char* label;
      const Tensor& device;
      const std::vector<float>& want;
    };
    for (const Gradient& g :
         {Gradient{"dq", gq, ref_gq}, Gradient{"dk", gk, ref_gk}, Gradient{"dv", gv, ref_gv}}) {
      const std::vector<float> got = g.device.download();
      const std::vector<float>& want = g.want;
      const char* label = g.label;
      double largest = 1.0, worst = 0.0;
      for (float w : want) largest = std::max(largest, static_cast<double>(std::fabs(w)));
      for (size_t i = 0; i < got.size(); ++i) {
        const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
        if (!(err <= worst)) worst = std::isnan(err) ? INFINITY : err;
      }
      const double limit = tolerance(c.dtype) * largest;
      char text[96];
      std::snprintf(text, sizeof text, "%s err %.3g (limit %.3g)%s", label, worst, limit,
                    label[1] == 'v' ? "" : ", ");
      detail += text;
      ok = ok && worst <= limit;
    }
    report(b, ok, detail);
  }

  void report(const Case& c, bool ok, const std::string& detail) {
    std::printf("%s %-58s %s\n", ok ? "PASS" : "FAIL", c.name.c_str(), detail.c_str());
    std::fflush(stdout);
    ok ? ++passed : ++failures;
  }
};

std::string describe(const Case& c) {
  char s[200];
  std::snprintf(s, sizeof s, "%s %s b%lld h%lld/%lld sq%lld sk%lld d%lld%s%s", c.impl.c_str(),
                dtype_name(c.dtype), static_cast<long long>(c.b), static_cast<long long>(c.hq),
                static_cast<long long>(c.hkv), static_cast<long long>(c.sq),
                static_cast<long long>(c.sk), static_cast<long long>(c.d),
                c.dv ? (" dv" + std::to_string(c.dv)).c_str() : "", c.causal ? " causal" : "");
  return s;
}

std::vector<Case> cases() {
  std::vector<Case> all;
  auto add = [&](Case c, const std::string& note = "") {
    c.name = describe(c) + (note.empty() ? "" : " " + note);
    all.push_back(c);
  };
  // Head dims x sequence lengths, causal and not (bf16; fp16 on the longer ones).
  for (int64_t d : {64, 80, 96, 128, 256}) {
    for (int64_t s : {1, 7, 64, 127, 1024}) {
      for (bool causal : {false, true}) {
        Case c;
        c.d = d, c.sq = c.sk = s, c.causal = causal;
        add(c);
        if (s >= 127) {
          c.dtype = DType::kF16;
          add(c);
        }
      }
    }
  }
  Case c;
  // Long sequences.
  c = Case{}, c.hq = c.hkv = 4, c.sq = c.sk = 4097, c.d = 128;
  add(c);
  c.causal = true, add(c);
  c.dtype = DType::kF16, c.d = 64, add(c);
  // seq_q != seq_k: decoding (bottom-right causal sees every key) and chunked prefill.
  c = Case{}, c.hq = 32, c.hkv = 8, c.sq = 1, c.sk = 4096, c.d = 128;
  add(c, "decode");
  c.causal = true, add(c, "decode");
  c.dtype = DType::kF16, add(c, "decode");
  c = Case{}, c.sq = 64, c.sk = 1024, c.causal = true, c.d = 128, add(c, "chunked prefill");
  c = Case{}, c.sq = 127, c.sk = 4097, c.causal = true, c.d = 96, add(c, "chunked prefill");
  c = Case{}, c.sq = 1024, c.sk = 64, c.causal = true, add(c, "more queries than keys");
  // GQA and MQA.
  c = Case{}, c.hq = 32, c.hkv = 8, c.sq = c.sk = 1024, c.d = 128, c.causal = true;
  add(c, "GQA");
  c = Case{}, c.b = 2, c.hq = 32, c.hkv = 1, c.sq = c.sk = 127, c.d = 64, add(c, "MQA");
  // Masks.
  c = Case{}, c.b = 2, c.hq = 4, c.hkv = 2, c.sq = 127, c.sk = 300, c.d = 128;
  c.mask = Mask::kBool, add(c, "bool mask, row 0 fully masked");
  c.causal = true, add(c, "bool mask, row 0 fully masked");
  c.causal = false, c.mask = Mask::kAdditiveF32, add(c, "additive f32 mask");
  c.mask = Mask::kAdditiveSame, add(c, "additive mask in the dtype, padding");
  c.dtype = DType::kF16, add(c, "additive mask in the dtype, padding");
  // Non-contiguous inputs.
  c = Case{}, c.b = 2, c.hq = 8, c.hkv = 4, c.sq = c.sk = 200, c.d = 128;
  c.layout = Layout::kTransposed, add(c, "[b, s, h, d] memory");
  c.layout = Layout::kPadded, c.causal = true, add(c, "padded rows");
  c.layout = Layout::kDimStride2, add(c, "dim stride 2");
  // Head dims outside the buckets and unequal q/v head dims.
  c = Case{}, c.sq = c.sk = 130, c.d = 36, add(c, "odd head dim");
  c = Case{}, c.sq = c.sk = 130, c.d = 128, c.dv = 64, add(c);
  c = Case{}, c.sq = c.sk = 130, c.d = 64, c.dv = 200, c.causal = true, add(c);
  // No keys at all: zeros. Empty batch: success.
  c = Case{}, c.sq = 5, c.sk = 0, add(c, "no keys");
  c = Case{}, c.b = 0, add(c, "empty batch");
  // The other implementations: eager (float32 math) and sdpa (flash, or eager for float32).
  for (const char* impl : {"eager", "sdpa"}) {
    for (DType t : {DType::kF32, DType::kBf16}) {
      c = Case{}, c.impl = impl, c.dtype = t, c.hq = 8, c.hkv = 2, c.sq = 127, c.sk = 1024;
      c.d = 96, c.causal = true, add(c);
      c.mask = Mask::kBool, c.causal = false, c.layout = Layout::kTransposed;
      add(c, "bool mask, [b, s, h, d] memory");
    }
  }
  c = Case{}, c.impl = "eager", c.dtype = DType::kF16, c.sq = c.sk = 1, c.d = 256, add(c);
  // Errors.
  c = Case{}, c.dtype = DType::kF32;
  c.expect_error = "the flash kernel takes bfloat16 or float16", add(c, "float32 into flash");
  c = Case{}, c.d = 512, c.expect_error = "head dims up to 256", add(c, "head dim 512");
  return all;
}

void throughput(const backplane::Runtime& runtime, cudaStream_t stream) {
  const int64_t b = 1, h = 32, s = 4096, d = 128;
  Tensor q({b, h, s, d}, DType::kBf16, Layout::kCompact);
  Tensor k({b, h, s, d}, DType::kBf16, Layout::kCompact);
  Tensor v({b, h, s, d}, DType::kBf16, Layout::kCompact);
  Tensor out({b, h, s, d}, DType::kBf16, Layout::kCompact);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (Tensor* t : {&q, &k, &v}) t->fill([&](size_t) { return normal(rng); });
  bp_attention_args args{};
  args.struct_size = sizeof args;
  args.query = &q.dl, args.key = &k.dl, args.value = &v.dl, args.output = &out.dl;
  args.causal = 1;
  args.stream = stream;
  const backplane::AttentionKernel kernel =
      runtime.attention_kernel(backplane::Device("cuda", 0), "flash_attention_2");
  for (int i = 0; i < 3; ++i) kernel(args);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  const int reps = 20;
  cudaEventRecord(start, stream);
  for (int i = 0; i < reps; ++i) kernel(args);
  cudaEventRecord(stop, stream);
  check_cuda(cudaEventSynchronize(stop), "timing");
  float ms = 0.0f;
  cudaEventElapsedTime(&ms, start, stop);
  // Two products of 2*s*s*d FLOPs each per head, causal: half of them.
  const double flops = 4.0 * b * h * s * s * d / 2.0;
  const double tflops = flops * reps / (ms * 1e-3) / 1e12;
  const double peak = 989.0;  // H100/H200 SXM dense bf16 tensor-core peak, TFLOP/s
  std::printf(
      "INFO throughput flash_attention_2 prefill 1x32x4096x128 causal bf16: %.3f ms, "
      "%.1f TFLOP/s (%.0f%% of the H200's %.0f TFLOP/s dense bf16 peak)\n",
      ms / reps, tflops, 100.0 * tflops / peak, peak);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

// The backward's time as information (the eager backward kernels are reference-grade: no
// tensor cores), on a shorter prefill than the forward's.
void backward_throughput(const backplane::Runtime& runtime, cudaStream_t stream) {
  const int64_t b = 1, h = 32, s = 1024, d = 128;
  Tensor q({b, h, s, d}, DType::kBf16, Layout::kCompact),
      k({b, h, s, d}, DType::kBf16, Layout::kCompact);
  Tensor v({b, h, s, d}, DType::kBf16, Layout::kCompact),
      out({b, h, s, d}, DType::kBf16, Layout::kCompact);
  Tensor grad_out({b, h, s, d}, DType::kBf16, Layout::kCompact);
  Tensor gq({b, h, s, d}, DType::kBf16, Layout::kCompact),
      gk({b, h, s, d}, DType::kBf16, Layout::kCompact);
  Tensor gv({b, h, s, d}, DType::kBf16, Layout::kCompact),
      lse({b, h, s, 1}, DType::kF32, Layout::kCompact);
  lse.dl.ndim = 3;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (Tensor* t : {&q, &k, &v, &grad_out}) t->fill([&](size_t) { return normal(rng); });
  const backplane::AttentionKernel kernel =
      runtime.attention_kernel(backplane::Device("cuda", 0), "flash_attention_2");
  backplane::AttentionArguments fwd;
  fwd.query = &q.dl, fwd.key = &k.dl, fwd.value = &v.dl, fwd.output = &out.dl;
  fwd.logsumexp = &lse.dl, fwd.causal = true, fwd.stream = stream;
  kernel(fwd);
  backplane::AttentionBackwardArguments bwd;
  bwd.query = &q.dl, bwd.key = &k.dl, bwd.value = &v.dl, bwd.output = &out.dl;
  bwd.logsumexp = &lse.dl, bwd.grad_output = &grad_out.dl, bwd.grad_query = &gq.dl;
  bwd.grad_key = &gk.dl, bwd.grad_value = &gv.dl, bwd.causal = true, bwd.stream = stream;
  kernel.backward(bwd);  // warm-up
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  const int reps = 5;
  cudaEventRecord(start, stream);
  for (int i = 0; i < reps; ++i) kernel.backward(bwd);
  cudaEventRecord(stop, stream);
  check_cuda(cudaEventSynchronize(stop), "backward timing");
  float ms = 0.0f;
  cudaEventElapsedTime(&ms, start, stop);
  // Five products of 2*s*s*d FLOPs each per head (S and dP recomputed, dV, dK, dQ), causal: half.
  const double flops = 5.0 * 2.0 * b * h * s * s * d / 2.0;
  std::printf(
      "INFO throughput attention_backward (eager kernels) prefill 1x32x1024x128 causal bf16: "
      "%.3f ms, %.2f TFLOP/s\n",
      ms / reps, flops * reps / (ms * 1e-3) / 1e12);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

}  // namespace

int main() {
  const backplane::Runtime runtime = backplane::Runtime::open();
  cudaSetDevice(0);
  cudaStream_t stream;
  check_cuda(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  Checker checker{runtime, stream};
  try {
    for (const backplane::KernelInfo& k : runtime.kernels()) {
      if (k.device_type == "cuda") {
        std::printf("kernel %s/%s from plugin %s\n", k.op.c_str(), k.implementation.c_str(),
                    k.plugin.c_str());
      }
    }
    const auto started = std::chrono::steady_clock::now();
    for (const Case& c : cases()) checker.run(c);

    // A CPU tensor handed to the cuda kernel.
    {
      std::vector<uint16_t> host(64 * 64);
      int64_t shape[4] = {1, 1, 64, 64};
      DLTensor t{};
      t.data = host.data();
      t.device = {kDLCPU, 0};
      t.ndim = 4;
      t.dtype = {kDLBfloat, 16, 1};
      t.shape = shape;
      std::vector<uint16_t> out_host(64 * 64);
      DLTensor o = t;
      o.data = out_host.data();
      bp_attention_args args{};
      args.struct_size = sizeof args;
      args.query = &t, args.key = &t, args.value = &t, args.output = &o;
      std::string error;
      try {
        runtime.attention_kernel(backplane::Device("cuda", 0), "flash_attention_2")(args);
      } catch (const backplane::Error& e) {
        error = e.what();
      }
      Case c;
      c.name = "error: CPU tensors into flash_attention_2";
      const bool ok = error.find("query is on device kDLCPU") != std::string::npos;
      checker.report(c, ok, ok ? "refused: " + error : "got: " + error);
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::printf("== %d passed, %d failed (%.1f s)\n", checker.passed, checker.failures, seconds);
    throughput(runtime, stream);
    backward_throughput(runtime, stream);
  } catch (const std::exception& e) {
    std::printf("FAIL: %s\n", e.what());
    return 1;
  }
  cudaStreamDestroy(stream);
  return checker.failures == 0 ? 0 : 1;
}
