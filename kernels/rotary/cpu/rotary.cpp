// The CPU rotary embedding: rows of query and key rotated in place, a block of positions at a
// time for every head (so the block's cos and sin stay in L1, as float32: a 16-bit table is
// converted once per block). Interleaved pairs of float32 and float16 rows use the block's cos
// and +-sin repeated per lane pair, so a row is x * c2 + swap_pairs(x) * s2 with whole-vector
// loads; bfloat16 rows are read as their even and odd elements (LoadTwoF): interleaved, the
// pairs' first and second, against cos and sin as they are; rotated by halves, against the
// block's float32 cos and sin in the same even and odd order.
// Compiled once per SIMD target (Highway foreach_target) and dispatched at runtime.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "rotary/cpu/rotary.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
// foreach_target.h first: it re-includes this file once per target.
#include <hwy/aligned_allocator.h>
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <exception>
#include <new>

#include "common/parallel.hpp"
#include "common/simd-inl.h"
#include "rotary/problem.hpp"

HWY_BEFORE_NAMESPACE();
namespace backplane::rotary {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using kernels::DType;
using kernels::HWY_NAMESPACE::DF;
using kernels::HWY_NAMESPACE::LoadF;
using kernels::HWY_NAMESPACE::LoadTwoF;
using kernels::HWY_NAMESPACE::NaNs;
using kernels::HWY_NAMESPACE::PrefetchToL2;
using kernels::HWY_NAMESPACE::StoreF;
using kernels::HWY_NAMESPACE::StorePairF;
using kernels::HWY_NAMESPACE::StoreTwoF;
using kernels::HWY_NAMESPACE::Tail;
using kernels::HWY_NAMESPACE::VF;

// Rotate halves: pairs (x[i], x[i + half]), from column `i` on.
template <DType T>
HWY_INLINE void NeoxRow(char* x, const float* cos, const float* sin, int64_t half, int64_t i = 0) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t es = static_cast<int64_t>(kernels::dtype_size(T));
  char* x2 = x + half * es;
  // Two vectors a side at a time: 16-bit results are stored as whole registers.
  for (; i + 2 * N <= half; i += 2 * N) {
    const VF a0 = LoadF<T>(d, x, i), b0 = LoadF<T>(d, x2, i);
    const VF a1 = LoadF<T>(d, x, i + N), b1 = LoadF<T>(d, x2, i + N);
    const VF c0 = hn::LoadU(d, cos + i), s0 = hn::LoadU(d, sin + i);
    const VF c1 = hn::LoadU(d, cos + i + N), s1 = hn::LoadU(d, sin + i + N);
    StorePairF<T, false>(d, hn::NegMulAdd(b0, s0, hn::Mul(a0, c0)),
                         hn::NegMulAdd(b1, s1, hn::Mul(a1, c1)), x, i);
    StorePairF<T, false>(d, hn::MulAdd(a0, s0, hn::Mul(b0, c0)),
                         hn::MulAdd(a1, s1, hn::Mul(b1, c1)), x2, i);
  }
  for (; i + N <= half; i += N) {
    const VF a = LoadF<T>(d, x, i), b = LoadF<T>(d, x2, i);
    const VF c = hn::LoadU(d, cos + i), s = hn::LoadU(d, sin + i);
    StoreF<T>(d, hn::NegMulAdd(b, s, hn::Mul(a, c)), x, i);
    StoreF<T>(d, hn::MulAdd(a, s, hn::Mul(b, c)), x2, i);
  }
  if (i < half) {
    const int64_t n = half - i;
    Tail<T> at, bt;
    Tail<DType::kF32> ct, st;
    const VF a = LoadF<T>(d, at.load(x, i, n), 0), b = LoadF<T>(d, bt.load(x2, i, n), 0);
    const VF c = LoadF<DType::kF32>(d, ct.load(cos, i, n), 0);
    const VF s = LoadF<DType::kF32>(d, st.load(sin, i, n), 0);
    StoreF<T>(d, hn::NegMulAdd(b, s, hn::Mul(a, c)), at.buf, 0);
    StoreF<T>(d, hn::MulAdd(a, s, hn::Mul(b, c)), bt.buf, 0);
    at.store(x, i, n);
    bt.store(x2, i, n);
  }
}

