// The ggml peer of bench/peers: a C ABI over ggml's public API that ggml_side.py loads with
// ctypes. Built by ggml/build.sh against the ggml it installs; nothing of ggml is in the repo.
//
// One plan per case: the op's graph, built once the way llama.cpp builds it, whose inputs and
// outputs are tensors over the caller's buffers (tensor->data set on a no_alloc context), the
// intermediates (the casts of a via-f32 graph) placed once by ggml-alloc as llama.cpp does, and
// the compute work buffer of ggml_graph_plan kept. ggml_peer_run is then one
// ggml_graph_compute. ggml_peer_run_alloc is the simplest ggml user's per-call way instead
// (the ggml examples): ggml_init a context that holds the outputs, intermediates and work
// buffer, build the same graph, ggml_graph_compute_with_ctx, ggml_free.
//
// ggml asserts abort the process, so every shape and type is checked here before ggml sees it;
// errors come back as a return code and ggml_peer_error().

#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml-cpu.h>
#include <ggml.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

namespace {

// Return codes; the Python side raises sides.Unsupported on kUnsupported.
constexpr int kOk = 0;
constexpr int kError = 1;
constexpr int kUnsupported = 2;

// The dtypes of the caller's float buffers.
constexpr int kF32 = 0;
constexpr int kBF16 = 1;

thread_local std::string g_error;
std::string g_last_log;  // ggml's latest warning or error, for the next error message

int fail(int rc, std::string message) {
  g_error = std::move(message);
  if (!g_last_log.empty()) {
    g_error += " (ggml: " + g_last_log + ")";
    g_last_log.clear();
  }
  return rc;
}

// ggml's default logger prints every level to stderr, its allocator's debug lines included;
// the benchmark prints nothing while timing, so only warnings and errors go through.
void log_filter(ggml_log_level level, const char* text, void*) {
  if (level == GGML_LOG_LEVEL_WARN || level == GGML_LOG_LEVEL_ERROR) {
    g_last_log = text;
    while (!g_last_log.empty() && g_last_log.back() == '\n') g_last_log.pop_back();
    std::fputs(text, stderr);
  }
}

void init_once() {
  static const bool done = [] {
    ggml_log_set(log_filter, nullptr);
    ggml_cpu_init();  // fp16 tables and CPU feature detection, before any graph is planned
    return true;
  }();
  (void)done;
}

// A caller-owned array the graph reads: ggml's type and ne (ne[0] fastest).
struct Input {
  ggml_type type;
  int64_t ne[4];
  void* data;
};

// Where results go: into the caller's buffers (the plan) or allocated in the context (per call).
enum class Placement { kIntoBuffers, kAllocated };

// Builds the op on the given input tensors and returns its outputs in the order of
// Plan::outputs. An output that is a view of an input (in place) needs no buffer.
using Builder = std::function<std::vector<ggml_tensor*>(
    ggml_context*, const std::vector<ggml_tensor*>&, Placement)>;

ggml_type float_type(int dtype) {
  return dtype == kBF16 ? GGML_TYPE_BF16 : GGML_TYPE_F32;
}

// Graphs here have at most a handful of nodes; the default graph (2048 nodes) would only
// add bookkeeping to each per-call context.
constexpr size_t kGraphSize = 32;

}  // namespace

struct ggml_peer_plan {
  std::vector<Input> inputs;
  std::vector<void*> outputs;          // one per builder output; nullptr where it is in place
  std::vector<ggml_fp16_t> owned_f16;  // inputs the plan makes itself (the causal mask)
  Builder build;
  int threads = 1;

  ggml_context* ctx = nullptr;  // no_alloc: tensor and graph objects only
  ggml_cgraph* graph = nullptr;
  ggml_gallocr_t galloc = nullptr;  // the intermediates' buffer
  void* work = nullptr;             // ggml_graph_plan's work buffer
  ggml_cplan cplan{};

  size_t per_call_bytes = 0;  // what run_alloc's context must hold
  std::string description;    // the graph's nodes, for the label

  ~ggml_peer_plan() {
    if (galloc) ggml_gallocr_free(galloc);
    if (ctx) ggml_free(ctx);
    std::free(work);
  }
};

