// FlashAttention-2 forward. One thread block computes kRows query rows of one (batch, query
// head); each warp owns 16 of those rows. The block walks the key/value sequence in tiles of
// kKeys keys, keeping the scores S = Q K^T of a tile in registers, the running row maximum and
// row sum of the online softmax per row, and the output accumulator O in registers (fp32); the
// full score matrix never exists. Causal blocks stop at the last tile their rows can see, and
// only tiles that cross the diagonal or the end of the keys compare indices per element.
//
// NVIDIA (sm_80 and later): Q K^T and P V run on tensor cores (mma.sync m16n8k16, bf16 or fp16
// in, fp32 accumulate), operands come from shared memory through ldmatrix, and the next K/V
// tile is copied with cp.async while the current one is in use (two stages). Shared-memory
// tiles are stored with an XOR swizzle of 16-byte chunks so ldmatrix reads hit distinct banks.
//
// AMD (hipcc): the same tiling and softmax, but the two products are plain fp32 FMA loops over
// shared memory (no MFMA), one stage, and P goes through shared memory for P V. It is correct
// and portable, not fast.
//
// Head dims are padded to a bucket (64, 128 or 256) with zeros, so any head_dim and
// head_dim_v up to 256 work; only the bucket is a template parameter.
#include "device_common.cuh"
#if !defined(BACKPLANE_GPU_EMULATE)
#include "launch.hpp"
#endif

namespace backplane::attention::gpu {
namespace {

#if defined(BACKPLANE_GPU_AMD)
constexpr int kWarps = 2;
constexpr int kStages = 1;
#else
constexpr int kWarps = 4;
constexpr int kStages = 2;
#endif
constexpr int kThreads = kWarps * 32;
constexpr int kRows = kWarps * 16;
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

template <int D>
struct Tile {
  static constexpr int kKeys = D >= 256 ? 32 : 64;
  static constexpr int kQElements = kRows * D;
  static constexpr int kKvElements = kKeys * D;
#if defined(BACKPLANE_GPU_AMD)
  static constexpr int kProbFloats = kWarps * 16 * kKeys;
#else
  static constexpr int kProbFloats = 0;
#endif
  static constexpr size_t kSharedBytes =
      (kQElements + 2 * kStages * kKvElements) * sizeof(uint16_t) + kProbFloats * sizeof(float);
};

// Element (row, col) of a [rows][D] tile: 16-byte chunks XOR-permuted by the row's low bits,
// so 8 consecutive rows at one column land in 8 different bank groups. D is a multiple of 64.
template <int D>
__device__ __forceinline__ int swizzle(int row, int col) {
  return row * D + ((((col >> 3) ^ row) & 7) | ((col >> 3) & ~7)) * 8 + (col & 7);
}

__device__ __forceinline__ uint32_t pack(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

#if !defined(BACKPLANE_GPU_AMD) && !defined(BACKPLANE_GPU_EMULATE)
// (Under BACKPLANE_GPU_EMULATE the tests supply these five from PTX's definitions.)
__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void copy_async_16(void* shared, const void* global) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(shared_address(shared)),
               "l"(global));
}
__device__ __forceinline__ void copy_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
template <int kPending>
__device__ __forceinline__ void copy_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const uint16_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const uint16_t* p) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(p)));
}