// A bfloat16 row rotated by halves, read as its even and odd elements (LoadTwoF): columns
// [i, i + 2N) of the two halves pair up lane by lane, against cos and sin laid out the same way
// (FloatTables with `even_odd`). No lane shuffle on either side, where reading and writing
// halves of registers widens with one and narrows with two. The last columns, short of 2N, are
// in column order in the tables too.
template <NaNs kNaNs>
HWY_INLINE void NeoxRowEvenOdd(char* x, const float* cos, const float* sin, int64_t half) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  char* x2 = x + half * 2;
  int64_t i = 0;
  for (; i + 2 * N <= half; i += 2 * N) {
    VF a0, a1, b0, b1;
    LoadTwoF<DType::kBF16>(d, x, i, a0, a1);
    LoadTwoF<DType::kBF16>(d, x2, i, b0, b1);
    const VF c0 = hn::LoadU(d, cos + i), s0 = hn::LoadU(d, sin + i);
    const VF c1 = hn::LoadU(d, cos + i + N), s1 = hn::LoadU(d, sin + i + N);
    StoreTwoF<DType::kBF16, false, kNaNs>(d, hn::NegMulAdd(b0, s0, hn::Mul(a0, c0)),
                                          hn::NegMulAdd(b1, s1, hn::Mul(a1, c1)), x, i);
    StoreTwoF<DType::kBF16, false, kNaNs>(d, hn::MulAdd(a0, s0, hn::Mul(b0, c0)),
                                          hn::MulAdd(a1, s1, hn::Mul(b1, c1)), x2, i);
  }
  if (i < half) NeoxRow<DType::kBF16>(x, cos, sin, half, i);
}

// A bfloat16 row of adjacent pairs (x[2i], x[2i + 1]): the even elements are the pairs' first
// and the odd their second, so cos and sin are read as they are, a pair per table column.
template <NaNs kNaNs>
HWY_INLINE void InterleavedRowEvenOdd(char* x, const float* cos, const float* sin, int64_t width) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  auto rotate = [&](char* row, int64_t i, const void* c_row, const void* s_row, int64_t j) {
    VF a, b;
    LoadTwoF<DType::kBF16>(d, row, i, a, b);
    const VF c = LoadF<DType::kF32>(d, c_row, j), s = LoadF<DType::kF32>(d, s_row, j);
    StoreTwoF<DType::kBF16, false, kNaNs>(d, hn::NegMulAdd(b, s, hn::Mul(a, c)),
                                          hn::MulAdd(a, s, hn::Mul(b, c)), row, i);
  };
  int64_t i = 0;
  for (; i + 2 * N <= width; i += 2 * N) rotate(x, i, cos, sin, i / 2);
  if (i < width) {  // whole pairs: width is even
    const int64_t n = width - i;
    Tail<DType::kBF16> xt;
    Tail<DType::kF32> ct, st;
    // 2N bfloat16 are one float32 vector's bytes: the tail buffers hold them.
    rotate(static_cast<char*>(xt.load(x, i, n)), 0, ct.load(cos, i / 2, n / 2),
           st.load(sin, i / 2, n / 2), 0);
    xt.store(x, i, n);
  }
}

