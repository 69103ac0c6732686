// The sdpa kernel's bfloat16 tiles on AMX, and the block loop they share with the AVX512-BF16
// tiles (RunBlockBf16), with the fp32 block loop's softmax and bookkeeping; the fp32 tiles take
// the blocks these do not.
// Included once per SIMD target (sdpa.cpp's foreach_target), hence the toggle guard.
#if defined(BACKPLANE_ATTENTION_CPU_SDPA_AMX_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef BACKPLANE_ATTENTION_CPU_SDPA_AMX_INL_H_
#undef BACKPLANE_ATTENTION_CPU_SDPA_AMX_INL_H_
#else
#define BACKPLANE_ATTENTION_CPU_SDPA_AMX_INL_H_
#endif

#include <hwy/highway.h>

#include "cpu/amx-inl.h"
#include "cpu/sdpa_block-inl.h"
#include "cpu/sdpa_dpbf16-inl.h"

HWY_BEFORE_NAMESPACE();
namespace backplane::attention::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

enum class Bf16Tiles { kNone, kAmx, kDpbf16 };

// ------------------------------------------------------------------ bf16 tiles (AMX)
//
// With bfloat16 inputs on CPUs with AMX-BF16 (Sapphire Rapids and later), the tile products run
// on the AMX unit: TDPBF16PS multiplies 16x32 by 32x16 bf16 tiles into a 16x16 fp32 tile, an
// order of magnitude more multiply-adds per cycle than fp32 FMA. (AVX512-BF16's vdpbf16ps, the
// other candidate, issues once per cycle here against two FMAs: the same rate as fp32, measured
// slower once the packing is paid.) The layouts stay those of the fp32 path:
//   S^T[16 keys][16 queries] += K rows [16][32 head_dim]  x  Q^T pairs [16 pairs][16 queries]
//   O[16 queries][16 dims]   += P rows [16][32 keys]       x  V pairs   [16 pairs][16 dims]
// K rows are used in place; Q^T and V are interleaved into pairs (the VNNI layout TDPBF16PS
// wants), P is rounded to bf16 as fused kernels do and transposed into rows. The softmax is
// the fp32 code above. Highway 1.0.3 has no AMX, hence intrinsics in functions built for
// amx-tile/amx-bf16 on top of the AVX3 target, run only where the CPU and OS allow AMX.
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// The most query rows a block has on the AVX-512 targets (Plan::bq: two vectors of 16).
constexpr int64_t kMaxBlockRows = 32;

// Q^T as bf16 pairs along head_dim, qtp[pp * bq + i] = (q_i[2pp + 1] << 16) | q_i[2pp], for the
// block's rows with unit column stride and an even head_dim: each pair is a 32-bit word of the
// row as it lies, so this is a transpose of 16 x 16 words at a time (the scalar loop it
// replaces took 11% of bf16 causal prefill). Pairs and rows past the block's stay as they are.
HWY_INLINE void PackQPairsRows(const uint16_t* const* rows, int64_t nrows, int64_t head_dim,
                               int64_t bq, uint32_t* qtp) {
  const int64_t pairs = head_dim / 2;
  for (int64_t i0 = 0; i0 < nrows; i0 += 16) {
    for (int64_t p0 = 0; p0 < pairs; p0 += 16) {
      const __mmask16 cols = static_cast<__mmask16>((1u << std::min<int64_t>(16, pairs - p0)) - 1u);
      __m512i r[16];
      for (int k = 0; k < 16; ++k) {
        r[k] = i0 + k < nrows ? _mm512_maskz_loadu_epi32(
                                    cols, reinterpret_cast<const uint32_t*>(rows[i0 + k]) + p0)
                              : _mm512_setzero_si512();
      }
      alignas(64) uint32_t block[16 * 16];
      Transpose16x16Rows(r, block, 16);
      for (int64_t c = 0; c < 16 && p0 + c < pairs; ++c) {
        std::memcpy(qtp + (p0 + c) * bq + i0, block + c * 16,
                    static_cast<size_t>(std::min<int64_t>(16, bq - i0)) * sizeof(uint32_t));
      }
    }
  }
}