// c += a b for a 16x16 A (row-major fragments) and 16x8 B (column fragments), fp32 c.
template <class T>
__device__ __forceinline__ void mma_16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1);
template <>
__device__ __forceinline__ void mma_16816<Bf16>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                                uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma_16816<F16>(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                               uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
#endif

// Copies rows [0, rows) and columns [0, cols) of a [R][D] tile from global memory, and zeros
// the rest of the tile, so padding rows and columns contribute nothing to either product.
template <int D, int R>
__device__ __forceinline__ void load_tile(uint16_t* tile, const uint16_t* src, int64_t row_stride,
                                          int64_t col_stride, int rows, int cols, bool vector) {
  constexpr int kChunks = D / 8;
  for (int c = static_cast<int>(threadIdx.x); c < R * kChunks; c += kThreads) {
    const int r = c / kChunks;
    const int col = (c % kChunks) * 8;
    uint16_t* dst = tile + swizzle<D>(r, col);
    if (r >= rows || col >= cols) {
      *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
      continue;
    }
    const uint16_t* row = src + r * row_stride;
    if (vector) {  // cols is a multiple of 8 and the chunk is 16-byte aligned
#if defined(BACKPLANE_GPU_AMD)
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(row + col);
#else
      copy_async_16(dst, row + col);
#endif
      continue;
    }
    uint16_t e[8];
    for (int i = 0; i < 8; ++i) e[i] = col + i < cols ? row[(col + i) * col_stride] : uint16_t{0};
    *reinterpret_cast<uint4*>(dst) =
        make_uint4(pack(e[0], e[1]), pack(e[2], e[3]), pack(e[4], e[5]), pack(e[6], e[7]));
  }
}

// s[nt][e] = Q K^T for this warp's 16 rows and the tile's keys, in mma C-fragment layout:
// lane (g = lane / 4, t = lane % 4) holds rows g (e = 0, 1) and g + 8 (e = 2, 3), keys
// nt * 8 + 2t + (e & 1).
template <class T, int D>
__device__ __forceinline__ void tile_scores(float (&s)[Tile<D>::kKeys / 8][4], const uint16_t* sq,
                                            const uint16_t* sk, int warp, int lane) {
  constexpr int kKeyTiles = Tile<D>::kKeys / 8;
#if defined(BACKPLANE_GPU_AMD)
  const int g = lane / 4, t = lane % 4;
  for (int nt = 0; nt < kKeyTiles; ++nt) {
    for (int e = 0; e < 4; ++e) {
      const int row = warp * 16 + g + (e >> 1) * 8;
      const int key = nt * 8 + 2 * t + (e & 1);
      float acc = 0.0f;
      for (int d = 0; d < D; ++d) {
        acc += T::load(sq[swizzle<D>(row, d)]) * T::load(sk[swizzle<D>(key, d)]);
      }
      s[nt][e] = acc;
    }
  }
#else
#pragma unroll
  for (int nt = 0; nt < kKeyTiles; ++nt) {
    s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
  }
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    uint32_t a[4];
    ldmatrix_x4(a, sq + swizzle<D>(warp * 16 + (lane & 15), ks * 16 + (lane >> 4) * 8));
#pragma unroll
    for (int np = 0; np < kKeyTiles / 2; ++np) {
      uint32_t b[4];
      ldmatrix_x4(b, sk + swizzle<D>(np * 16 + (lane & 7) + (lane >> 4) * 8,
                                     ks * 16 + ((lane >> 3) & 1) * 8));
      mma_16816<T>(s[2 * np], a, b[0], b[1]);
      mma_16816<T>(s[2 * np + 1], a, b[2], b[3]);
    }
  }
#endif
}

// o += P V, with P (the softmax numerators, s) in the same fragment layout as the scores and
// o in C-fragment layout over the head dim: o[dt][e] is row g + (e >> 1) * 8, dim
// dt * 8 + 2t + (e & 1).
template <class T, int D>
__device__ __forceinline__ void accumulate_pv(float (&o)[D / 8][4],
                                              const float (&s)[Tile<D>::kKeys / 8][4],
                                              const uint16_t* sv, float* sp, int warp, int lane) {
  constexpr int kKeys = Tile<D>::kKeys;
#if defined(BACKPLANE_GPU_AMD)
  const int g = lane / 4, t = lane % 4;
  float* mine = sp + warp * 16 * kKeys;
  for (int nt = 0; nt < kKeys / 8; ++nt) {
    for (int e = 0; e < 4; ++e)
      mine[(g + (e >> 1) * 8) * kKeys + nt * 8 + 2 * t + (e & 1)] = s[nt][e];
  }
  __syncthreads();
  for (int dt = 0; dt < D / 8; ++dt) {
    for (int e = 0; e < 4; ++e) {
      const float* p_row = mine + (g + (e >> 1) * 8) * kKeys;
      const int dim = dt * 8 + 2 * t + (e & 1);
      float acc = o[dt][e];
      for (int n = 0; n < kKeys; ++n) acc += p_row[n] * T::load(sv[swizzle<D>(n, dim)]);
      o[dt][e] = acc;
    }
  }
#else
  (void)sp;
  (void)warp;
#pragma unroll
  for (int kk = 0; kk < kKeys / 16; ++kk) {
    // The C fragments of key tiles 2kk and 2kk+1 are exactly the A fragment of a 16-key step.
    const uint32_t a[4] = {pack(T::store(s[2 * kk][0]), T::store(s[2 * kk][1])),
                           pack(T::store(s[2 * kk][2]), T::store(s[2 * kk][3])),
                           pack(T::store(s[2 * kk + 1][0]), T::store(s[2 * kk + 1][1])),
                           pack(T::store(s[2 * kk + 1][2]), T::store(s[2 * kk + 1][3]))};
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, sv + swizzle<D>(kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8,
                                           dp * 16 + (lane >> 4) * 8));
      mma_16816<T>(o[2 * dp], a, b[0], b[1]);
      mma_16816<T>(o[2 * dp + 1], a, b[2], b[3]);
    }
  }