// Adjacent pairs (x[2i], x[2i + 1]); c2 = (c0, c0, c1, c1, ...), s2 = (-s0, s0, -s1, s1, ...).
template <DType T>
HWY_INLINE void InterleavedRow(char* x, const float* c2, const float* s2, int64_t width) {
  const DF d;
#if HWY_TARGET == HWY_SCALAR  // one lane: no pairs inside a vector
  for (int64_t i = 0; i < width; i += 2) {
    const VF a = LoadF<T>(d, x, i), b = LoadF<T>(d, x, i + 1);
    const VF c = hn::Set(d, c2[i]), s = hn::Set(d, s2[i + 1]);
    StoreF<T>(d, hn::NegMulAdd(b, s, hn::Mul(a, c)), x, i);
    StoreF<T>(d, hn::MulAdd(a, s, hn::Mul(b, c)), x, i + 1);
  }
  return;
#endif
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  auto rotate = [&](VF v, int64_t i) {
    return hn::MulAdd(hn::Reverse2(d, v), hn::LoadU(d, s2 + i), hn::Mul(v, hn::LoadU(d, c2 + i)));
  };
  int64_t i = 0;
  for (; i + N <= width; i += N) StoreF<T>(d, rotate(LoadF<T>(d, x, i), i), x, i);
  if (i < width) {  // width and N are even: the tail holds whole pairs
    const int64_t n = width - i;
    Tail<T> xt;
    Tail<DType::kF32> ct, st;
    const VF v = LoadF<T>(d, xt.load(x, i, n), 0);
    const VF y =
        hn::MulAdd(hn::Reverse2(d, v), hn::LoadU(d, static_cast<float*>(st.load(s2, i, n))),
                   hn::Mul(v, hn::LoadU(d, static_cast<float*>(ct.load(c2, i, n)))));
    StoreF<T>(d, y, xt.buf, 0);
    xt.store(x, i, n);
  }
}

// The pair tables of interleaved float32 and float16 rows: `rows` rows of cos and sin (strides
// in bytes) as c2 = (c0, c0, c1, c1, ...) and s2 = (-s0, s0, -s1, s1, ...), 2 * half floats a
// row; with `inverse`, -sin (the rotation back). Made per block of positions, for all its heads.
template <DType C>
void PairTables(const char* cos, const char* sin, int64_t cos_stride, int64_t sin_stride,
                int64_t rows, int64_t half, bool inverse, float* c2, float* s2) {
  const DF d;
#if HWY_TARGET == HWY_SCALAR
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < half; ++i) {
      const float c = hn::GetLane(LoadF<C>(d, cos + r * cos_stride, i));
      const float v = (inverse ? -1.0f : 1.0f) * hn::GetLane(LoadF<C>(d, sin + r * sin_stride, i));
      c2[r * 2 * half + 2 * i] = c2[r * 2 * half + 2 * i + 1] = c;
      s2[r * 2 * half + 2 * i] = -v;
      s2[r * 2 * half + 2 * i + 1] = v;
    }
  }
#else
  const hn::RebindToSigned<DF> di;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  // Lane k of the first output takes table lane k / 2, of the second N / 2 + k / 2.
  alignas(64) int32_t first[HWY_MAX_BYTES / 4], second[HWY_MAX_BYTES / 4];
  for (int64_t k = 0; k < N; ++k) {
    first[k] = static_cast<int32_t>(k / 2);
    second[k] = static_cast<int32_t>(N / 2 + k / 2);
  }
  const auto lo = hn::SetTableIndices(d, first), hi = hn::SetTableIndices(d, second);
  // The sign bit on the even lanes (odd ones with `inverse`).
  const auto sign =
      hn::BitCast(d, hn::ShiftLeft<31>(hn::And(hn::Iota(di, inverse ? 0 : 1), hn::Set(di, 1))));
  auto pairs = [&](VF c, VF v, float* c_out, float* s_out) {
    hn::StoreU(hn::TableLookupLanes(c, lo), d, c_out);
    hn::StoreU(hn::TableLookupLanes(c, hi), d, c_out + N);
    hn::StoreU(hn::Xor(hn::TableLookupLanes(v, lo), sign), d, s_out);
    hn::StoreU(hn::Xor(hn::TableLookupLanes(v, hi), sign), d, s_out + N);
  };
  for (int64_t r = 0; r < rows; ++r) {
    const char* c = cos + r * cos_stride;
    const char* v = sin + r * sin_stride;
    float* c_out = c2 + r * 2 * half;
    float* s_out = s2 + r * 2 * half;
    int64_t i = 0;
    for (; i + N <= half; i += N) {
      pairs(LoadF<C>(d, c, i), LoadF<C>(d, v, i), c_out + 2 * i, s_out + 2 * i);
    }
    if (i < half) {
      const int64_t n = half - i;
      Tail<C> ct, vt;
      alignas(64) float c_buf[2 * HWY_MAX_BYTES / 4], s_buf[2 * HWY_MAX_BYTES / 4];
      pairs(LoadF<C>(d, ct.load(c, i, n), 0), LoadF<C>(d, vt.load(v, i, n), 0), c_buf, s_buf);
      std::memcpy(c_out + 2 * i, c_buf, static_cast<size_t>(2 * n) * sizeof(float));
      std::memcpy(s_out + 2 * i, s_buf, static_cast<size_t>(2 * n) * sizeof(float));
    }
  }
