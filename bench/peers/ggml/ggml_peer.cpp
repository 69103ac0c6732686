// The ggml side's C ABI (bench/peers/ggml_side.py loads it with ctypes): one graph per case,
// built over the caller's buffers with ggml's public API, computed on ggml's CPU backend with
// exactly the threads asked for. Built by bench/peers/ggml/build.sh against the ggml it builds.
//
// A plan owns two contexts: `inputs` (no_alloc: its tensors point at the caller's buffers) and
// the work context of the ops. run_out computes the plan's graph, whose result tensor was
// pointed at the caller's output (or is an in-place view of the input); the work context and the
// work buffer are made once. run_fresh is the simplest ggml user's way, a context per
// evaluation: ggml_init (a malloc holding the ops' tensors, the output among them), the graph,
// the work buffer, compute, ggml_free.
//
// ggml asserts (and aborts) on what it cannot do, so every shape and type is checked here first
// and refused with a message.
#include <ggml-cpu.h>
#include <ggml.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

thread_local std::string g_error;

int fail(const std::string& message) {
  g_error = message;
  return 1;
}

enum Dtype { kF32 = 0, kBF16 = 1 };

ggml_type storage_type(int dtype) {
  return dtype == kBF16 ? GGML_TYPE_BF16 : GGML_TYPE_F32;
}

// The ops of one case: build(ctx, inputs) returns the result tensors, ops in ctx.
using Results = std::vector<ggml_tensor*>;
using Build = std::function<Results(ggml_context*, const std::vector<ggml_tensor*>&)>;

struct Plan {
  ggml_context* inputs = nullptr;
  std::vector<ggml_tensor*> in;
  Build build;
  size_t work_ctx_bytes = 0;
  int threads = 1;
  std::vector<void*> outs;  // the caller's outputs; nullptr for a result viewing its input
  // run_out's graph, made once.
  ggml_context* work = nullptr;
  ggml_cgraph* graph = nullptr;
  std::vector<uint8_t> work_buffer;
  ggml_cplan cplan{};
};

ggml_context* new_context(size_t bytes, bool no_alloc) {
  ggml_init_params params{bytes, nullptr, no_alloc};
  return ggml_init(params);
}

ggml_cgraph* graph_of(ggml_context* ctx, const Results& results) {
  ggml_cgraph* gf = ggml_new_graph(ctx);
  for (ggml_tensor* r : results) ggml_build_forward_expand(gf, r);
  return gf;
}

int compute(ggml_cgraph* gf, int threads, std::vector<uint8_t>& work) {
  ggml_cplan plan = ggml_graph_plan(gf, threads, nullptr);
  if (work.size() < plan.work_size) work.resize(plan.work_size);
  plan.work_data = work.data();
  return ggml_graph_compute(gf, &plan) == GGML_STATUS_SUCCESS ? 0
                                                              : fail("ggml_graph_compute failed");
}

// Input tensor over a caller's buffer; ne in ggml's order (ne0 fastest).
ggml_tensor* input(Plan& p, ggml_type type, std::vector<int64_t> ne, void* data) {
  ggml_tensor* t = nullptr;
  switch (ne.size()) {
    case 1:
      t = ggml_new_tensor_1d(p.inputs, type, ne[0]);
      break;
    case 2:
      t = ggml_new_tensor_2d(p.inputs, type, ne[0], ne[1]);
      break;
    case 3:
      t = ggml_new_tensor_3d(p.inputs, type, ne[0], ne[1], ne[2]);
      break;
    default:
      t = ggml_new_tensor_4d(p.inputs, type, ne[0], ne[1], ne[2], ne[3]);
      break;
  }
  t->data = data;
  p.in.push_back(t);
  return t;
}

Plan* new_plan(int threads, size_t work_ctx_bytes, std::vector<void*> outs) {
  auto* p = new Plan;
  p->inputs = new_context(16 * ggml_tensor_overhead(), true);
  p->threads = threads;
  p->work_ctx_bytes = work_ctx_bytes + 64 * ggml_tensor_overhead() + ggml_graph_overhead();
  p->outs = std::move(outs);
  return p;
}

// Makes run_out's graph once: the results' data are the caller's outputs.
int finish_plan(Plan* p) {
  p->work = new_context(p->work_ctx_bytes, false);
  if (!p->work) return fail("ggml_init failed");
  const Results results = p->build(p->work, p->in);
  for (size_t i = 0; i < results.size() && i < p->outs.size(); ++i) {
    if (p->outs[i]) results[i]->data = p->outs[i];
  }
  p->graph = graph_of(p->work, results);
  return 0;
}