#endif
}

template <class T, int D>
__global__ void __launch_bounds__(kThreads) flash_forward_kernel(Params p) {
  constexpr int kKeys = Tile<D>::kKeys;
  constexpr int kKeyTiles = kKeys / 8;
  BACKPLANE_DYNAMIC_SHARED(uint4, shared_raw);
  uint16_t* sq = reinterpret_cast<uint16_t*>(shared_raw);
  uint16_t* sk = sq + Tile<D>::kQElements;
  uint16_t* sv = sk + kStages * Tile<D>::kKvElements;
  float* sp = reinterpret_cast<float*>(sv + kStages * Tile<D>::kKvElements);

  const int tid = static_cast<int>(threadIdx.x);
  const int warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;
  const int m0 = static_cast<int>(blockIdx.x) * kRows;
  const int h = static_cast<int>(blockIdx.y);
  const int b = static_cast<int>(blockIdx.z);
  const int hk = h / p.group;
  const bool vector = p.vector_loads != 0;
  const auto* q = static_cast<const uint16_t*>(p.q) + b * p.q_stride[0] + h * p.q_stride[1] +
                  m0 * p.q_stride[2];
  const auto* k = static_cast<const uint16_t*>(p.k) + b * p.k_stride[0] + hk * p.k_stride[1];
  const auto* v = static_cast<const uint16_t*>(p.v) + b * p.v_stride[0] + hk * p.v_stride[1];

  // Query i sees keys j <= i + diagonal; this block's last row bounds the keys it reads.
  const int64_t diagonal = static_cast<int64_t>(p.seq_k) - p.seq_q;
  int64_t key_end = p.seq_k;
  if (p.causal) key_end = max(int64_t{0}, min(key_end, m0 + kRows + diagonal));
  const int key_tiles = static_cast<int>((key_end + kKeys - 1) / kKeys);

  auto load_kv = [&](int tile, int stage) {
    const int n0 = tile * kKeys;
    const int rows = min(kKeys, p.seq_k - n0);
    load_tile<D, kKeys>(sk + stage * Tile<D>::kKvElements, k + n0 * p.k_stride[2], p.k_stride[2],
                        p.k_stride[3], rows, p.head_dim, vector);
    load_tile<D, kKeys>(sv + stage * Tile<D>::kKvElements, v + n0 * p.v_stride[2], p.v_stride[2],
                        p.v_stride[3], rows, p.head_dim_v, vector);
  };

  load_tile<D, kRows>(sq, q, p.q_stride[2], p.q_stride[3], min(kRows, p.seq_q - m0), p.head_dim,
                      vector);
  if (key_tiles > 0) load_kv(0, 0);
#if !defined(BACKPLANE_GPU_AMD)
  copy_async_commit();
#endif

  float o[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
  float row_max[2] = {negative_infinity(), negative_infinity()};
  float row_sum[2] = {0.0f, 0.0f};  // this lane's share; the four lanes of a row add up at the end
  const int row_base = m0 + warp * 16 + g;  // this lane's rows: row_base and row_base + 8

  for (int j = 0; j < key_tiles; ++j) {
#if defined(BACKPLANE_GPU_AMD)
    constexpr int stage = 0;
    if (j > 0) load_kv(j, 0);  // the previous tile's readers have passed the closing barrier
#else
    const int stage = j & 1;
    if (j + 1 < key_tiles) {
      load_kv(j + 1, stage ^ 1);
      copy_async_commit();
      copy_async_wait<1>();  // all but the newest group: tile j (and Q) have landed
    } else {
      copy_async_wait<0>();
    }
#endif
    __syncthreads();

    float s[kKeyTiles][4];
    tile_scores<T, D>(s, sq, sk + stage * Tile<D>::kKvElements, warp, lane);

    // Scale, mask, and move to base 2 for exp2f.
    const int n0 = j * kKeys;
    const bool edge = n0 + kKeys > p.seq_k || (p.causal && n0 + kKeys - 1 > m0 + diagonal);
#pragma unroll
    for (int nt = 0; nt < kKeyTiles; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = row_base + (e >> 1) * 8;
        const int col = n0 + nt * 8 + 2 * t + (e & 1);
        float x = s[nt][e] * p.scale;
        if (p.mask_type != MaskType::kNone && row < p.seq_q && col < p.seq_k) {
          x += mask_bias(p, b, h, row, col);
        }
        if (edge && (col >= p.seq_k || (p.causal && col > row + diagonal))) {
          x = negative_infinity();
        }
        s[nt][e] = x * kLog2e;
      }
    }

    // Online softmax: new row maximum over the four lanes of each row, rescale what was
    // accumulated, and turn the scores into numerators.
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float tile_max = negative_infinity();
#pragma unroll
      for (int nt = 0; nt < kKeyTiles; ++nt) {
        tile_max = fmaxf(tile_max, fmaxf(s[nt][2 * r], s[nt][2 * r + 1]));
      }
      tile_max = fmaxf(tile_max, shuffle_xor(tile_max, 1));
      tile_max = fmaxf(tile_max, shuffle_xor(tile_max, 2));
      const float new_max = fmaxf(row_max[r], tile_max);
      // A row with nothing visible yet keeps -inf; subtracting 0 keeps its numerators 0.
      const float base = new_max == negative_infinity() ? 0.0f : new_max;
      const float alpha = exp2f(row_max[r] - base);
      row_max[r] = new_max;
      float sum = 0.0f;
#pragma unroll
      for (int nt = 0; nt < kKeyTiles; ++nt) {
        s[nt][2 * r] = exp2f(s[nt][2 * r] - base);
        s[nt][2 * r + 1] = exp2f(s[nt][2 * r + 1] - base);
        sum += s[nt][2 * r] + s[nt][2 * r + 1];
      }
      row_sum[r] = row_sum[r] * alpha + sum;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        o[dt][2 * r] *= alpha;
        o[dt][2 * r + 1] *= alpha;
      }
    }

    accumulate_pv<T, D>(o, s, sv + stage * Tile<D>::kKvElements, sp, warp, lane);
    __syncthreads();  // everyone is done with this stage before it is refilled
  }