#endif
}

// v with each NaN's low 16 bits cleared: then every NaN a bfloat16 row's rotation can produce has
// them clear (x86 and Arm pass an operand NaN's payload on and make new NaNs with the default
// one), so its rounding needs no NaN guard (NaNs::kFromBf16). The bfloat16 result is the same:
// a NaN keeps its upper 16 bits.
HWY_INLINE VF WithBf16NaNs(DF d, VF v) {
  const hn::RebindToUnsigned<DF> du;
  const VF cleared = hn::BitCast(d, hn::And(hn::BitCast(du, v), hn::Set(du, 0xffff0000u)));
  return hn::IfThenElse(hn::IsNaN(v), cleared, v);
}

// A table's block of rows as float32, `half` floats a row: the rows then read their table as
// float32 and convert nothing per head. Made for a 16-bit table; for any table with `inverse`
// (-sin) or `even_odd` (each whole 2N columns as their even then their odd ones, for
// NeoxRowEvenOdd). `bf16_rows`: for bfloat16 rows, NaNs as WithBf16NaNs leaves them. Made per
// block of positions, for all its heads.
template <DType C>
void FloatTables(const char* cos, const char* sin, int64_t cos_stride, int64_t sin_stride,
                 int64_t rows, int64_t half, bool inverse, bool even_odd, bool bf16_rows,
                 float* c_out, float* s_out) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  auto store = [&](VF v, VF sign, float* to) {
    v = hn::Mul(v, sign);
    hn::StoreU(bf16_rows ? WithBf16NaNs(d, v) : v, d, to);
  };
  for (int64_t r = 0; r < rows; ++r) {
    const char* from[] = {cos + r * cos_stride, sin + r * sin_stride};
    float* to[] = {c_out + r * half, s_out + r * half};
    for (int k = 0; k < 2; ++k) {
      const VF sign = hn::Set(d, k == 1 && inverse ? -1.0f : 1.0f);
      int64_t i = 0;
#if HWY_TARGET != HWY_SCALAR  // one lane: the even and odd order is the column order
      for (; even_odd && i + 2 * N <= half; i += 2 * N) {
        const VF v0 = LoadF<C>(d, from[k], i), v1 = LoadF<C>(d, from[k], i + N);
        store(hn::ConcatEven(d, v1, v0), sign, to[k] + i);
        store(hn::ConcatOdd(d, v1, v0), sign, to[k] + i + N);
      }
#else
      (void)even_odd;
#endif
      for (; i + N <= half; i += N) store(LoadF<C>(d, from[k], i), sign, to[k] + i);
      if (i < half) {
        Tail<C> t;
        alignas(64) float buf[HWY_MAX_BYTES / 4];
        store(LoadF<C>(d, t.load(from[k], i, half - i), 0), sign, buf);
        std::memcpy(to[k] + i, buf, static_cast<size_t>(half - i) * sizeof(float));
      }
    }
  }
}

// The cos and sin rows kept in L1 for all heads: about a third of it.
constexpr int64_t kTableBlockBytes = int64_t{16} << 10;

