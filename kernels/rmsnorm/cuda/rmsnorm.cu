// The CUDA RMSNorm: one block per row; each thread sums the squares of a strided share of the
// row (adding and writing back the residual first), a block reduction gives the row's inverse
// RMS, and the same threads scale the same elements.
#include <algorithm>

#include "common/cuda_rows.cuh"
#include "rmsnorm/problem.hpp"

namespace backplane::rmsnorm {
namespace {

using kernels::DType;
using kernels::gpu::DeviceRows;
using kernels::gpu::from_float;
using kernels::gpu::to_float;

constexpr int kMaxThreads = 1024;

__device__ float block_sum(float v) {
  __shared__ float partial[kMaxThreads / 32];
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  if (lane == 0) partial[warp] = v;
  __syncthreads();
  const int warps = static_cast<int>(blockDim.x + 31) / 32;
  v = lane < warps ? partial[lane] : 0.0f;
  for (int o = 16; o > 0; o /= 2) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;  // every thread has the sum
}

template <class S, bool kResidual>
__global__ void rms_norm_rows(DeviceRows input, DeviceRows residual, DeviceRows output,
                              const S* weight, int64_t hidden, float epsilon) {
  const int64_t row = blockIdx.x;
  const S* x = reinterpret_cast<const S*>(input.data) + input.offset(row);
  S* r = kResidual ? reinterpret_cast<S*>(residual.data) + residual.offset(row) : nullptr;
  S* out = reinterpret_cast<S*>(output.data) + output.offset(row);
  float sum = 0.0f;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    float v = to_float(x[i]);
    if (kResidual) {
      const S rounded = from_float<S>(v + to_float(r[i]));
      r[i] = rounded;
      v = to_float(rounded);
    }
    sum += v * v;
  }
  sum = block_sum(sum);
  const float inv_rms = rsqrtf(sum / static_cast<float>(hidden) + epsilon);
  const S* src = kResidual ? r : x;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    out[i] = from_float<S>(to_float(src[i]) * inv_rms * to_float(weight[i]));
  }
}

template <DType T>
void launch(const Problem& p, cudaStream_t stream) {
  using S = typename kernels::gpu::Storage<T>::type;
  const int threads = static_cast<int>(std::min<int64_t>(
      kMaxThreads, std::max<int64_t>(32, (std::min<int64_t>(p.hidden, 256) + 31) / 32 * 32)));
  const DeviceRows in = kernels::gpu::device_rows(p.input);
  const DeviceRows res = kernels::gpu::device_rows(p.residual);
  const DeviceRows out = kernels::gpu::device_rows(p.output);
  const auto* w = static_cast<const S*>(p.weight);
  const auto blocks = static_cast<unsigned>(p.rows);
  const auto kernel = p.residual.data ? rms_norm_rows<S, true> : rms_norm_rows<S, false>;
  BACKPLANE_LAUNCH(kernel, blocks, threads, stream, in, res, out, w, p.hidden, p.epsilon);
}

}  // namespace

Status forward_cuda(const Tensors& tensors, double epsilon, void* stream) {
  Problem p;
  Status s = make_problem(tensors, epsilon, kernels::Memory::kCuda, &p);
  if (!s.ok() || p.rows == 0 || p.hidden == 0) return s;
  if (p.rows > 0x7fffffff) return kernels::invalid("rms_norm", "more than 2^31 - 1 rows");
  const auto cu_stream = static_cast<cudaStream_t>(stream);
  switch (p.dtype) {
    case DType::kF32:
      launch<DType::kF32>(p, cu_stream);
      break;
    case DType::kBF16:
      launch<DType::kBF16>(p, cu_stream);
      break;
    case DType::kF16:
      launch<DType::kF16>(p, cu_stream);
      break;
  }
  return kernels::gpu::launch_status("rms_norm");
}

}  // namespace backplane::rmsnorm