// S^T tiles: C[jt][it] = sum over head_dim chunks of K rows (tile jt) x Q^T pairs (tile it).
// Strides in bytes. J2/I2: a second key / query tile.
template <bool J2, bool I2>
BACKPLANE_AMX_TARGET HWY_INLINE void AmxQK(const uint16_t* a0, const uint16_t* a1, int lda,
                                           const uint32_t* b0, const uint32_t* b1, int ldb,
                                           int64_t chunks, float* c0, float* c1, int ldc) {
  _tile_zero(0);
  if (I2) _tile_zero(1);
  if (J2) _tile_zero(2);
  if (J2 && I2) _tile_zero(3);
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t boff = ch * 16 * (ldb / 4);
    _tile_loadd(4, a0 + ch * 32, lda);
    if (J2) _tile_loadd(5, a1 + ch * 32, lda);
    _tile_loadd(6, b0 + boff, ldb);
    if (I2) _tile_loadd(7, b1 + boff, ldb);
    _tile_dpbf16ps(0, 4, 6);
    if (I2) _tile_dpbf16ps(1, 4, 7);
    if (J2) _tile_dpbf16ps(2, 5, 6);
    if (J2 && I2) _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c0, ldc);
  if (I2) _tile_stored(1, c0 + 16, ldc);
  if (J2) _tile_stored(2, c1, ldc);
  if (J2 && I2) _tile_stored(3, c1 + 16, ldc);
}

// P.V tiles: C[it][ct] = P rows (tile it) x V pairs (tile ct), over key chunks of 32. C is a
// block of its own, joined to O afterwards (JoinPV): loading O into the tiles would wait for
// the vector stores that rescaled it.
template <bool I2, bool C2>
BACKPLANE_AMX_TARGET HWY_INLINE void AmxPV(const uint32_t* a0, const uint32_t* a1, int lda,
                                           const uint16_t* b, int ldb, int64_t chunks, float* c0,
                                           float* c1, int ldc) {
  _tile_zero(0);
  if (C2) _tile_zero(1);
  if (I2) _tile_zero(2);
  if (I2 && C2) _tile_zero(3);
  for (int64_t ch = 0; ch < chunks; ++ch) {
    const uint16_t* bb = b + ch * 16 * (ldb / 2);
    _tile_loadd(4, a0 + ch * 16, lda);
    if (I2) _tile_loadd(5, a1 + ch * 16, lda);
    _tile_loadd(6, bb, ldb);
    if (C2) _tile_loadd(7, bb + 32, ldb);
    _tile_dpbf16ps(0, 4, 6);
    if (C2) _tile_dpbf16ps(1, 4, 7);
    if (I2) _tile_dpbf16ps(2, 5, 6);
    if (I2 && C2) _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, c0, ldc);
  if (C2) _tile_stored(1, c0 + 16, ldc);
  if (I2) _tile_stored(2, c1, ldc);
  if (I2 && C2) _tile_stored(3, c1 + 16, ldc);
}