template <DType T, DType C>
void RunTyped(const Problem& p) {
  const int64_t es = static_cast<int64_t>(kernels::dtype_size(T));
  const int64_t cs = static_cast<int64_t>(kernels::dtype_size(C));
  const bool interleaved = p.style == Style::kInterleaved;
  // A float32 table's NaNs may carry any payload (RoundedBf16Bits then guards the rounding);
  // a bfloat16 one's cannot, nor a copy made for bfloat16 rows (FloatTables, WithBf16NaNs).
  // bfloat16 rows read their pairs as even and odd elements instead (InterleavedRowEvenOdd).
  constexpr bool kPairRows = T != DType::kBF16;
  const bool pair_tables = interleaved && kPairRows;
  // bfloat16 rows rotated by halves read them so too, and their tables in that order.
  const bool even_odd_tables = !interleaved && T == DType::kBF16;
  // The other rows read a float32 table: a 16-bit one is converted a block at a time, and so is
  // any table of the inverse rotation (its sin negated).
  const bool float_copy = (C != DType::kF32 || p.inverse || even_odd_tables) && !pair_tables;
  const int64_t heads = p.query.heads + (p.key.data ? p.key.heads : 0);
  const int64_t row_bytes = 2 * p.half * es;
  // A block of positions at a time, every head in turn: the block's cos and sin stay in L1 while
  // all the heads use them. Walking each head's whole sequence instead streams the tables from L3
  // once per head, and for 16-bit rows the tables are more bytes than the rows.
  const int64_t table_row_bytes = (pair_tables ? 4 : 2) * p.half * 4;
  const int64_t block = std::clamp<int64_t>(kTableBlockBytes / table_row_bytes, 1, p.seq);
  const int64_t blocks = (p.seq + block - 1) / block;
  kernels::parallel_ranges(
      p.batch * blocks, block * heads * 2 * row_bytes, [&](int64_t begin, int64_t end) {
        // This thread's block of pair tables or of float32 table rows.
        hwy::AlignedFreeUniquePtr<float[]> c2, s2;
        if (pair_tables || float_copy) {
          const auto floats = static_cast<size_t>(block * (pair_tables ? 2 : 1) * p.half);
          c2 = hwy::AllocateAligned<float>(floats);
          s2 = hwy::AllocateAligned<float>(floats);
          if (!c2 || !s2) throw std::bad_alloc();
        }
        for (int64_t item = begin; item < end; ++item) {
          const int64_t b = item / blocks, s0 = item % blocks * block;
          const int64_t s1 = std::min(p.seq, s0 + block);
          const char* cos0 = p.cos.data + (b * p.cos.stride[0] + s0 * p.cos.stride[1]) * cs;
          const char* sin0 = p.sin.data + (b * p.sin.stride[0] + s0 * p.sin.stride[1]) * cs;
          if constexpr (kPairRows) {
            if (pair_tables) {
              PairTables<C>(cos0, sin0, p.cos.stride[1] * cs, p.sin.stride[1] * cs, s1 - s0, p.half,
                            p.inverse, c2.get(), s2.get());
            }
          }
          if (float_copy) {
            FloatTables<C>(cos0, sin0, p.cos.stride[1] * cs, p.sin.stride[1] * cs, s1 - s0, p.half,
                           p.inverse, even_odd_tables, T == DType::kBF16, c2.get(), s2.get());
          }
          // Row s0's float32 cos and sin, and the floats from one row to the next (not for pair
          // tables).
          const float* const cos_rows =
              float_copy ? c2.get() : reinterpret_cast<const float*>(cos0);
          const float* const sin_rows =
              float_copy ? s2.get() : reinterpret_cast<const float*>(sin0);
          const int64_t cos_step = float_copy ? p.half : p.cos.stride[1];
          const int64_t sin_step = float_copy ? p.half : p.sin.stride[1];
          // The first element of head h's row s: `head_rows(h)` + s * its stride.
          auto head_rows = [&](int64_t h, int64_t* seq_stride) {
            const bool key = h >= p.query.heads;
            const Operand& o = key ? p.key : p.query;
            *seq_stride = o.stride[2] * es;
            return o.data + (b * o.stride[0] + (key ? h - p.query.heads : h) * o.stride[1]) * es;
          };
          for (int64_t h = 0; h < heads; ++h) {
            int64_t stride = 0, next_stride = 0;
            char* rows = head_rows(h, &stride);
            // The next head's rows of this block, a row per row: a burst of prefetches would
            // fill the core's miss buffers and stall it. Into L2: into L1 they took 20-39% more
            // time on Zen 4 (32 KiB of L1 for this head's rows, the next head's and the tables).
            const char* next = h + 1 < heads ? head_rows(h + 1, &next_stride) : nullptr;
            for (int64_t s = s0; s < s1; ++s) {
              if (next) {
                for (int64_t at = 0; at < row_bytes; at += 64)
                  PrefetchToL2(next + s * next_stride + at);
              }
              char* x = rows + s * stride;
              const int64_t r = s - s0;
              // bfloat16 rows against a table copied for them (FloatTables) or of bfloat16: no
              // NaN guard; against a float32 table as given, the guard.
              if (even_odd_tables) {  // always copied
                NeoxRowEvenOdd<NaNs::kFromBf16>(x, cos_rows + r * cos_step, sin_rows + r * sin_step,
                                                p.half);
              } else if (!interleaved) {
                NeoxRow<T>(x, cos_rows + r * cos_step, sin_rows + r * sin_step, p.half);
              } else if constexpr (kPairRows) {
                InterleavedRow<T>(x, c2.get() + r * 2 * p.half, s2.get() + r * 2 * p.half,
                                  2 * p.half);
              } else if (float_copy) {
                InterleavedRowEvenOdd<NaNs::kFromBf16>(x, cos_rows + r * cos_step,
                                                       sin_rows + r * sin_step, 2 * p.half);
              } else {
                InterleavedRowEvenOdd<NaNs::kAny>(x, cos_rows + r * cos_step,
                                                  sin_rows + r * sin_step, 2 * p.half);
              }
            }
          }
        }
      });
}

