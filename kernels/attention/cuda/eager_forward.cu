// The reference kernel: one thread block per (batch, query head, query row). Two passes over
// the row's visible keys: the first finds the row maximum of the scores, the second sums
// exp(score - max) and accumulates P V in chunks of one score per thread, so the softmax is
// exact (no rescaling) and nothing but a chunk of scores lives in shared memory. float32
// arithmetic throughout; any dtype, head dims up to kMaxDim.
#include "device_common.cuh"
#if !defined(BACKPLANE_GPU_EMULATE)
#include "launch.hpp"
#endif

namespace backplane::attention::gpu {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxDim = 256;
constexpr int kDimsPerThread = kMaxDim / kThreads;

__global__ void __launch_bounds__(kThreads) eager_forward_kernel(Params p) {
  __shared__ float q_row[kMaxDim];
  __shared__ float probs[kThreads];
  __shared__ float scratch[kThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const int i = static_cast<int>(blockIdx.x);
  const int h = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int hk = h / p.group;
  const int64_t q_off = b * p.q_stride[0] + h * p.q_stride[1] + i * p.q_stride[2];
  const int64_t k_off = b * p.k_stride[0] + hk * p.k_stride[1];
  const int64_t v_off = b * p.v_stride[0] + hk * p.v_stride[1];
  const int64_t o_off = b * p.out_stride[0] + h * p.out_stride[1] + i * p.out_stride[2];

  for (int d = tid; d < p.head_dim; d += kThreads) {
    q_row[d] = load_element(p.q, q_off + d * p.q_stride[3], p.dtype);
  }
  __syncthreads();

  // Keys [0, visible) may be seen; causal is aligned bottom-right.
  int64_t visible = p.seq_k;
  if (p.causal) visible = min(visible, static_cast<int64_t>(i) + p.seq_k - p.seq_q + 1);
  auto score = [&](int j) {
    float dot = 0.0f;
    const int64_t row = k_off + j * p.k_stride[2];
    for (int d = 0; d < p.head_dim; ++d) {
      dot += q_row[d] * load_element(p.k, row + d * p.k_stride[3], p.dtype);
    }
    return dot * p.scale + mask_bias(p, b, h, i, j);
  };

  float row_max = negative_infinity();
  for (int j = tid; j < visible; j += kThreads) row_max = fmaxf(row_max, score(j));
  row_max = block_reduce<kThreads>(row_max, scratch, true);

  float acc[kDimsPerThread] = {};
  float sum = 0.0f;
  if (row_max != negative_infinity()) {  // else every key is masked: the row is zeros
    for (int64_t start = 0; start < visible; start += kThreads) {
      const int64_t j = start + tid;
      const float e = j < visible ? __expf(score(static_cast<int>(j)) - row_max) : 0.0f;
      sum += e;
      probs[tid] = e;
      __syncthreads();
      const int chunk = static_cast<int>(min(static_cast<int64_t>(kThreads), visible - start));
      accumulate_rows<kThreads>(acc, probs, chunk, p.v, v_off + start * p.v_stride[2],
                                p.v_stride[2], p.v_stride[3], p.head_dim_v, p.dtype);
      __syncthreads();  // probs is rewritten by the next chunk
    }
  }
  sum = block_reduce<kThreads>(sum, scratch, false);
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  if (p.lse && tid == 0) {
    p.lse[b * p.lse_stride[0] + h * p.lse_stride[1] + i * p.lse_stride[2]] =
        sum > 0.0f ? row_max + logf(sum) : negative_infinity();
  }
  for (int c = 0; c < kDimsPerThread; ++c) {
    const int d = tid + c * kThreads;
    if (d < p.head_dim_v) store_element(p.out, o_off + d * p.out_stride[3], p.dtype, acc[c] * inv);
  }
}

}  // namespace

#if !defined(BACKPLANE_GPU_EMULATE)
LaunchStatus launch_eager(const Params& params, GpuStream stream) {
  const dim3 grid(static_cast<unsigned>(params.seq_q), static_cast<unsigned>(params.heads_q),
                  static_cast<unsigned>(params.batch));
  eager_forward_kernel<<<grid, kThreads, 0, stream>>>(params);
  return gpuGetLastError();
}
#endif

}  // namespace backplane::attention::gpu
