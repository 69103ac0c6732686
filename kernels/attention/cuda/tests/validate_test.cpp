// The GPU kernels' host-side checks, which run before anything touches a GPU: a table of calls
// (shapes, dtypes, devices, strides, masks) with the Params they give or the error they get.
// Device pointers here are made-up addresses; nothing dereferences them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "validate.hpp"

namespace {

namespace gpu = backplane::attention::gpu;

constexpr DLDataType kBf16{kDLBfloat, 16, 1};
constexpr DLDataType kF16{kDLFloat, 16, 1};
constexpr DLDataType kF32{kDLFloat, 32, 1};
constexpr DLDataType kU8{kDLUInt, 8, 1};

// A DLTensor that owns its shape and strides; `address` is a fake device pointer.
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // empty: compact
  DLDataType dtype = kBf16;
  DLDevice device{kDLCUDA, 0};
  uintptr_t address = 0;
  uint64_t byte_offset = 0;
  DLTensor dl{};

  const DLTensor* get() {
    dl.data = reinterpret_cast<void*>(address);
    dl.device = device;
    dl.ndim = static_cast<int32_t>(shape.size());
    dl.dtype = dtype;
    dl.shape = shape.data();
    dl.strides = strides.empty() ? nullptr : strides.data();
    dl.byte_offset = byte_offset;
    return &dl;
  }
};

// q, k, v, out (and an optional mask) for [b, hq, sq, d] x [b, hkv, sk, d], each 1 GiB apart.
struct Call {
  Tensor q, k, v, out, mask;
  bool has_mask = false;
  bool causal = false;
  std::optional<double> scale;
  gpu::Kernel kernel = gpu::Kernel::kFlash;
  gpu::Platform platform = gpu::Platform::kCuda;

  Call(int64_t b, int64_t hq, int64_t hkv, int64_t sq, int64_t sk, int64_t d) {
    q.shape = {b, hq, sq, d};
    k.shape = {b, hkv, sk, d};
    v.shape = {b, hkv, sk, d};
    out.shape = {b, hq, sq, d};
    Tensor* all[] = {&q, &k, &v, &out, &mask};
    for (size_t i = 0; i < 5; ++i) all[i]->address = (uintptr_t{i} + 1) << 30;
    mask.dtype = kU8;
  }
  void set_dtype(DLDataType t) {
    for (Tensor* x : {&q, &k, &v, &out}) x->dtype = t;
  }
  void set_device(DLDevice d) {
    for (Tensor* x : {&q, &k, &v, &out, &mask}) x->device = d;
  }

  backplane::attention::Status run(gpu::Params* params) {
    backplane::attention::Tensors t;
    t.query = q.get();
    t.key = k.get();
    t.value = v.get();
    t.output = out.get();
    t.mask = has_mask ? mask.get() : nullptr;
    return gpu::make_params(t, causal, scale, kernel, platform, params);
  }
};

struct Case {
  std::string name;
  std::function<void(Call&)> setup;
  std::string error;  // a part of the expected message; empty: valid
  std::function<void(const gpu::Params&)> check = nullptr;
};

Call base() {
  return Call(2, 8, 8, 64, 64, 128);
}