namespace {

// Creates the input tensors over the caller's memory (whether or not ctx allocates), runs the
// builder and expands the graph from its outputs.
ggml_cgraph* make_graph(ggml_context* ctx, const ggml_peer_plan& plan, Placement placement,
                        std::vector<ggml_tensor*>* outputs) {
  const bool no_alloc = ggml_get_no_alloc(ctx);
  ggml_set_no_alloc(ctx, true);
  std::vector<ggml_tensor*> in;
  for (const Input& i : plan.inputs) {
    ggml_tensor* t = ggml_new_tensor(ctx, i.type, 4, i.ne);
    t->data = i.data;
    ggml_set_input(t);
    in.push_back(t);
  }
  ggml_set_no_alloc(ctx, no_alloc);
  *outputs = plan.build(ctx, in, placement);
  ggml_cgraph* graph = ggml_new_graph_custom(ctx, kGraphSize, false);
  for (ggml_tensor* t : *outputs) {
    ggml_set_output(t);
    ggml_build_forward_expand(graph, t);
  }
  return graph;
}

std::string describe(ggml_cgraph* graph) {
  std::string text;
  for (int i = 0; i < ggml_graph_n_nodes(graph); ++i) {
    const ggml_tensor* node = ggml_graph_node(graph, i);
    if (!text.empty()) text += ", ";
    text += ggml_op_desc(node);
    text += " ";
    const ggml_tensor* src = node->src[0];
    if (src && src->type != node->type) text += std::string(ggml_type_name(src->type)) + "->";
    text += ggml_type_name(node->type);
  }
  return text;
}

// The size of a context in which run_alloc builds and computes its graph: the objects of a
// no_alloc probe of the same graph, the data of every tensor it allocates, and the work buffer
// ggml_graph_compute_with_ctx takes from the context.
size_t per_call_size(const ggml_peer_plan& plan) {
  const size_t objects = 4 * 1024 * 1024;
  ggml_init_params params = {objects, nullptr, true};
  ggml_context* probe = ggml_init(params);
  std::vector<ggml_tensor*> outputs;
  ggml_cgraph* graph = make_graph(probe, plan, Placement::kAllocated, &outputs);
  size_t bytes = ggml_used_mem(probe);
  for (ggml_tensor* t = ggml_get_first_tensor(probe); t; t = ggml_get_next_tensor(probe, t)) {
    if (!t->data && !t->view_src) bytes += ggml_nbytes_pad(t);
  }
  const ggml_cplan cplan = ggml_graph_plan(graph, plan.threads, nullptr);
  bytes += ggml_tensor_overhead() + cplan.work_size + GGML_MEM_ALIGN;
  ggml_free(probe);
  return bytes + 4096;  // the padding of objects whose data ggml_new_object rounds together
}

// Builds the plan's graph over the caller's buffers and allocates what it keeps.
int finish(std::unique_ptr<ggml_peer_plan> plan, ggml_peer_plan** out) {
  ggml_init_params params = {4 * 1024 * 1024, nullptr, true};
  plan->ctx = ggml_init(params);
  std::vector<ggml_tensor*> outputs;
  plan->graph = make_graph(plan->ctx, *plan, Placement::kIntoBuffers, &outputs);
  if (outputs.size() != plan->outputs.size()) return fail(kError, "internal: output count");
  for (size_t i = 0; i < outputs.size(); ++i) {
    const bool in_place = outputs[i]->view_src != nullptr;
    if (in_place != (plan->outputs[i] == nullptr)) {
      return fail(kError, "internal: output " + std::to_string(i) + " placement");
    }
    if (!in_place) outputs[i]->data = plan->outputs[i];
  }
  // What is still without data are the intermediates: ggml-alloc places them in one buffer,
  // once, as llama.cpp plans its compute buffer.
  plan->galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
  if (!ggml_gallocr_alloc_graph(plan->galloc, plan->graph)) {
    return fail(kError, "ggml_gallocr_alloc_graph failed");
  }
  plan->cplan = ggml_graph_plan(plan->graph, plan->threads, nullptr);
  if (plan->cplan.work_size > 0) {
    const size_t size = (plan->cplan.work_size + 63) / 64 * 64;
    plan->work = std::aligned_alloc(64, size);
    if (!plan->work) return fail(kError, "cannot allocate the work buffer");
    plan->cplan.work_data = static_cast<uint8_t*>(plan->work);
  }
  plan->per_call_bytes = per_call_size(*plan);
  plan->description = describe(plan->graph);
  *out = plan.release();
  return kOk;
}

int check_common(ggml_peer_plan** out, int dtype, int threads) {
  init_once();
  if (!out) return fail(kError, "no plan pointer");
  *out = nullptr;
  if (dtype != kF32 && dtype != kBF16) return fail(kError, "dtype must be 0 (f32) or 1 (bf16)");
  if (threads < 1) return fail(kError, "threads must be at least 1");
  return kOk;
}

bool positive(std::initializer_list<int64_t> dims) {
  for (int64_t d : dims) {
    if (d < 1 || d > (int64_t{1} << 31)) return false;
  }
  return true;
}

ggml_tensor* to_f32(ggml_context* ctx, ggml_tensor* t) {
  return t->type == GGML_TYPE_F32 ? t : ggml_cast(ctx, t, GGML_TYPE_F32);
}

}  // namespace