template <DType T>
void RunTable(const Problem& p) {
  if (p.table_dtype == DType::kF32) return RunTyped<T, DType::kF32>(p);
  return RunTyped<T, T>(p);  // validation allows only float32 or query's dtype
}

void Run(const Problem& p) {
  switch (p.dtype) {
    case DType::kF32:
      return RunTyped<DType::kF32, DType::kF32>(p);
    case DType::kBF16:
      return RunTable<DType::kBF16>(p);
    case DType::kF16:
      return RunTable<DType::kF16>(p);
  }
}

const char* TargetName() {
  return hwy::TargetName(HWY_TARGET);
}

}  // namespace HWY_NAMESPACE
}  // namespace backplane::rotary
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace backplane::rotary {

HWY_EXPORT(Run);
HWY_EXPORT(TargetName);

Status forward_cpu(const Tensors& tensors, Style style) {
  return kernels::guarded_call("rotary_embedding", " for the pair tables", [&] {
    Problem p;
    Status s = make_problem(tensors, style, kernels::Memory::kHost, &p);
    if (!s.ok() || p.batch == 0 || p.seq == 0 || p.half == 0) return s;
    HWY_DYNAMIC_DISPATCH(Run)(p);
    return s;
  });
}

Status backward_cpu(const Tensors& gradients, Style style) {
  return kernels::guarded_call("rotary_embedding_backward", " for the tables", [&] {
    Problem p;
    Status s = make_problem(gradients, style, kernels::Memory::kHost, &p, true);
    if (!s.ok() || p.batch == 0 || p.seq == 0 || p.half == 0) return s;
    HWY_DYNAMIC_DISPATCH(Run)(p);
    return s;
  });
}

const char* cpu_target() {
  return HWY_DYNAMIC_DISPATCH(TargetName)();
}

}  // namespace backplane::rotary
#endif  // HWY_ONCE