const std::vector<Case>& cases() {
  static const std::vector<Case> table = {
      {"contiguous bf16", [](Call&) {}, "",
       [](const gpu::Params& p) {
         EXPECT_EQ(p.dtype, gpu::ElementType::kBfloat16);
         EXPECT_EQ(p.batch, 2);
         EXPECT_EQ(p.heads_q, 8);
         EXPECT_EQ(p.group, 1);
         EXPECT_EQ(p.head_dim, 128);
         EXPECT_EQ(p.q_stride[2], 128);
         EXPECT_EQ(p.q_stride[0], 8 * 64 * 128);
         EXPECT_EQ(p.vector_loads, 1);
         EXPECT_EQ(p.mask_type, gpu::MaskType::kNone);
         EXPECT_FLOAT_EQ(p.scale, 1.0f / std::sqrt(128.0f));
       }},
      {"float16, causal, explicit scale",
       [](Call& c) {
         c.set_dtype(kF16);
         c.causal = true;
         c.scale = 0.5;
       },
       "",
       [](const gpu::Params& p) {
         EXPECT_EQ(p.dtype, gpu::ElementType::kFloat16);
         EXPECT_EQ(p.causal, 1);
         EXPECT_FLOAT_EQ(p.scale, 0.5f);
       }},
      {"GQA 32/8", [](Call& c) { c = Call(1, 32, 8, 7, 4097, 64); }, "",
       [](const gpu::Params& p) { EXPECT_EQ(p.group, 4); }},
      {"MQA and decode", [](Call& c) { c = Call(1, 32, 1, 1, 4096, 128); }, "",
       [](const gpu::Params& p) {
         EXPECT_EQ(p.group, 32);
         EXPECT_EQ(p.seq_q, 1);
         EXPECT_EQ(p.seq_k, 4096);
       }},
      {"head_dim 80 keeps 16-byte loads", [](Call& c) { c = Call(1, 2, 2, 5, 5, 80); }, "",
       [](const gpu::Params& p) { EXPECT_EQ(p.vector_loads, 1); }},
      {"head_dim 36 loads element by element", [](Call& c) { c = Call(1, 2, 2, 5, 5, 36); }, "",
       [](const gpu::Params& p) { EXPECT_EQ(p.vector_loads, 0); }},
      {"query in [batch, seq, heads, dim] memory",
       [](Call& c) {
         c.q.strides = {64 * 8 * 128, 128, 8 * 128, 1};
       },
       "",
       [](const gpu::Params& p) {
         EXPECT_EQ(p.q_stride[1], 128);
         EXPECT_EQ(p.q_stride[2], 8 * 128);
         EXPECT_EQ(p.vector_loads, 1);
       }},
      {"key with a dim stride of 2",
       [](Call& c) {
         c.k.strides = {8 * 64 * 256, 64 * 256, 256, 2};
       },
       "", [](const gpu::Params& p) { EXPECT_EQ(p.vector_loads, 0); }},
      {"value at a 2-byte offset", [](Call& c) { c.v.byte_offset = 2; }, "",
       [](const gpu::Params& p) { EXPECT_EQ(p.vector_loads, 0); }},
      {"head_dim_v differs",
       [](Call& c) {
         c.v.shape[3] = 64;
         c.out.shape[3] = 64;
       },
       "", [](const gpu::Params& p) { EXPECT_EQ(p.head_dim_v, 64); }},
      {"empty batch", [](Call& c) { c = Call(0, 8, 8, 64, 64, 128); }, "",
       [](const gpu::Params& p) { EXPECT_TRUE(gpu::is_empty(p)); }},
      {"no keys", [](Call& c) { c = Call(1, 2, 2, 3, 0, 64); }, "",
       [](const gpu::Params& p) {
         EXPECT_FALSE(gpu::is_empty(p));
         EXPECT_EQ(p.seq_k, 0);
       }},
      {"bool mask [seq_q, seq_k] broadcast",
       [](Call& c) {
         c.has_mask = true;
         c.mask.shape = {64, 64};
       },
       "",
       [](const gpu::Params& p) {
         EXPECT_EQ(p.mask_type, gpu::MaskType::kBool);
         EXPECT_EQ(p.mask_stride[0], 0);
         EXPECT_EQ(p.mask_stride[1], 0);
         EXPECT_EQ(p.mask_stride[2], 64);
         EXPECT_EQ(p.mask_stride[3], 1);
       }},
      {"additive float32 mask [batch, 1, seq_q, seq_k]",
       [](Call& c) {
         c.has_mask = true;
         c.mask.dtype = kF32;
         c.mask.shape = {2, 1, 64, 64};
       },
       "",
       [](const gpu::Params& p) {
         EXPECT_EQ(p.mask_type, gpu::MaskType::kAdditiveF32);
         EXPECT_EQ(p.mask_stride[0], 64 * 64);
         EXPECT_EQ(p.mask_stride[1], 0);
       }},
      {"additive mask in the query's dtype",
       [](Call& c) {
         c.has_mask = true;
         c.mask.dtype = kBf16;
         c.mask.shape = {1, 64};
       },
       "", [](const gpu::Params& p) { EXPECT_EQ(p.mask_type, gpu::MaskType::kAdditiveBf16); }},
      {"managed memory",
       [](Call& c) {
         c.set_device({kDLCUDAManaged, 0});
       },
       ""},
      {"device 3",
       [](Call& c) {
         c.set_device({kDLCUDA, 3});
       },
       "", [](const gpu::Params& p) { EXPECT_EQ(p.device_id, 3); }},
      {"eager takes float32",
       [](Call& c) {
         c.set_dtype(kF32);
         c.kernel = gpu::Kernel::kEager;
       },
       "", [](const gpu::Params& p) { EXPECT_EQ(p.dtype, gpu::ElementType::kFloat32); }},
      {"rocm build takes kDLROCM",
       [](Call& c) {
         c.platform = gpu::Platform::kRocm;
         c.set_device({kDLROCM, 0});
       },
       ""},

      // ---- errors ----
      {"CPU query",
       [](Call& c) {
         c.q.device = {kDLCPU, 0};
       },
       "attention: query is on device kDLCPU; the GPU kernels need kDLCUDA or kDLCUDAManaged "
       "memory"},
      {"pinned host output",
       [](Call& c) {
         c.out.device = {kDLCUDAHost, 0};
       },
       "output is on device kDLCUDAHost"},
      {"rocm memory on the cuda build",
       [](Call& c) {
         c.set_device({kDLROCM, 0});
       },
       "query is on device kDLROCM"},
      {"cuda memory on the rocm build", [](Call& c) { c.platform = gpu::Platform::kRocm; },
       "the GPU kernels need kDLROCM memory"},
      {"two GPUs",
       [](Call& c) {
         c.k.device = {kDLCUDA, 1};
       },
       "key is on GPU 1 but query is on GPU 0; all tensors must be on one GPU"},
      {"mask on another GPU",
       [](Call& c) {
         c.has_mask = true;
         c.mask.shape = {64, 64};
         c.mask.device = {kDLCUDA, 1};
       },
       "mask is on GPU 1"},
      {"float32 into flash", [](Call& c) { c.set_dtype(kF32); },
       "the flash kernel takes bfloat16 or float16"},
      {"int8",
       [](Call& c) {
         c.set_dtype({kDLInt, 8, 1});
       },
       "query has dtype int8; supported: float32, bfloat16, float16"},
      {"dtypes differ", [](Call& c) { c.v.dtype = kF16; },
       "value has dtype float16 but query has bfloat16"},
      {"head_dim 512", [](Call& c) { c = Call(1, 2, 2, 4, 4, 512); },
       "the GPU kernels take head dims up to 256"},
      {"head_dim_v 320",
       [](Call& c) {
         c.v.shape[3] = 320;
         c.out.shape[3] = 320;
       },
       "head_dim_v 320"},
      {"three dims",
       [](Call& c) {
         c.q.shape = {8, 64, 128};
       },
       "query must have 4 dims [batch, heads_q, seq_q, head_dim], got 3 dims [8, 64, 128]"},
      {"heads not grouped", [](Call& c) { c = Call(1, 6, 4, 4, 4, 64); },
       "heads_q (6) must be a multiple of heads_kv (4)"},
      {"key head_dim", [](Call& c) { c.k.shape[3] = 64; },
       "key head_dim 64 differs from query head_dim 128"},
      {"output shape", [](Call& c) { c.out.shape[2] = 63; },
       "output shape [2, 8, 63, 128] must be [batch, heads_q, seq_q, head_dim_v] = "
       "[2, 8, 64, 128]"},
      {"mask does not broadcast",
       [](Call& c) {
         c.has_mask = true;
         c.mask.shape = {3, 64};
       },
       "mask shape [3, 64] does not broadcast to [batch, heads_q, seq_q, seq_k] = "
       "[2, 8, 64, 64]: mask dim 0 is 3, expected 64 or 1"},
      {"mask dtype",
       [](Call& c) {
         c.has_mask = true;
         c.mask.shape = {64, 64};
         c.mask.dtype = {kDLFloat, 64, 1};
       },
       "mask has dtype float64; expected bool"},
      {"output overlaps key", [](Call& c) { c.out.address = c.k.address + 64; },
       "output overlaps key"},
      {"output stride 0",
       [](Call& c) {
         c.out.strides = {0, 64 * 128, 128, 1};
       },
       "output has stride 0 on dim 0"},
      {"batch beyond the grid", [](Call& c) { c = Call(70000, 1, 1, 1, 1, 64); },
       "must each be at most 65535"},
      {"misaligned query", [](Call& c) { c.q.byte_offset = 1; },
       "query data (data + byte_offset) is not aligned to its 2-byte elements"},
      {"NULL key data", [](Call& c) { c.k.address = 0; }, "key data is NULL"},
      {"scale NaN", [](Call& c) { c.scale = std::nan(""); }, "scale must be finite"},
      // The checks shared with the CPU kernels (kernels/common/tensor.hpp).
      {"negative GPU ordinal",
       [](Call& c) {
         c.set_device({kDLCUDA, -1});
       },
       "query has device_id -1; expected a GPU ordinal (0 or more)"},
      {"dtype of 0 bits",
       [](Call& c) {
         c.k.dtype = {kDLFloat, 0, 1};
       },
       "key has dtype float0 but query has bfloat16"},
      {"dims whose product overflows",
       [](Call& c) {
         c.v.shape = {1 << 20, 1 << 20, 1 << 20, 8};
       },
       "value shape [1048576, 1048576, 1048576, 8] has more elements than an int64 counts"},
      {"byte_offset past the address space", [](Call& c) { c.out.byte_offset = uint64_t{1} << 62; },
       "output data + byte_offset 4611686018427387904"},
  };
  return table;
}

TEST(GpuAttentionValidate, Table) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    Call call = base();
    c.setup(call);
    gpu::Params params{};
    const backplane::attention::Status result = call.run(&params);
    if (c.error.empty()) {
      ASSERT_TRUE(result.ok()) << result.message;
      if (c.check) c.check(params);
    } else {
      EXPECT_EQ(result.code, backplane::attention::StatusCode::kInvalidArgument);
      EXPECT_NE(result.message.find(c.error), std::string::npos) << result.message;
      EXPECT_EQ(result.message.rfind("attention: ", 0), 0u) << result.message;
    }
  }
}

TEST(GpuAttentionValidate, NullArgumentsAreNamed) {
  backplane::attention::Tensors none;
  gpu::Params params{};
  const backplane::attention::Status r = gpu::make_params(
      none, false, std::nullopt, gpu::Kernel::kEager, gpu::Platform::kCuda, &params);
  EXPECT_EQ(r.code, backplane::attention::StatusCode::kInvalidArgument);
  EXPECT_EQ(r.message, "attention: query is NULL");
}

}  // namespace