extern "C" {

const char* ggml_peer_error() {
  return g_error.c_str();
}

// The version of the ggml library loaded (the commit is unknown: build.sh builds outside git)
// and the CPU features its kernels use.
const char* ggml_peer_info() {
  init_once();
  static const std::string info = [] {
    std::string s = std::string("libggml ") + ggml_version() + "; CPU:";
    const struct {
      const char* name;
      int (*has)();
    } features[] = {{"AVX2", ggml_cpu_has_avx2},
                    {"FMA", ggml_cpu_has_fma},
                    {"F16C", ggml_cpu_has_f16c},
                    {"AVX512", ggml_cpu_has_avx512},
                    {"AVX512_VNNI", ggml_cpu_has_avx512_vnni},
                    {"AVX512_BF16", ggml_cpu_has_avx512_bf16},
                    {"AMX_INT8", ggml_cpu_has_amx_int8}};
    for (const auto& f : features) {
      if (f.has()) s += std::string(" ") + f.name;
    }
    return s;
  }();
  return info.c_str();
}

const char* ggml_peer_describe(const ggml_peer_plan* plan) {
  return plan ? plan->description.c_str() : "";
}

void ggml_peer_free(ggml_peer_plan* plan) {
  delete plan;
}

// One compute of the plan's graph into the caller's buffers.
int ggml_peer_run(ggml_peer_plan* plan) {
  if (!plan) return fail(kError, "no plan");
  const ggml_status status = ggml_graph_compute(plan->graph, &plan->cplan);
  if (status != GGML_STATUS_SUCCESS) {
    return fail(kError, std::string("ggml_graph_compute: ") + ggml_status_to_string(status));
  }
  return kOk;
}

// One call the way the ggml examples evaluate a graph: a fresh context holding the outputs,
// intermediates and work buffer, freed before returning.
int ggml_peer_run_alloc(ggml_peer_plan* plan) {
  if (!plan) return fail(kError, "no plan");
  ggml_init_params params = {plan->per_call_bytes, nullptr, false};
  ggml_context* ctx = ggml_init(params);
  std::vector<ggml_tensor*> outputs;
  ggml_cgraph* graph = make_graph(ctx, *plan, Placement::kAllocated, &outputs);
  const ggml_status status = ggml_graph_compute_with_ctx(ctx, graph, plan->threads);
  ggml_free(ctx);
  if (status != GGML_STATUS_SUCCESS) {
    return fail(kError,
                std::string("ggml_graph_compute_with_ctx: ") + ggml_status_to_string(status));
  }
  return kOk;
}

// Attention as llama.cpp's CPU path runs it: ggml_flash_attn_ext with F32 accumulation
// (ggml_prec_set_acc, as llama-graph.cpp sets it). dims: B, Hq, Hkv, Sq, Skv, D. q [B, Hq, Sq,
// D], k/v [B, Hkv, Skv, D] contiguous are ggml's ne [D, S, H, B] as they are; out is ggml's
// permuted result, ne [D, Hq, Sq, B] (torch [B, Sq, Hq, D]), f32 unless via_f32 casts it back.
// The CPU kernel reads Q as f32 (ggml_compute_forward_flash_attn_ext_f16_one_chunk converts
// each f32 row to K's vec_dot type), so a bf16 Q is cast inside the graph; K/V are taken as
// they are (F32, F16 and BF16 all have CPU paths), or cast to f32 as well with via_f32.
// Causal (Sq == Skv) adds a F16 mask [Skv, Sq] of 0 / -inf that the plan makes once.
int ggml_peer_attention(ggml_peer_plan** out, int dtype, int via_f32, void* q, void* k, void* v,
                        void* o, const int64_t* dims, int causal, int threads) {
  if (int rc = check_common(out, dtype, threads)) return rc;
  if (!q || !k || !v || !o || !dims) return fail(kError, "attention: null pointer");
  const int64_t b = dims[0], hq = dims[1], hkv = dims[2], sq = dims[3], skv = dims[4], d = dims[5];
  if (!positive({b, hq, hkv, sq, skv, d})) return fail(kError, "attention: bad dims");
  if (hq % hkv != 0) return fail(kError, "attention: q_heads must be a multiple of kv_heads");
  if (causal && sq != skv) return fail(kUnsupported, "causal attention needs q_len == kv_len");

  auto plan = std::make_unique<ggml_peer_plan>();
  const ggml_type t = float_type(dtype);
  plan->inputs = {{t, {d, sq, hq, b}, q}, {t, {d, skv, hkv, b}, k}, {t, {d, skv, hkv, b}, v}};
  if (causal) {
    // top-left = bottom-right since sq == skv: query i sees keys 0..i.
    plan->owned_f16.resize(static_cast<size_t>(sq * skv));
    const ggml_fp16_t zero = ggml_fp32_to_fp16(0.0f), masked = ggml_fp32_to_fp16(-INFINITY);
    for (int64_t i = 0; i < sq; ++i) {
      for (int64_t j = 0; j < skv; ++j) plan->owned_f16[i * skv + j] = j <= i ? zero : masked;
    }
    plan->inputs.push_back({GGML_TYPE_F16, {skv, sq, 1, 1}, plan->owned_f16.data()});
  }
  plan->outputs = {o};
  plan->threads = threads;
  const bool cast_kv = via_f32 && dtype == kBF16;
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  plan->build = [=](ggml_context* ctx, const std::vector<ggml_tensor*>& in, Placement) {
    ggml_tensor* kk = cast_kv ? to_f32(ctx, in[1]) : in[1];
    ggml_tensor* vv = cast_kv ? to_f32(ctx, in[2]) : in[2];
    ggml_tensor* mask = causal ? in[3] : nullptr;
    ggml_tensor* r = ggml_flash_attn_ext(ctx, to_f32(ctx, in[0]), kk, vv, mask, scale, 0.0f, 0.0f);
    ggml_prec_set_acc(r, GGML_PREC_F32);
    if (cast_kv) r = ggml_cast(ctx, r, GGML_TYPE_BF16);
    return std::vector<ggml_tensor*>{r};
  };
  return finish(std::move(plan), out);
}

// llama.cpp's norm: ggml_rms_norm then ggml_mul by the weight, which the CPU backend fuses into
// one pass when the two nodes are adjacent and f32 (ggml_cpu_try_fuse_ops). x [R, H] and out
// [R, H] in dtype; weight_f32 [H] is f32 in every dtype, as llama.cpp's norm weights are (GGUF
// keeps 1-D tensors in F32); a cast of it in the graph would also sit between the two nodes and
// keep them apart. ggml_compute_forward_rms_norm takes F32 only: bf16 runs only via_f32.
int ggml_peer_rmsnorm(ggml_peer_plan** out, int dtype, int via_f32, void* x, void* weight_f32,
                      void* o, int64_t rows, int64_t hidden, double eps, int threads) {
  if (int rc = check_common(out, dtype, threads)) return rc;
  if (!x || !weight_f32 || !o) return fail(kError, "rmsnorm: null pointer");
  if (!positive({rows, hidden})) return fail(kError, "rmsnorm: bad dims");
  if (dtype == kBF16 && !via_f32) {
    return fail(kUnsupported,
                "ggml_rms_norm has no BF16 CPU kernel "
                "(ggml_compute_forward_rms_norm takes F32 only)");
  }
  auto plan = std::make_unique<ggml_peer_plan>();
  const ggml_type t = float_type(dtype);
  plan->inputs = {{t, {hidden, rows, 1, 1}, x}, {GGML_TYPE_F32, {hidden, 1, 1, 1}, weight_f32}};
  plan->outputs = {o};
  plan->threads = threads;
  const float e = static_cast<float>(eps);
  plan->build = [=](ggml_context* ctx, const std::vector<ggml_tensor*>& in, Placement) {
    ggml_tensor* r = ggml_mul(ctx, ggml_rms_norm(ctx, to_f32(ctx, in[0]), e), in[1]);
    if (t != GGML_TYPE_F32) r = ggml_cast(ctx, r, t);
    return std::vector<ggml_tensor*>{r};
  };
  return finish(std::move(plan), out);
}

// ggml_swiglu on the [2H] row: ggml_vec_swiglu_*(y, x, g) = silu(x) * g with x the first half
// (not swapped), which is silu(x[:, :H]) * x[:, H:]. x [R, 2H], out [R, H]. F32 and BF16
// kernels both exist (ggml_compute_forward_swiglu); via_f32 casts around the f32 one.
int ggml_peer_silu_and_mul(ggml_peer_plan** out, int dtype, int via_f32, void* x, void* o,
                           int64_t rows, int64_t hidden, int threads) {
  if (int rc = check_common(out, dtype, threads)) return rc;
  if (!x || !o) return fail(kError, "silu_and_mul: null pointer");
  if (!positive({rows, hidden})) return fail(kError, "silu_and_mul: bad dims");
  auto plan = std::make_unique<ggml_peer_plan>();
  const ggml_type t = float_type(dtype);
  plan->inputs = {{t, {2 * hidden, rows, 1, 1}, x}};
  plan->outputs = {o};
  plan->threads = threads;
  const bool cast = via_f32 && dtype == kBF16;
  plan->build = [=](ggml_context* ctx, const std::vector<ggml_tensor*>& in, Placement) {
    ggml_tensor* r = ggml_swiglu(ctx, cast ? to_f32(ctx, in[0]) : in[0]);
    if (cast) r = ggml_cast(ctx, r, t);
    return std::vector<ggml_tensor*>{r};
  };
  return finish(std::move(plan), out);
}

// ggml_rope_ext in NeoX mode for q and k in one graph, with what llama.cpp passes for a plain
// Llama (n_dims = D, freq_scale 1, ext_factor 0, attn_factor 1, beta_fast 32, beta_slow 1;
// n_ctx_orig only matters to YaRN, off at ext_factor 0). q, k are in llama.cpp's layout,
// ne [D, H, S, B] (torch [B, S, H, D]); positions int32 [S]. dims: B, S, H, D. The plan rotates
// in place (ggml_rope_ext_inplace); run_alloc rotates into fresh tensors (ggml_rope_ext).
// ggml_compute_forward_rope takes F32 and F16 only: bf16 runs only via_f32 (cast, rotate the
// f32 copy in place, cast back into q and k, or into fresh tensors in run_alloc).
int ggml_peer_rotary(ggml_peer_plan** out, int dtype, int via_f32, void* q, void* k,
                     void* positions, const int64_t* dims, double theta, int threads) {
  if (int rc = check_common(out, dtype, threads)) return rc;
  if (!q || !k || !positions || !dims) return fail(kError, "rotary: null pointer");
  const int64_t b = dims[0], s = dims[1], h = dims[2], d = dims[3];
  if (!positive({b, s, h, d}) || d % 2 != 0) return fail(kError, "rotary: bad dims");
  if (dtype == kBF16 && !via_f32) {
    return fail(kUnsupported,
                "ggml_rope_ext has no BF16 CPU kernel "
                "(ggml_compute_forward_rope takes F32 and F16 only)");
  }
  auto plan = std::make_unique<ggml_peer_plan>();
  const ggml_type t = float_type(dtype);
  plan->inputs = {
      {t, {d, h, s, b}, q}, {t, {d, h, s, b}, k}, {GGML_TYPE_I32, {s, 1, 1, 1}, positions}};
  plan->outputs = {nullptr, nullptr};  // in place
  plan->threads = threads;
  const int n_dims = static_cast<int>(d), n_ctx_orig = static_cast<int>(s);
  const float base = static_cast<float>(theta);
  plan->build = [=](ggml_context* ctx, const std::vector<ggml_tensor*>& in, Placement where) {
    const bool into = where == Placement::kIntoBuffers;
    auto rotate = [&](ggml_tensor* x) {
      auto rope = (into || t != GGML_TYPE_F32) ? ggml_rope_ext_inplace : ggml_rope_ext;
      ggml_tensor* r = rope(ctx, to_f32(ctx, x), in[2], nullptr, n_dims, GGML_ROPE_TYPE_NEOX,
                            n_ctx_orig, base, 1.0f, 0.0f, 1.0f, 32.0f, 1.0f);
      if (t == GGML_TYPE_F32) return r;
      return into ? ggml_cpy(ctx, r, x) : ggml_cast(ctx, r, t);
    };
    return std::vector<ggml_tensor*>{rotate(in[0]), rotate(in[1])};
  };
  return finish(std::move(plan), out);
}

}  // extern "C"