// Bytes an f32 / bf16 tensor of n elements takes in a context, with ggml's alignment.
size_t bytes_of(ggml_type type, int64_t n) {
  return static_cast<size_t>(n) * ggml_type_size(type) + GGML_MEM_ALIGN;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) const char* gp_error() {
  return g_error.c_str();
}

__attribute__((visibility("default"))) void gp_free(void* plan) {
  auto* p = static_cast<Plan*>(plan);
  if (!p) return;
  if (p->work) ggml_free(p->work);
  if (p->inputs) ggml_free(p->inputs);
  delete p;
}

__attribute__((visibility("default"))) int gp_run(void* plan) {
  auto* p = static_cast<Plan*>(plan);
  return compute(p->graph, p->threads, p->work_buffer);
}

// A fresh context per call (ggml_init mallocs it; its output is one of its tensors), freed
// before returning.
__attribute__((visibility("default"))) int gp_run_fresh(void* plan) {
  auto* p = static_cast<Plan*>(plan);
  ggml_context* ctx = new_context(p->work_ctx_bytes, false);
  if (!ctx) return fail("ggml_init failed");
  ggml_cgraph* gf = graph_of(ctx, p->build(ctx, p->in));  // results in ctx's own memory
  std::vector<uint8_t> work;
  const int rc = compute(gf, p->threads, work);
  ggml_free(ctx);
  return rc;
}

// Attention: q [B, Hq, Sq, D], k/v [B, Hkv, Skv, D] (torch's contiguous layout is ggml's
// ne [D, S, H, B]); mask_f16 [Sq, Skv] additive (0 / -inf) or NULL; out [B, Sq, Hq, D] f32
// (flash_attn_ext's permuted result). bf16: K and V as bf16 (the CPU kernel reads them as they
// are), Q cast to f32 in the graph (the kernel takes f32 Q only), result f32 cast to bf16 into
// out ([B, Sq, Hq, D] bf16). dims: B, Hq, Hkv, Sq, Skv, D.
__attribute__((visibility("default"))) void* gp_attention(int dtype, void* q, void* k, void* v,
                                                          void* mask_f16, void* out,
                                                          const int64_t* dims, int threads) {
  const int64_t B = dims[0], Hq = dims[1], Hkv = dims[2], Sq = dims[3], Skv = dims[4], D = dims[5];
  if (Hkv <= 0 || Hq % Hkv != 0) {
    fail("attention: q_heads must be a multiple of kv_heads");
    return nullptr;
  }
  const ggml_type t = storage_type(dtype);
  const int64_t out_elems = B * Sq * Hq * D;
  size_t bytes = bytes_of(GGML_TYPE_F32, out_elems);
  if (dtype == kBF16) bytes += bytes_of(GGML_TYPE_F32, B * Hq * Sq * D) + bytes_of(t, out_elems);
  Plan* p = new_plan(threads, bytes, {out});
  input(*p, t, {D, Sq, Hq, B}, q);
  input(*p, t, {D, Skv, Hkv, B}, k);
  input(*p, t, {D, Skv, Hkv, B}, v);
  if (mask_f16) input(*p, GGML_TYPE_F16, {Skv, Sq, 1, 1}, mask_f16);
  const float scale = 1.0f / std::sqrt(static_cast<float>(D));
  const bool bf16 = dtype == kBF16;
  p->build = [scale, bf16](ggml_context* ctx, const std::vector<ggml_tensor*>& in) {
    ggml_tensor* qf = bf16 ? ggml_cast(ctx, in[0], GGML_TYPE_F32) : in[0];
    ggml_tensor* mask = in.size() > 3 ? in[3] : nullptr;
    ggml_tensor* o = ggml_flash_attn_ext(ctx, qf, in[1], in[2], mask, scale, 0.0f, 0.0f);
    ggml_prec_set_acc(o, GGML_PREC_F32);
    return Results{bf16 ? ggml_cast(ctx, o, GGML_TYPE_BF16) : o};
  };
  if (finish_plan(p) != 0) {
    gp_free(p);
    return nullptr;
  }
  return p;
}