// Softmax second pass for the AMX path, straight into bf16 pairs along keys:
// Pp[jj][i] = (bf16(P[2jj + 1 - shift][i]) << 16) | bf16(P[2jj - shift][i]) for jj < pairs,
// zeros for keys outside [0, nk); l = l * alpha + the sum of the probabilities (in fp32).
template <int NR>
BACKPLANE_AMX_TARGET HWY_INLINE void SoftmaxExpPairs(const BlockBuffers& buf, const ScoreArgs& a,
                                                     int64_t nk, int64_t shift, int64_t pairs,
                                                     uint32_t* pp) {
  const DF d;
  const __m512i idx = PairIndex();
  const VF scale2 = hn::Set(d, a.scale2);
  for (int v = 0; v < NR; ++v) {
    const int64_t off = v * 16;
    const VF lim = hn::LoadU(d, buf.lim + off);
    const VF m_use = hn::LoadU(d, buf.m_use + off);
    VF sum = hn::Zero(d);
    for (int64_t jj = 0; jj < pairs; ++jj) {
      const int64_t j = 2 * jj - shift;
      VF p0 = hn::Zero(d), p1 = hn::Zero(d);
      if (j >= 0 && j < nk) p0 = Exp2F<4>(d, hn::Sub(Score(d, a, scale2, lim, j, off), m_use));
      if (j + 1 >= 0 && j + 1 < nk) {
        p1 = Exp2F<4>(d, hn::Sub(Score(d, a, scale2, lim, j + 1, off), m_use));
      }
      sum = hn::Add(sum, hn::Add(p0, p1));
      const __m512bh both = _mm512_cvtne2ps_pbh(p1.raw, p0.raw);  // [p0 x16, p1 x16]
      _mm512_storeu_si512(pp + jj * a.bq + off,
                          _mm512_permutexvar_epi16(idx, reinterpret_cast<const __m512i&>(both)));
    }
    const VF alpha = hn::LoadU(d, buf.alpha + off);
    hn::StoreU(hn::MulAdd(hn::LoadU(d, buf.l + off), alpha, sum), d, buf.l + off);
  }
}

// Vp[jj][c][2] = (V[2jj][c], V[2jj + 1][c]) for jj < pairs and c < dvp; zeros past head_dim_v
// and past nk. `rows`: the block's first V row; rs, cs: row and column strides in elements.
BACKPLANE_AMX_TARGET HWY_INLINE void PackV(const uint16_t* rows, int64_t rs, int64_t cs, int64_t nk,
                                           int64_t pairs, int64_t dv, int64_t dvp, uint16_t* vp) {
  const __m512i idx = PairIndex();
  for (int64_t jj = 0; jj < pairs; ++jj) {
    const uint16_t* r0 = rows + 2 * jj * rs;
    const uint16_t* r1 = r0 + rs;
    const bool has0 = 2 * jj < nk, has1 = 2 * jj + 1 < nk;
    uint16_t* dst = vp + jj * dvp * 2;
    if (cs == 1) {
      for (int64_t c = 0; c < dvp; c += 16) {
        const int64_t left = std::min<int64_t>(16, std::max<int64_t>(0, dv - c));
        const __mmask16 m = static_cast<__mmask16>((1u << left) - 1u);
        const __m256i a = has0 ? _mm256_maskz_loadu_epi16(m, r0 + c) : _mm256_setzero_si256();
        const __m256i bb = has1 ? _mm256_maskz_loadu_epi16(m, r1 + c) : _mm256_setzero_si256();
        const __m512i both = _mm512_inserti64x4(_mm512_castsi256_si512(a), bb, 1);
        _mm512_storeu_si512(dst + 2 * c, _mm512_permutexvar_epi16(idx, both));
      }
    } else {
      for (int64_t c = 0; c < dvp; ++c) {
        dst[2 * c] = c < dv && has0 ? r0[c * cs] : 0;
        dst[2 * c + 1] = c < dv && has1 ? r1[c * cs] : 0;
      }
    }
  }
}

// V of one head packed into pairs (PackV), kept per thread across the query blocks of that head
// within one call: each block needs a prefix of the same pairs, so V is packed about once per
// head and thread instead of once per block. Heads above kMaxBytes (16K keys of 128 dims) pack
// per block; the cap bounds what each thread keeps between calls.
struct PackedV {
  uint64_t call = ~uint64_t{0};
  int64_t b = -1, hk = -1, split = -1;
  int64_t pairs = 0;  // pairs [0, pairs) are packed
  size_t cap = 0;
  hwy::AlignedFreeUniquePtr<uint16_t[]> data;
  static constexpr size_t kMaxBytes = size_t{4} << 20;
};