#if !defined(BACKPLANE_GPU_AMD)
  copy_async_wait<0>();  // a block with no visible key still has the Q copy in flight
#endif

  auto* out = static_cast<uint16_t*>(p.out) + b * p.out_stride[0] + h * p.out_stride[1];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float sum = row_sum[r];
    sum += shuffle_xor(sum, 1);
    sum += shuffle_xor(sum, 2);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;  // a fully masked row is zeros
    const int row = row_base + r * 8;
    if (row >= p.seq_q) continue;
    if (p.lse && t == 0) {  // ln(sum 2^(x - max)) + max ln 2, the row's natural logsumexp
      float* lse = p.lse + b * p.lse_stride[0] + h * p.lse_stride[1] + row * p.lse_stride[2];
      *lse = sum > 0.0f ? (row_max[r] + log2f(sum)) * kLn2 : negative_infinity();
    }
    uint16_t* out_row = out + row * p.out_stride[2];
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int dim = dt * 8 + 2 * t + c;
        if (dim < p.head_dim_v) out_row[dim * p.out_stride[3]] = T::store(o[dt][2 * r + c] * inv);
      }
    }
  }
}

#if !defined(BACKPLANE_GPU_EMULATE)
template <class T, int D>
LaunchStatus launch(const Params& p, GpuStream stream) {
  constexpr size_t kBytes = Tile<D>::kSharedBytes;
#if !defined(BACKPLANE_GPU_AMD)
  if (kBytes > 48 * 1024) {  // above the default limit, the kernel must opt in
    const LaunchStatus status = cudaFuncSetAttribute(
        flash_forward_kernel<T, D>, cudaFuncAttributeMaxDynamicSharedMemorySize, int{kBytes});
    if (status != kLaunchOk) return status;
  }
#endif
  const dim3 grid(static_cast<unsigned>((p.seq_q + kRows - 1) / kRows),
                  static_cast<unsigned>(p.heads_q), static_cast<unsigned>(p.batch));
  flash_forward_kernel<T, D><<<grid, kThreads, kBytes, stream>>>(p);
  return gpuGetLastError();
}

template <class T>
LaunchStatus launch_bucket(const Params& p, GpuStream stream) {
  const int dim = max(p.head_dim, p.head_dim_v);
  if (dim <= 64) return launch<T, 64>(p, stream);
  if (dim <= 128) return launch<T, 128>(p, stream);
  return launch<T, 256>(p, stream);
}

#endif
}  // namespace

#if !defined(BACKPLANE_GPU_EMULATE)
LaunchStatus launch_flash(const Params& params, GpuStream stream) {
  return params.dtype == ElementType::kBfloat16 ? launch_bucket<Bf16>(params, stream)
                                                : launch_bucket<F16>(params, stream);
}
#endif

}  // namespace backplane::attention::gpu
