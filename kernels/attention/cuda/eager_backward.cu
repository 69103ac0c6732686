// The reference backward: the gradients straight from the forward's saved logsumexp, float32
// arithmetic, any dtype, head dims up to kMaxDim. Two kernels, each owning what it writes, so
// there are no atomics and the bits do not depend on scheduling:
//   dq:  one block per (batch, query head, query row i): D_i = dO_i . O_i, then over the row's
//        visible keys in chunks of one key per thread, p = exp(s - lse_i), dp = dO_i . v_j,
//        ds = p (dp - D_i); dq_i = scale sum_j ds_j k_j.
//   dkv: one block per (batch, kv head, key j): over the query rows of the group that see key
//        j, in chunks of one row per thread, the same p and ds (D recomputed per row);
//        dv_j = sum_i p dO_i, dk_j = scale sum_i ds q_i.
// Every score is computed twice (once per kernel), as in FlashAttention-2's split of dQ from
// dK/dV without atomics. Plain FMA loops over global memory: correct on both vendors, not fast.
#include "device_common.cuh"
#if !defined(BACKPLANE_GPU_EMULATE)
#include "launch.hpp"
#endif

namespace backplane::attention::gpu {
namespace {

constexpr int kThreads = 128;
constexpr int kMaxDim = 256;
constexpr int kDimsPerThread = kMaxDim / kThreads;

__device__ float row_dot(const void* a, int64_t a_off, int64_t a_step, const float* b, int n,
                         ElementType type) {
  float dot = 0.0f;
  for (int d = 0; d < n; ++d) dot += load_element(a, a_off + d * a_step, type) * b[d];
  return dot;
}

__device__ float lse_of(const Params& p, int b, int h, int i) {
  return p.lse[b * p.lse_stride[0] + h * p.lse_stride[1] + i * p.lse_stride[2]];
}

// The last key query i sees, plus one.
__device__ int64_t visible_keys(const Params& p, int i) {
  int64_t visible = p.seq_k;
  if (p.causal) visible = min(visible, static_cast<int64_t>(i) + p.seq_k - p.seq_q + 1);
  return visible;
}

__global__ void __launch_bounds__(kThreads) eager_backward_dq_kernel(BackwardParams bp) {
  const Params& p = bp.fwd;
  __shared__ float q_row[kMaxDim];
  __shared__ float dout_row[kMaxDim];
  __shared__ float ds_chunk[kThreads];
  __shared__ float scratch[kThreads];
  const int tid = static_cast<int>(threadIdx.x);
  const int i = static_cast<int>(blockIdx.x);
  const int h = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int hk = h / p.group;
  const int64_t q_off = b * p.q_stride[0] + h * p.q_stride[1] + i * p.q_stride[2];
  const int64_t do_off =
      b * bp.grad_out_stride[0] + h * bp.grad_out_stride[1] + i * bp.grad_out_stride[2];
  const int64_t o_off = b * p.out_stride[0] + h * p.out_stride[1] + i * p.out_stride[2];
  const int64_t k_off = b * p.k_stride[0] + hk * p.k_stride[1];
  const int64_t v_off = b * p.v_stride[0] + hk * p.v_stride[1];

  float delta = 0.0f;
  for (int d = tid; d < kMaxDim; d += kThreads) {
    if (d < p.head_dim) q_row[d] = load_element(p.q, q_off + d * p.q_stride[3], p.dtype);
    if (d < p.head_dim_v) {
      dout_row[d] = load_element(bp.grad_out, do_off + d * bp.grad_out_stride[3], p.dtype);
      delta += dout_row[d] * load_element(p.out, o_off + d * p.out_stride[3], p.dtype);
    }
  }
  delta = block_reduce<kThreads>(delta, scratch,
                                 false);  // also the barrier after the shared rows are written

  const float lse = lse_of(p, b, h, i);
  const int64_t visible = lse == negative_infinity() ? 0 : visible_keys(p, i);
  float acc[kDimsPerThread] = {};
  for (int64_t start = 0; start < visible; start += kThreads) {
    const int64_t j = start + tid;
    float ds = 0.0f;
    if (j < visible) {
      const int64_t k_row = k_off + j * p.k_stride[2];
      const float s = row_dot(p.k, k_row, p.k_stride[3], q_row, p.head_dim, p.dtype) * p.scale +
                      mask_bias(p, b, h, i, static_cast<int>(j));
      const float prob = __expf(s - lse);
      const float dp =
          row_dot(p.v, v_off + j * p.v_stride[2], p.v_stride[3], dout_row, p.head_dim_v, p.dtype);
      ds = prob * (dp - delta);
    }
    ds_chunk[tid] = ds;
    __syncthreads();
    const int chunk = static_cast<int>(min(static_cast<int64_t>(kThreads), visible - start));
    accumulate_rows<kThreads>(acc, ds_chunk, chunk, p.k, k_off + start * p.k_stride[2],
                              p.k_stride[2], p.k_stride[3], p.head_dim, p.dtype);
    __syncthreads();  // ds_chunk is rewritten by the next chunk
  }
  const int64_t dq_off =
      b * bp.grad_q_stride[0] + h * bp.grad_q_stride[1] + i * bp.grad_q_stride[2];
  for (int c = 0; c < kDimsPerThread; ++c) {
    const int d = tid + c * kThreads;
    if (d < p.head_dim) {
      store_element(bp.grad_q, dq_off + d * bp.grad_q_stride[3], p.dtype, acc[c] * p.scale);
    }
  }
}

__global__ void __launch_bounds__(kThreads) eager_backward_dkv_kernel(BackwardParams bp) {
  const Params& p = bp.fwd;
  __shared__ float k_row[kMaxDim];
  __shared__ float v_row[kMaxDim];
  __shared__ float p_chunk[kThreads];
  __shared__ float ds_chunk[kThreads];
  __shared__ int64_t row_of[kThreads];  // the chunk's (head, query) as head * seq_q + query
  const int tid = static_cast<int>(threadIdx.x);
  const int j = static_cast<int>(blockIdx.x);
  const int hk = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int64_t k_off = b * p.k_stride[0] + hk * p.k_stride[1] + j * p.k_stride[2];
  const int64_t v_off = b * p.v_stride[0] + hk * p.v_stride[1] + j * p.v_stride[2];
  for (int d = tid; d < kMaxDim; d += kThreads) {
    if (d < p.head_dim) k_row[d] = load_element(p.k, k_off + d * p.k_stride[3], p.dtype);
    if (d < p.head_dim_v) v_row[d] = load_element(p.v, v_off + d * p.v_stride[3], p.dtype);
  }
  __syncthreads();

  // Rows r = g * seq_q + i of the group's query heads; causal: query i sees key j when
  // j <= i + seq_k - seq_q, so the rows from that i on.
  const int64_t diagonal = static_cast<int64_t>(j) - (p.seq_k - p.seq_q);
  const int64_t first_query = p.causal && diagonal > 0 ? diagonal : 0;
  const int64_t per_head = p.seq_q > first_query ? p.seq_q - first_query : 0;
  const int64_t rows = per_head * p.group;
  float dk[kDimsPerThread] = {}, dv[kDimsPerThread] = {};
  for (int64_t start = 0; start < rows; start += kThreads) {
    const int64_t r = start + tid;
    float prob = 0.0f, ds = 0.0f;
    int64_t where = 0;
    if (r < rows) {
      const int h = hk * p.group + static_cast<int>(r / per_head);
      const int i = static_cast<int>(first_query + r % per_head);
      where = static_cast<int64_t>(h) * p.seq_q + i;
      const float lse = lse_of(p, b, h, i);
      if (lse != negative_infinity()) {
        const int64_t q_off = b * p.q_stride[0] + h * p.q_stride[1] + i * p.q_stride[2];
        const int64_t do_off =
            b * bp.grad_out_stride[0] + h * bp.grad_out_stride[1] + i * bp.grad_out_stride[2];
        const int64_t o_off = b * p.out_stride[0] + h * p.out_stride[1] + i * p.out_stride[2];
        const float s = row_dot(p.q, q_off, p.q_stride[3], k_row, p.head_dim, p.dtype) * p.scale +
                        mask_bias(p, b, h, i, j);
        prob = __expf(s - lse);
        float dp = 0.0f, delta = 0.0f;
        for (int d = 0; d < p.head_dim_v; ++d) {
          const float g = load_element(bp.grad_out, do_off + d * bp.grad_out_stride[3], p.dtype);
          dp += g * v_row[d];
          delta += g * load_element(p.out, o_off + d * p.out_stride[3], p.dtype);
        }
        ds = prob * (dp - delta);
      }
    }
    p_chunk[tid] = prob;
    ds_chunk[tid] = ds;
    row_of[tid] = where;
    __syncthreads();
    const int chunk = static_cast<int>(min(static_cast<int64_t>(kThreads), rows - start));
    for (int t = 0; t < chunk; ++t) {
      const int h = static_cast<int>(row_of[t] / p.seq_q),
                i = static_cast<int>(row_of[t] % p.seq_q);
      const int64_t q_off = b * p.q_stride[0] + h * p.q_stride[1] + i * p.q_stride[2];
      const int64_t do_off =
          b * bp.grad_out_stride[0] + h * bp.grad_out_stride[1] + i * bp.grad_out_stride[2];
      for (int c = 0; c < kDimsPerThread; ++c) {
        const int d = tid + c * kThreads;
        if (d < p.head_dim) {
          dk[c] += ds_chunk[t] * load_element(p.q, q_off + d * p.q_stride[3], p.dtype);
        }
        if (d < p.head_dim_v) {
          dv[c] +=
              p_chunk[t] * load_element(bp.grad_out, do_off + d * bp.grad_out_stride[3], p.dtype);
        }
      }
    }
    __syncthreads();  // the chunk's shared values are rewritten next
  }
  const int64_t dk_off =
      b * bp.grad_k_stride[0] + hk * bp.grad_k_stride[1] + j * bp.grad_k_stride[2];
  const int64_t dv_off =
      b * bp.grad_v_stride[0] + hk * bp.grad_v_stride[1] + j * bp.grad_v_stride[2];
  for (int c = 0; c < kDimsPerThread; ++c) {
    const int d = tid + c * kThreads;
    if (d < p.head_dim) {
      store_element(bp.grad_k, dk_off + d * bp.grad_k_stride[3], p.dtype, dk[c] * p.scale);
    }
    if (d < p.head_dim_v)
      store_element(bp.grad_v, dv_off + d * bp.grad_v_stride[3], p.dtype, dv[c]);
  }
}

}  // namespace

#if !defined(BACKPLANE_GPU_EMULATE)
LaunchStatus launch_eager_backward(const BackwardParams& params, GpuStream stream) {
  const Params& p = params.fwd;
  if (p.seq_q > 0 && p.heads_q > 0) {
    const dim3 grid(static_cast<unsigned>(p.seq_q), static_cast<unsigned>(p.heads_q),
                    static_cast<unsigned>(p.batch));
    eager_backward_dq_kernel<<<grid, kThreads, 0, stream>>>(params);
    if (const LaunchStatus s = gpuGetLastError(); s != kLaunchOk) return s;
  }
  if (p.seq_k > 0 && p.heads_kv > 0) {
    const dim3 grid(static_cast<unsigned>(p.seq_k), static_cast<unsigned>(p.heads_kv),
                    static_cast<unsigned>(p.batch));
    eager_backward_dkv_kernel<<<grid, kThreads, 0, stream>>>(params);
  }
  return gpuGetLastError();
}
#endif

}  // namespace backplane::attention::gpu