// Pointer to pairs [pair0, pair0 + n) of the head's packed V (zeros past seq_k), or NULL when
// the head is too large to cache.
BACKPLANE_AMX_TARGET HWY_INLINE const uint16_t* PackedVPairs(const Problem& p, const Plan& plan,
                                                             int64_t b, int64_t hk, int64_t split,
                                                             int64_t pair0, int64_t n) {
  static thread_local PackedV cache;
  const int64_t dvp = plan.dvp;
  const int64_t total_pairs = ((p.seq_k + 1) / 2 + 15) / 16 * 16 + 16;
  const size_t elems = static_cast<size_t>(total_pairs * dvp * 2);
  if (elems * 2 > PackedV::kMaxBytes) return nullptr;
  if (cache.call != plan.call || cache.b != b || cache.hk != hk || cache.split != split) {
    if (cache.cap < elems) {
      cache.data = hwy::AllocateAligned<uint16_t>(elems);
      if (!cache.data) throw std::bad_alloc();
      cache.cap = elems;
    }
    cache.call = plan.call;
    cache.b = b;
    cache.hk = hk;
    cache.split = split;
    cache.pairs = 0;
  }
  const int64_t want = std::min(pair0 + n, total_pairs);
  if (want > cache.pairs) {
    const auto* vbase =
        static_cast<const uint16_t*>(p.v.data) + b * p.v.stride[0] + hk * p.v.stride[1];
    const int64_t j = 2 * cache.pairs;
    PackV(vbase + j * p.v.stride[2], p.v.stride[2], p.v.stride[3],
          std::max<int64_t>(0, p.seq_k - j), want - cache.pairs, p.head_dim_v, dvp,
          cache.data.get() + cache.pairs * dvp * 2);
    cache.pairs = want;
  }
  return cache.data.get() + pair0 * dvp * 2;
}

