// CPU attention forward kernels: scaled dot-product attention over DLPack tensors.
//
//   out = softmax(scale * q k^T + mask) v      (per batch and query head)
//
// Shapes (DLPack, strides in elements, NULL strides = compact row-major, byte_offset honoured):
//   query  [batch, heads_q,  seq_q, head_dim]
//   key    [batch, heads_kv, seq_k, head_dim]
//   value  [batch, heads_kv, seq_k, head_dim_v]   (head_dim_v may differ, as in PyTorch)
//   output [batch, heads_q,  seq_q, head_dim_v]   (written; must not overlap an input)
//   mask   optional, broadcastable to [batch, heads_q, seq_q, seq_k] (NumPy rules: missing
//          leading dims and size-1 dims broadcast; any strides, 0 included). Boolean (DLPack
//          bool or uint8, 8 bits: nonzero = keep) or additive (float32 or the query's dtype).
// heads_q must be a multiple of heads_kv: query head h reads kv head h / (heads_q / heads_kv)
// (grouped-query attention; multi-query when heads_kv = 1).
//
// Semantics:
//   - dtypes float32, bfloat16, float16; q, k, v and output share one; accumulation in fp32.
//   - causal is aligned bottom-right: query i sees keys j <= i + seq_k - seq_q (decoding with a
//     KV cache). This equals PyTorch's is_causal only when seq_q == seq_k; PyTorch's is_causal is
//     top-left aligned (torch.nn.attention.bias.causal_lower_right is this one).
//   - A row whose keys are all masked (by the mask, by causal, or seq_k == 0) gives zeros, as
//     at::scaled_dot_product_attention does on CPU in LibTorch 2.15 (math and fused paths).
//   - batch == 0, heads_q == 0 or seq_q == 0: nothing to do, success.
//
// Errors: every function here returns a Status and never throws; messages name the argument
// and what would have been accepted.
//
// Threads: the kernels run on a process-wide pool owned by this library (set_num_threads).
// Concurrent calls from several host threads are safe; they take turns on the pool. Each
// thread keeps its scratch and packed K/V (at most a few MiB) between calls.
// bf16 on CPUs with AMX: the first such call asks Linux for the AMX state
// (arch_prctl(ARCH_REQ_XCOMP_PERM), once per process, as oneDNN does).
#pragma once

#include <dlpack/dlpack.h>

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.hpp"

namespace backplane::attention {

// The kernel libraries' one result type (kernels/common/status.hpp): codes mirror
// bp_status_code of the plugin ABI, so the plugins convert one to one.
using kernels::Status;
using kernels::StatusCode;

// The attn_implementation names of transformers that these kernels serve.
enum class Implementation {
  kSdpa,   // fused, tiled, online softmax; never materializes the score matrix (default)
  kEager,  // the plain reference: scores materialized, softmax, matmul
};
const char* implementation_name(Implementation impl);  // "sdpa", "eager"

struct Options {
  bool causal = false;
  std::optional<double> scale;  // default 1 / sqrt(head_dim)
  Implementation implementation = Implementation::kSdpa;
};

struct Tensors {
  const DLTensor* query = nullptr;
  const DLTensor* key = nullptr;
  const DLTensor* value = nullptr;
  const DLTensor* mask = nullptr;    // optional
  const DLTensor* output = nullptr;  // the kernel writes through output->data
  // Optional output, what backward() needs: float32 [batch, heads_q, seq_q] (any strides), the
  // natural log of each row's softmax denominator, log sum_j exp(scale q.k_j + mask_j); -inf for
  // a row that sees no key. The values of at::_scaled_dot_product_flash_attention_for_cpu's
  // logsumexp. CPU kernels only (the GPU kernels refuse it).
  const DLTensor* logsumexp = nullptr;
};

// The backward's operands: the forward's (query, key, value, mask, output and its saved
// logsumexp, all as the forward had them), the output's gradient, and the three gradients it
// writes, each shaped and typed like its operand (grad_key and grad_value summed over the
// query heads of a group). The mask gets no gradient, as in PyTorch's fused attention.
struct BackwardTensors {
  const DLTensor* query = nullptr;
  const DLTensor* key = nullptr;
  const DLTensor* value = nullptr;
  const DLTensor* mask = nullptr;  // optional
  const DLTensor* output = nullptr;
  const DLTensor* logsumexp = nullptr;
  const DLTensor* grad_output = nullptr;  // [batch, heads_q, seq_q, head_dim_v]
  const DLTensor* grad_query = nullptr;   // written
  const DLTensor* grad_key = nullptr;     // written
  const DLTensor* grad_value = nullptr;   // written
};

// What a call ran on (for tests and logs).
struct RunInfo {
  const char* target = "";  // Highway target of the sdpa kernel ("AVX3", "AVX2", ...); "" for eager
  // "f32-fma", "amx-bf16" (bf16 on AMX) or "avx512-bf16" (bf16 with vdpbf16ps: the tiles, or
  // decoding's Q.K dot products); "" for eager
  const char* tile_kernel = "";
  int threads = 0;         // threads used
  int64_t block_keys = 0;  // keys per kv block of the sdpa kernel; 0 for eager
};

// Checks shapes, dtypes, devices, pointers, alignment and overlap without running anything.
Status validate(const Tensors& tensors, const Options& options = {});

// Validates, then computes the attention into tensors.output. `info` (out, optional).
Status forward(const Tensors& tensors, const Options& options = {}, RunInfo* info = nullptr);

// Validates, then writes the gradients of the forward with the same options (causal, scale):
// FlashAttention-2's backward, the probabilities recomputed tile by tile from the saved
// logsumexp, float32 accumulation. Options::implementation is not used (one backward serves
// both). Rows that saw no key get zero gradients. The gradients must not overlap any operand
// or each other. Deterministic: the same bits for any thread count.
Status backward(const BackwardTensors& tensors, const Options& options = {},
                RunInfo* info = nullptr);

// Threads of the process-wide pool; n <= 0 restores the default,
// std::thread::hardware_concurrency(). Takes effect for the next call.
void set_num_threads(int n);
int num_threads();

// The Highway target the sdpa kernel dispatches to on this CPU ("AVX3", ...), whether bf16
// tiles run on AMX here (Linux grants the process AMX state on the first call), and what bf16
// prefill tiles run on: "amx-bf16", "avx512-bf16" (where vdpbf16ps beats fp32 FMA: AMD Zen 4
// and later) or "f32-fma" (converted).
const char* dispatch_target();
bool has_amx_bf16();
const char* bf16_tile_kernel();

}  // namespace backplane::attention
