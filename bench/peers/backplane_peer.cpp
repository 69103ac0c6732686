// backplane's side of the peers benchmark (bench/peers/backplane_side.py): the CPU kernels behind
// a C ABI that Python calls through ctypes, over buffers Python owns. Nothing here is timed
// differently from the peers: one call is one kernel call, as a C++ host makes it.
//
// dtype: 0 float32, 1 bfloat16. Every function returns 0, or -1 with bp_peer_error() naming
// what the kernel refused (its own message).
#include <dlpack/dlpack.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "activation/activation.hpp"
#include "attention/attention.hpp"
#include "common/threads.hpp"
#include "output_blocks.hpp"
#include "rmsnorm/rmsnorm.hpp"
#include "rotary/rotary.hpp"

namespace {

namespace bk = backplane::kernels;
using backplane::torch::detail::OutputBlocks;

thread_local std::string last_error;

// A compact row-major CPU tensor over `data`; the shape lives as long as the view.
class View {
 public:
  View(const void* data, int dtype, std::vector<int64_t> shape) : shape_(std::move(shape)) {
    tensor_.data = const_cast<void*>(data);
    tensor_.device = {kDLCPU, 0};
    tensor_.ndim = static_cast<int32_t>(shape_.size());
    tensor_.dtype = dtype == 0 ? DLDataType{kDLFloat, 32, 1} : DLDataType{kDLBfloat, 16, 1};
    tensor_.shape = shape_.data();
    tensor_.strides = nullptr;
    tensor_.byte_offset = 0;
  }
  View(const View&) = delete;
  View& operator=(const View&) = delete;
  const DLTensor* get() const { return &tensor_; }

 private:
  std::vector<int64_t> shape_;
  DLTensor tensor_{};
};

int result(const bk::Status& status) {
  if (status.ok()) return 0;
  last_error = status.message;
  return -1;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) const char* bp_peer_error() {
  return last_error.c_str();
}

// Both pools: attention's and the layer kernels'.
__attribute__((visibility("default"))) void bp_peer_set_threads(int n) {
  backplane::attention::set_num_threads(n);
  bk::set_num_threads(n);
}

// What the kernels dispatch to on this CPU, e.g. "attention AVX3 (bf16 tiles: amx), layers AVX3".
__attribute__((visibility("default"))) const char* bp_peer_describe() {
  static const std::string text =
      std::string("attention ") + backplane::attention::dispatch_target() +
      " (bf16 prefill tiles: " + backplane::attention::bf16_tile_kernel() + "), layers " +
      backplane::rmsnorm::cpu_target();
  return text.c_str();
}

// dims: batch, q_heads, kv_heads, q_len, kv_len, head_dim.
__attribute__((visibility("default"))) int bp_peer_attention(int dtype, const void* q,
                                                             const void* k, const void* v,
                                                             void* out, const int64_t* dims,
                                                             int causal) {
  const View qv(q, dtype, {dims[0], dims[1], dims[3], dims[5]});
  const View kv(k, dtype, {dims[0], dims[2], dims[4], dims[5]});
  const View vv(v, dtype, {dims[0], dims[2], dims[4], dims[5]});
  const View ov(out, dtype, {dims[0], dims[1], dims[3], dims[5]});
  backplane::attention::Tensors tensors;
  tensors.query = qv.get();
  tensors.key = kv.get();
  tensors.value = vv.get();
  tensors.output = ov.get();
  backplane::attention::Options options;
  options.causal = causal != 0;
  return result(backplane::attention::forward(tensors, options));
}

__attribute__((visibility("default"))) int bp_peer_rmsnorm(int dtype, const void* x,
                                                           const void* weight, void* out,
                                                           int64_t rows, int64_t hidden,
                                                           double eps) {
  const View xv(x, dtype, {rows, hidden}), wv(weight, dtype, {hidden}),
      ov(out, dtype, {rows, hidden});
  backplane::rmsnorm::Tensors tensors;
  tensors.input = xv.get();
  tensors.weight = wv.get();
  tensors.output = ov.get();
  return result(backplane::rmsnorm::forward_cpu(tensors, eps));
}

__attribute__((visibility("default"))) int bp_peer_silu_and_mul(int dtype, const void* x, void* out,
                                                                int64_t rows, int64_t hidden) {
  const View xv(x, dtype, {rows, 2 * hidden}), ov(out, dtype, {rows, hidden});
  return result(backplane::activation::forward_cpu(backplane::activation::Activation::kSilu,
                                                   xv.get(), ov.get()));
}

// In place on q and k [batch, heads, seq, head_dim]; cos and sin float32 [seq, head_dim / 2].
__attribute__((visibility("default"))) int bp_peer_rotary(int dtype, void* q, void* k,
                                                          const float* cos, const float* sin,
                                                          const int64_t* dims) {
  const View qv(q, dtype, {dims[0], dims[1], dims[2], dims[3]});
  const View kv(k, dtype, {dims[0], dims[1], dims[2], dims[3]});
  const View cv(cos, 0, {dims[2], dims[3] / 2}), sv(sin, 0, {dims[2], dims[3] / 2});
  backplane::rotary::Tensors tensors;
  tensors.query = qv.get();
  tensors.key = kv.get();
  tensors.cos = cv.get();
  tensors.sin = sv.get();
  return result(backplane::rotary::forward_cpu(tensors, backplane::rotary::Style::kNeox));
}

// The LibTorch bridge's output cache (torch/include/backplane/torch/output.hpp): the allocating
// column takes its output here and gives it back, as a layer's `norm(x)` does.
__attribute__((visibility("default"))) void* bp_peer_output_acquire(size_t bytes) {
  return OutputBlocks::process().acquire(bytes);
}
__attribute__((visibility("default"))) void bp_peer_output_release(void* block, size_t bytes) {
  OutputBlocks::process().release(block, bytes);
}

}  // extern "C"