// One block with bf16 tile products: on AMX (kAmx) or with AVX512-BF16 (sdpa_dpbf16-inl.h).
template <int NR, bool kAmx>
BACKPLANE_AMX_TARGET void RunBlockBf16(const Problem& p, const Plan& plan, int64_t b, int64_t hk,
                                       int64_t rb, int64_t split, float* partial) {
  const int64_t bq = plan.bq, bk = plan.bk, dvp = plan.dvp;
  const int64_t D = p.head_dim, DV = p.head_dim_v;
  const int64_t nrows = std::min(bq, plan.rows - rb * bq);
  if (NR == 1 && nrows <= kDotMaxRows) return RunBlock<NR>(p, plan, b, hk, rb, split, partial);
  const int64_t dpad = plan.dpad;  // head_dim in whole 32-element chunks
  const int64_t pairs_d = dpad / 2;
  BlockBuffers buf = AllocBuffers(p, plan);
  const RowLimits lims = PrepareRows(p, plan, b, hk, rb, buf);

  // Q^T as bf16 pairs along head_dim: qtp[pp][i], zero padded.
  auto* qtp = reinterpret_cast<uint32_t*>(buf.qt);
  std::fill(qtp, qtp + pairs_d * bq, 0u);
  if (p.q.stride[3] == 1 && D % 2 == 0) {
    const uint16_t* rows[kMaxBlockRows];
    for (int64_t i = 0; i < nrows; ++i)
      rows[i] = reinterpret_cast<const uint16_t*>(QRow(p, plan, b, hk, rb, i));
    PackQPairsRows(rows, nrows, D, bq, qtp);
  } else {
    for (int64_t i = 0; i < nrows; ++i) {
      const auto* q = reinterpret_cast<const uint16_t*>(QRow(p, plan, b, hk, rb, i));
      const int64_t cs = p.q.stride[3];
      for (int64_t pp = 0; 2 * pp < D; ++pp) {
        const uint32_t lo = q[2 * pp * cs];
        const uint32_t hi = 2 * pp + 1 < D ? q[(2 * pp + 1) * cs] : 0u;
        qtp[pp * bq + i] = lo | (hi << 16);
      }
    }
  }

  const KvRange kv = KvRangeOf(p, plan, split, lims.max);
  InitAccumulators(plan, buf);
  const auto* kbase =
      static_cast<const uint16_t*>(p.k.data) + b * p.k.stride[0] + hk * p.k.stride[1];
  const auto* vbase =
      static_cast<const uint16_t*>(p.v.data) + b * p.v.stride[0] + hk * p.v.stride[1];
  const bool has_mask = p.mask_kind != MaskKind::kNone;
  const float scale2 = p.scale * kLog2e;
  auto* kbuf = reinterpret_cast<uint16_t*>(buf.kbuf);
  auto* vp = reinterpret_cast<uint16_t*>(buf.vbuf);
  auto* pp = reinterpret_cast<uint32_t*>(buf.qr);
  auto* pa = reinterpret_cast<uint32_t*>(buf.pa);
  const int ldq = static_cast<int>(bq * 4), ldo = static_cast<int>(dvp * 4);
  const int64_t it_count = bq / 16, ct_count = dvp / 16;
  if (kAmx) AmxConfigure();

  for (int64_t j0 = kv.lo, nk = kv.first; j0 < kv.hi; j0 += nk, nk = std::min(bk, kv.hi - j0)) {
    const int64_t jt_count = (nk + 15) / 16;
    // K rows in place when whole tiles of them exist (AMX) or their pairs are whole (AVX512-BF16
    // reads only the rows it needs); else copied, padded with zeros.
    const uint16_t* ka;
    int64_t k_rs;
    const bool k_in_place = kAmx ? D == dpad && nk % 16 == 0 : D % 2 == 0;
    if (p.k.stride[3] == 1 && k_in_place) {
      ka = kbase + j0 * p.k.stride[2];
      k_rs = p.k.stride[2];
    } else {
      for (int64_t j = 0; j < jt_count * 16; ++j) {
        const uint16_t* src = kbase + (j0 + j) * p.k.stride[2];
        for (int64_t c = 0; c < dpad; ++c)
          kbuf[j * dpad + c] = j < nk && c < D ? src[c * p.k.stride[3]] : 0;
      }
      ka = kbuf;
      k_rs = dpad;
    }
    if (!kAmx) {
      const int64_t pairs = ka == kbuf ? pairs_d : D / 2;
      DpQK<NR>(ka, k_rs, qtp, bq, pairs, nk, buf.st);
    }
    const int lda = static_cast<int>(k_rs * 2);
    for (int64_t jt = 0; kAmx && jt < jt_count; jt += 2) {
      const bool j2 = jt + 1 < jt_count;
      const uint16_t* a0 = ka + jt * 16 * k_rs;
      const uint16_t* a1 = a0 + 16 * k_rs;
      float* c0 = buf.st + jt * 16 * bq;
      float* c1 = c0 + 16 * bq;
      for (int64_t it = 0; it < it_count; it += 2) {
        const bool i2 = it + 1 < it_count;
        const uint32_t* b0 = qtp + it * 16;
        if (j2 && i2)
          AmxQK<true, true>(a0, a1, lda, b0, b0 + 16, ldq, dpad / 32, c0 + it * 16, c1 + it * 16,
                            ldq);
        else if (j2)
          AmxQK<true, false>(a0, a1, lda, b0, b0, ldq, dpad / 32, c0 + it * 16, c1 + it * 16, ldq);
        else if (i2)
          AmxQK<false, true>(a0, a0, lda, b0, b0 + 16, ldq, dpad / 32, c0 + it * 16, c0 + it * 16,
                             ldq);
        else
          AmxQK<false, false>(a0, a0, lda, b0, b0, ldq, dpad / 32, c0 + it * 16, c0 + it * 16, ldq);
      }
    }

    if (has_mask) MaskTile(p, buf.mask_off, nrows, bq, j0, nk, buf.bias);
    const ScoreArgs sa{
        buf.st, buf.bias, bq, j0, scale2, has_mask, static_cast<float>(j0 + nk - 1) > lims.min};
    SoftmaxMax<NR>(buf, sa, nk);

    // V pairs from the per-thread cache (pairs start at even keys: an odd j0 shifts P by one
    // key, with a zero probability in front), else packed for this block alone.
    int64_t shift = j0 & 1;
    int64_t kpairs = (nk + shift + 31) / 32 * 16;
    const uint16_t* vpairs = PackedVPairs(p, plan, b, hk, split, (j0 - shift) / 2, kpairs);
    if (!vpairs) {
      shift = 0;
      kpairs = (nk + 31) / 32 * 16;
      PackV(vbase + j0 * p.v.stride[2], p.v.stride[2], p.v.stride[3], nk, kpairs, DV, dvp, vp);
      vpairs = vp;
    }
    // P rows in bf16: pairs along keys, then transposed to [query][key pair].
    SoftmaxExpPairs<NR>(buf, sa, nk, shift, kpairs, pp);
    if (!kAmx) {  // O = alpha O + P V_blk straight from the pairs
      DpPV(pp, bq, nrows, vpairs, dvp, kpairs, buf.alpha, buf.o);
      continue;
    }
    for (int64_t kc = 0; kc < kpairs; kc += 16)
      for (int64_t it = 0; it < it_count; ++it)
        Transpose16x16(pp + kc * bq + it * 16, bq, pa + it * 16 * kpairs + kc, kpairs);

    // PV = P V_blk on the tiles, then O = alpha O + PV.
    const int ldp = static_cast<int>(kpairs * 4);
    for (int64_t it = 0; it < it_count; it += 2) {
      const bool i2 = it + 1 < it_count;
      const uint32_t* a0 = pa + it * 16 * kpairs;
      const uint32_t* a1 = a0 + 16 * kpairs;
      float* o0 = buf.pv + it * 16 * dvp;
      float* o1 = o0 + 16 * dvp;
      for (int64_t ct = 0; ct < ct_count; ct += 2) {
        const bool c2 = ct + 1 < ct_count;
        const uint16_t* bv = vpairs + ct * 32;
        if (i2 && c2)
          AmxPV<true, true>(a0, a1, ldp, bv, ldo, kpairs / 16, o0 + ct * 16, o1 + ct * 16, ldo);
        else if (i2)
          AmxPV<true, false>(a0, a1, ldp, bv, ldo, kpairs / 16, o0 + ct * 16, o1 + ct * 16, ldo);
        else if (c2)
          AmxPV<false, true>(a0, a0, ldp, bv, ldo, kpairs / 16, o0 + ct * 16, o0 + ct * 16, ldo);
        else
          AmxPV<false, false>(a0, a0, ldp, bv, ldo, kpairs / 16, o0 + ct * 16, o0 + ct * 16, ldo);
      }
    }
    for (int64_t i = 0; i < nrows; ++i) {
      const __m512 al = _mm512_set1_ps(buf.alpha[i]);
      float* orow = buf.o + i * dvp;
      const float* pvrow = buf.pv + i * dvp;
      for (int64_t c = 0; c < dvp; c += 16) {
        _mm512_storeu_ps(
            orow + c, _mm512_fmadd_ps(_mm512_loadu_ps(orow + c), al, _mm512_loadu_ps(pvrow + c)));
      }
    }
  }
  if (kAmx) _tile_release();
  FinishBlock(p, plan, b, hk, rb, buf, partial);
}

// The bf16 tile products this call may run: AMX, else AVX512-BF16, else none (fp32 tiles).
Bf16Tiles Bf16TilesFor(const Problem& p) {
  if (p.dtype != DType::kBF16) return Bf16Tiles::kNone;
  if (amx_bf16_available()) return Bf16Tiles::kAmx;
  return dpbf16_tiles_available() ? Bf16Tiles::kDpbf16 : Bf16Tiles::kNone;
}
#else
Bf16Tiles Bf16TilesFor(const Problem&) {
  return Bf16Tiles::kNone;
}
#endif  // AVX3

}  // namespace HWY_NAMESPACE
}  // namespace backplane::attention::cpu
HWY_AFTER_NAMESPACE();

#endif  // BACKPLANE_ATTENTION_CPU_SDPA_AMX_INL_H_