// RMSNorm: x [R, H], weight [H], out [R, H]: ggml_mul(ggml_rms_norm(x), weight), which the CPU
// backend fuses. ggml's rms_norm is f32 only: bf16 casts x to f32 and the result back in the
// graph, the weight is given as f32 (weight_f32).
__attribute__((visibility("default"))) void* gp_rmsnorm(int dtype, void* x, void* weight_f32,
                                                        void* out, int64_t rows, int64_t hidden,
                                                        float eps, int threads) {
  const bool bf16 = dtype == kBF16;
  size_t bytes = 2 * bytes_of(GGML_TYPE_F32, rows * hidden);
  if (bf16)
    bytes += bytes_of(GGML_TYPE_F32, rows * hidden) + bytes_of(GGML_TYPE_BF16, rows * hidden);
  Plan* p = new_plan(threads, bytes, {out});
  input(*p, storage_type(dtype), {hidden, rows}, x);
  input(*p, GGML_TYPE_F32, {hidden}, weight_f32);
  p->build = [eps, bf16](ggml_context* ctx, const std::vector<ggml_tensor*>& in) {
    ggml_tensor* xf = bf16 ? ggml_cast(ctx, in[0], GGML_TYPE_F32) : in[0];
    ggml_tensor* y = ggml_mul(ctx, ggml_rms_norm(ctx, xf, eps), in[1]);
    return Results{bf16 ? ggml_cast(ctx, y, GGML_TYPE_BF16) : y};
  };
  if (finish_plan(p) != 0) {
    gp_free(p);
    return nullptr;
  }
  return p;
}

// silu_and_mul: x [R, 2H] -> out [R, H] = silu(x[:, :H]) * x[:, H:] (ggml_swiglu, not swapped:
// the first half is the gate). f32 and bf16 natively.
__attribute__((visibility("default"))) void* gp_swiglu(int dtype, void* x, void* out, int64_t rows,
                                                       int64_t hidden, int threads) {
  const ggml_type t = storage_type(dtype);
  Plan* p = new_plan(threads, bytes_of(t, rows * hidden), {out});
  input(*p, t, {2 * hidden, rows}, x);
  p->build = [](ggml_context* ctx, const std::vector<ggml_tensor*>& in) {
    return Results{ggml_swiglu(ctx, in[0])};
  };
  if (finish_plan(p) != 0) {
    gp_free(p);
    return nullptr;
  }
  return p;
}

// Rotary (neox halves) on q and k in ggml's layout [B, S, H, D] (ne [D, H, S, B]), positions
// int32 [S]. f32: in place (ggml_rope_ext_inplace; q_out, k_out NULL). ggml's rope has no bf16
// kernel: bf16 casts to f32, ropes and casts back into q_out / k_out, in the graph.
// dims: B, H, S, D.
__attribute__((visibility("default"))) void* gp_rotary(int dtype, void* q, void* k, void* q_out,
                                                       void* k_out, void* positions,
                                                       const int64_t* dims, float theta,
                                                       int threads) {
  const int64_t B = dims[0], H = dims[1], S = dims[2], D = dims[3];
  if (B != 1) {
    fail(
        "rotary: ggml_rope_ext takes one position per token of a [D, H, S] tensor; batch must be "
        "1");
    return nullptr;
  }
  const bool bf16 = dtype == kBF16;
  const int64_t n = B * S * H * D;
  const size_t bytes = bf16 ? 4 * (bytes_of(GGML_TYPE_F32, n) + bytes_of(GGML_TYPE_BF16, n)) : 0;
  Plan* p = new_plan(threads, bytes, {q_out, k_out});
  input(*p, storage_type(dtype), {D, H, S}, q);
  input(*p, storage_type(dtype), {D, H, S}, k);
  input(*p, GGML_TYPE_I32, {S}, positions);
  const int n_dims = static_cast<int>(D);
  p->build = [bf16, n_dims, theta](ggml_context* ctx, const std::vector<ggml_tensor*>& in) {
    // Llama's plain RoPE: no YaRN (ext_factor 0), freq_scale and attn_factor 1.
    auto rope = [&](ggml_tensor* x) {
      if (!bf16) {
        return ggml_rope_ext_inplace(ctx, x, in[2], nullptr, n_dims, GGML_ROPE_TYPE_NEOX, 0, theta,
                                     1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
      }
      ggml_tensor* xf = ggml_cast(ctx, x, GGML_TYPE_F32);
      ggml_tensor* r = ggml_rope_ext(ctx, xf, in[2], nullptr, n_dims, GGML_ROPE_TYPE_NEOX, 0, theta,
                                     1.0f, 0.0f, 1.0f, 0.0f, 0.0f);
      return ggml_cast(ctx, r, GGML_TYPE_BF16);
    };
    return Results{rope(in[0]), rope(in[1])};
  };
  if (finish_plan(p) != 0) {
    gp_free(p);
    return nullptr;
  }
  return p;
}

}  // extern "C"
