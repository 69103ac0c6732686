// Highway helpers shared by the CPU kernels: rows of float32, bfloat16 or float16 read and
// written as float32 vectors (and, through simd_math-inl.h, the math they need). Included once per
// SIMD target (foreach_target), hence the toggle guard instead of #pragma once.
#if defined(BACKPLANE_KERNELS_COMMON_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef BACKPLANE_KERNELS_COMMON_SIMD_INL_H_
#undef BACKPLANE_KERNELS_COMMON_SIMD_INL_H_
#else
#define BACKPLANE_KERNELS_COMMON_SIMD_INL_H_
#endif

#include <hwy/highway.h>

#include <cstdint>
#include <cstring>

#include "common/bf16_instruction.hpp"
#include "common/simd_math-inl.h"
#include "common/tensor.hpp"

HWY_BEFORE_NAMESPACE();
namespace backplane::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Loads lanes [i, i + Lanes) of a row of dtype T as float32.
template <DType T>
HWY_INLINE VF LoadF(DF d, const void* row, int64_t i) {
  if constexpr (T == DType::kF32) {
    return hn::LoadU(d, static_cast<const float*>(row) + i);
  } else if constexpr (T == DType::kBF16) {
    const hn::Rebind<hwy::bfloat16_t, DF> dbf;
    return hn::PromoteTo(d, hn::LoadU(dbf, static_cast<const hwy::bfloat16_t*>(row) + i));
  } else {
    const hn::Rebind<hwy::float16_t, DF> dh;
    return hn::PromoteTo(d, hn::LoadU(dh, static_cast<const hwy::float16_t*>(row) + i));
  }
}

// Which NaNs a float32 result rounded to bfloat16 can hold. kAny: any payload (a float32 input,
// a float32 table). kFromBf16: every operand it was computed from is bfloat16 data or a finite
// constant. x86 and Arm keep an operand NaN's payload (quieted) and make new NaNs with the
// default payload, so such a NaN has its 16 low bits zero: rounding cannot carry out of them and
// needs no guard (on AVX2, three of the seven ops that round a vector).
enum class NaNs { kAny, kFromBf16 };

// Where a float32 exactly halfway between two bfloat16 values goes. kEven: to the even one, as
// a conversion must when the float32 is the result to round (rms_norm, rotary, casts). kAway:
// away from zero, one add on the bits, for a float32 that is itself only near the exact result
// (the bf16 activations' sigmoid, within 2.5e-4, 64 float32 steps at the rounding bit): on a tie
// the exact result is as likely above as below, so ties to even buy nothing there, and cost
// three more ops a vector (bf16 silu_and_mul on Zen 3, one thread: 0.280 -> 0.231 ms on 64
// rows held in L3, 10.26 -> 8.58 ms on 2048; 50 of 5.6 million results differ, by one step, none
// farther from the exact result). Only with NaNs::kFromBf16: a NaN's 16 low bits are zero, so
// the add cannot carry out of them. Where the CPU converts in one instruction (AVX512-BF16), its
// ties go to even either way.
enum class Ties { kEven, kAway };

// float32 bits rounded at bit 16 (to nearest, ties as kTies says), so that the upper half is the
// bfloat16; NaN stays a quiet NaN. The portable conversion.
template <NaNs kNaNs = NaNs::kAny, Ties kTies = Ties::kEven>
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> RoundedBf16Bits(DF /* d */, VF v) {
  const hn::RebindToUnsigned<DF> du;
  const auto bits = hn::BitCast(du, v);
  static_assert(kTies == Ties::kEven || kNaNs == NaNs::kFromBf16,
                "ties away from zero would carry out of a NaN's low bits");
  if constexpr (kTies == Ties::kAway) return hn::Add(bits, hn::Set(du, 0x8000u));
  // Bit 16, by two shifts rather than a shift and a mask: one constant fewer where the bf16
  // activations' loop spilled at 16 registers.
  const auto odd = hn::ShiftRight<31>(hn::ShiftLeft<15>(bits));
  const auto rounded = hn::Add(bits, hn::Add(odd, hn::Set(du, 0x7fffu)));
  if constexpr (kNaNs == NaNs::kFromBf16) return rounded;
  return hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), hn::Or(bits, hn::Set(du, 0x400000u)),
                        rounded);
}

// float32 -> bfloat16 bits, rounding to nearest (Highway 1.0's DemoteTo truncates); NaN stays a
// quiet NaN. One instruction where the CPU has it (common/bf16_instruction.hpp), whose ties go
// to even whatever kTies says.
template <NaNs kNaNs = NaNs::kAny, Ties kTies = Ties::kEven>
HWY_INLINE hn::Vec<hn::Rebind<uint16_t, DF>> ToBf16Bits(DF d, VF v) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if (g_bf16_instruction) {
    // Inline assembly: these targets' functions are not compiled for AVX512-BF16, so its
    // intrinsic cannot be called from them.
    __m256i bits;
    asm("vcvtneps2bf16 %1, %0" : "=v"(bits) : "v"(v.raw));
    return hn::Vec256<uint16_t>{bits};
  }
#endif
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint16_t, DF> d16;
  return hn::DemoteTo(d16,
                      hn::BitCast(di, hn::ShiftRight<16>(RoundedBf16Bits<kNaNs, kTies>(d, v))));
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// v0 and v1 rounded to bfloat16 by one vcvtne2ps2bf16 (where g_bf16_instruction says the CPU has
// it): v0's 16 words in the low half, v1's in the high half.
HWY_INLINE __m512i Bf16Halves(VF v0, VF v1) {
  __m512i bits;  // the instruction's second source fills the low half
  asm("vcvtne2ps2bf16 %2, %1, %0" : "=v"(bits) : "v"(v1.raw), "v"(v0.raw));
  return bits;
}
#endif

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
// v0 and v1 as bfloat16 bits in one vector of twice the lanes, v0's first. One instruction
// where the CPU has it, instead of two conversions and a lane insert.
HWY_INLINE hn::Vec<hn::Twice<hn::Rebind<uint16_t, DF>>> ToBf16Bits2(DF d, VF v0, VF v1) {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if (g_bf16_instruction) return hn::Vec512<uint16_t>{Bf16Halves(v0, v1)};
#endif
  const hn::Twice<hn::Rebind<uint16_t, DF>> d32;
  return hn::Combine(d32, ToBf16Bits(d, v1), ToBf16Bits(d, v0));
}
#endif

#if HWY_TARGET == HWY_SCALAR || HWY_TARGET == HWY_EMU128 || (HWY_ARCH_X86 && HWY_TARGET >= HWY_SSE4)
// Targets without F16C: Highway 1.0 emulates float32 -> float16 by truncation (and turns
// overflow into 65504-ish values), so the rounding is done here on the bits.
HWY_INLINE hn::Vec<hn::Rebind<hwy::float16_t, DF>> ToF16(DF d, VF v) {
  const hn::RebindToUnsigned<DF> du;
  const hn::RebindToSigned<DF> di;
  const VF a = hn::Abs(v);
  const auto ab = hn::BitCast(du, a);
  // Normal range: the mantissa rounded to 10 bits, nearest even, then rebiased (127 -> 15).
  const auto odd = hn::And(hn::ShiftRight<13>(ab), hn::Set(du, 1u));
  const auto rounded = hn::Add(ab, hn::Add(odd, hn::Set(du, 0xfffu)));
  const auto normal = hn::Sub(hn::ShiftRight<13>(rounded), hn::Set(du, 112u << 10));
  // Subnormal range: multiples of 2^-24; the float adder rounds |v| + 0.5 to them.
  const VF sub =
      hn::Mul(hn::Sub(hn::Add(a, hn::Set(d, 0.5f)), hn::Set(d, 0.5f)), hn::Set(d, 16777216.0f));
  auto bits = hn::IfThenElse(hn::RebindMask(du, hn::Lt(a, hn::Set(d, 6.103515625e-05f))),
                             hn::BitCast(du, hn::ConvertTo(di, sub)), normal);
  bits = hn::IfThenElse(hn::RebindMask(du, hn::Ge(a, hn::Set(d, 65520.0f))), hn::Set(du, 0x7c00u),
                        bits);  // rounds to >= 65536: infinity
  bits = hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(v)), hn::Set(du, 0x7e00u), bits);
  bits = hn::Or(bits, hn::ShiftRight<16>(hn::And(hn::BitCast(du, v), hn::Set(du, 0x80000000u))));
  const hn::Rebind<uint16_t, DF> d16;
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::BitCast(dh, hn::DemoteTo(d16, hn::BitCast(di, bits)));
}
#else
HWY_INLINE hn::Vec<hn::Rebind<hwy::float16_t, DF>> ToF16(DF /* d */, VF v) {
  const hn::Rebind<hwy::float16_t, DF> dh;
  return hn::DemoteTo(dh, v);  // vcvtps2ph: nearest even
}
#endif

// Stores v into lanes [i, i + Lanes) of a row of dtype T (bfloat16 rounded as ToBf16Bits).
template <DType T, NaNs kNaNs = NaNs::kAny, Ties kTies = Ties::kEven>
HWY_INLINE void StoreF(DF d, VF v, void* row, int64_t i) {
  if constexpr (T == DType::kF32) {
    hn::StoreU(v, d, static_cast<float*>(row) + i);
  } else if constexpr (T == DType::kBF16) {
    const hn::Rebind<uint16_t, DF> d16;
    hn::StoreU(ToBf16Bits<kNaNs, kTies>(d, v), d16, static_cast<uint16_t*>(row) + i);
  } else {
    const hn::Rebind<hwy::float16_t, DF> dh;
    hn::StoreU(ToF16(d, v), dh, static_cast<hwy::float16_t*>(row) + i);
  }
}

// Non-temporal stores for outputs much larger than the caches: the line is written without
// being read first (a plain store reads it: a third of the traffic of a copy). Only where the
// stored vector is a whole 16, 32 or 64-byte register (AVX2 and AVX-512); `row` + i must be
// aligned to it (StreamStart). Callers end with hwy::FlushStream() on the same thread.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
constexpr bool kCanStream = true;
#else
constexpr bool kCanStream = false;
#endif

template <DType T>
HWY_INLINE void StreamF(DF d, VF v, void* row, int64_t i) {
  if constexpr (!kCanStream) {
    StoreF<T>(d, v, row, i);
  } else if constexpr (T == DType::kF32) {
    hn::Stream(v, d, static_cast<float*>(row) + i);
  } else if constexpr (T == DType::kBF16) {
    const hn::Rebind<uint16_t, DF> d16;
    hn::Stream(ToBf16Bits(d, v), d16, static_cast<uint16_t*>(row) + i);
  } else {
    const hn::Rebind<hwy::float16_t, DF> dh;
    const hn::RebindToUnsigned<decltype(dh)> du16;
    hn::Stream(hn::BitCast(du16, ToF16(d, v)), du16, static_cast<uint16_t*>(row) + i);
  }
}

// Stores v0 and v1 into lanes [i, i + 2 Lanes) of a row of dtype T. For 16-bit T the two
// halves become one whole register and one store (or stream): two half-register streams to
// one cache line cost a bf16 kernel about a third of its bandwidth on AVX-512.
template <DType T, bool kStream>
HWY_INLINE void StorePairF(DF d, VF v0, VF v1, void* row, int64_t i) {
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX2
  if constexpr (T != DType::kF32) {
    const hn::Rebind<uint16_t, DF> d16;
    const hn::Twice<decltype(d16)> d32;
    hn::Vec<decltype(d32)> bits;
    if constexpr (T == DType::kBF16) {
      bits = ToBf16Bits2(d, v0, v1);
    } else {
      bits = hn::Combine(d32, hn::BitCast(d16, ToF16(d, v1)), hn::BitCast(d16, ToF16(d, v0)));
    }
    uint16_t* out = static_cast<uint16_t*>(row) + i;
    if constexpr (kStream) {
      hn::Stream(bits, d32, out);
    } else {
      hn::StoreU(bits, d32, out);
    }
    return;
  }
#endif
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  if constexpr (kStream) {
    StreamF<T>(d, v0, row, i);
    StreamF<T>(d, v1, row, i + N);
  } else {
    StoreF<T>(d, v0, row, i);
    StoreF<T>(d, v1, row, i + N);
  }
}

// The first lane i >= from of `row` from which whole vectors are stored aligned for StreamF,
// StorePairF and StoreTwoF (the pairs stream a whole register for every T), or -1 where there is
// none: a target without streaming stores, or a row not aligned to its element. Callers store the
// lanes before i plainly: glibc's malloc places a large block 16 bytes past a page boundary, so a
// caller's own buffer (a std::vector) seldom starts on a 64-byte line, and plain stores for the
// whole row took 1.1-1.6x the time (silu_and_mul and RMSNorm on Zen 4, kernels/LAYERS.md).
template <DType T>
HWY_INLINE int64_t StreamStart(DF d, const void* row, int64_t from) {
  if (!kCanStream) return -1;
  const uintptr_t bytes = hn::Lanes(d) * sizeof(float);
  const uintptr_t es = dtype_size(T);
  const uintptr_t at = reinterpret_cast<uintptr_t>(row) + static_cast<uintptr_t>(from) * es;
  if (at % es != 0) return -1;
  return from + static_cast<int64_t>((bytes - at % bytes) % bytes / es);
}

// Lanes [from, to) of a row whose output streams from lane `streamed` (StreamStart, or -1: not
// at all): plain(from, streamed) stores the lanes before it, streamed_pair(i) each whole 2N
// lanes from there, and plain(i, to) what is left.
template <class Plain, class StreamedPair>
HWY_INLINE void StreamFromStart(DF d, int64_t from, int64_t to, int64_t streamed,
                                const Plain& plain, const StreamedPair& streamed_pair) {
  const int64_t two_n = 2 * static_cast<int64_t>(hn::Lanes(d));
  int64_t i = from;
  if (streamed >= 0 && streamed + two_n <= to) {
    plain(from, streamed);
    for (i = streamed; i + two_n <= to; i += two_n) streamed_pair(i);
  }
  plain(i, to);
}

// Elementwise kernels read and write rows two vectors at a time: lanes [i, i + 2N) as v0 and v1.
// For bfloat16 these are the even and the odd elements, not the first and the second half: a
// bfloat16 is the upper half of its float32, so each costs one bitwise op, where a half costs a
// lane shuffle and a shift. Any order serves elementwise work whose operands are all read this
// way and whose results StoreTwoF puts back.
template <DType T>
HWY_INLINE void LoadTwoF(DF d, const void* row, int64_t i, VF& v0, VF& v1) {
  if constexpr (T == DType::kBF16) {
    const hn::RebindToUnsigned<DF> du;
    const auto w =
        hn::LoadU(du, reinterpret_cast<const uint32_t*>(static_cast<const uint16_t*>(row) + i));
    v0 = hn::BitCast(d, hn::ShiftLeft<16>(w));
    v1 = hn::BitCast(d, hn::And(w, hn::Set(du, 0xffff0000u)));
  } else {
    v0 = LoadF<T>(d, row, i);
    v1 = LoadF<T>(d, row, i + static_cast<int64_t>(hn::Lanes(d)));
  }
}

#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
// vpermw's indices that interleave the low and high 16 words of a register.
alignas(64) constexpr uint16_t kInterleaveWords[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                                       21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                                       11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
#endif

// Writes what LoadTwoF read: v0 and v1 into lanes [i, i + 2N) of a row of dtype T; kNaNs says
// which NaNs a bfloat16 result can hold, kTies where its ties go (RoundedBf16Bits).
template <DType T, bool kStream, NaNs kNaNs = NaNs::kAny, Ties kTies = Ties::kEven>
HWY_INLINE void StoreTwoF(DF d, VF v0, VF v1, void* row, int64_t i) {
  if constexpr (T == DType::kBF16) {
    const hn::RebindToUnsigned<DF> du;
    const auto w = [&] {
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
      if (g_bf16_instruction) {  // one conversion of both, one word interleave
        return hn::Vec512<uint32_t>{
            _mm512_permutexvar_epi16(_mm512_load_si512(kInterleaveWords), Bf16Halves(v0, v1))};
      }
#endif
      const auto r0 = RoundedBf16Bits<kNaNs, kTies>(d, v0);
      const auto r1 = RoundedBf16Bits<kNaNs, kTies>(d, v1);
#if HWY_TARGET == HWY_SCALAR  // no 16-bit lanes
      return hn::Or(hn::ShiftRight<16>(r0), hn::And(r1, hn::Set(du, 0xffff0000u)));
#else
      // v0's bfloat16 into the even 16-bit words, v1's kept in the odd ones: one blend.
      const hn::Repartition<uint16_t, DF> dw;
      return hn::BitCast(du,
                         hn::OddEven(hn::BitCast(dw, r1), hn::BitCast(dw, hn::ShiftRight<16>(r0))));
#endif
    }();
    auto* out = reinterpret_cast<uint32_t*>(static_cast<uint16_t*>(row) + i);
    if constexpr (kStream && kCanStream) {
      hn::Stream(w, du, out);
    } else {
      hn::StoreU(w, du, out);
    }
  } else {
    StorePairF<T, kStream>(d, v0, v1, row, i);
  }
}

// Outputs at least this large are streamed.
constexpr int64_t kStreamBytes = int64_t{8} << 20;

// How far ahead of its reads a streaming kernel prefetches: the hardware prefetcher alone
// leaves a core's memory reads short of the bandwidth while the core converts and computes.
constexpr int64_t kPrefetchBytes = int64_t{16} << 10;

// How far ahead the gated activations prefetch their two input streams, into L2
// (PrefetchToL2). Into L1 16 KiB ahead, two streams had a whole 32 KiB L1 in flight on Zen 4:
// 4 KiB into L2 took 13-19% less time there in bf16 and 13-15% in f32 (alternating calls on the
// same buffers, 2048x2x11008, four comparisons of 120 calls a side), and no prefetch or 2-4 KiB
// into L1 were as good or up to 7% slower.
constexpr int64_t kL2PrefetchBytes = int64_t{4} << 10;

// Asks for the line at p in L2, not L1: an L1 prefetch holds one of the core's few miss buffers
// until the line comes.
HWY_INLINE void PrefetchToL2(const void* p) {
#if HWY_ARCH_X86
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1);
#else
  (void)p;
#endif
}

// v rounded to T and back: what a store and a reload would give.
template <DType T>
HWY_INLINE VF RoundTo(DF d, VF v) {
  if constexpr (T == DType::kF32) {
    return v;
  } else if constexpr (T == DType::kBF16) {
    const hn::RebindToUnsigned<DF> du;
    return hn::BitCast(d, hn::ShiftLeft<16>(hn::PromoteTo(du, ToBf16Bits(d, v))));
  } else {
    return hn::PromoteTo(d, ToF16(d, v));
  }
}

// A row's last partial vector goes through this buffer: whole-vector code, no access past the
// row. Lanes beyond n are zero.
template <DType T>
struct Tail {
  alignas(64) unsigned char buf[HWY_MAX_BYTES];

  void* load(const void* row, int64_t i, int64_t n) {
    std::memset(buf, 0, sizeof buf);
    std::memcpy(buf, static_cast<const char*>(row) + i * static_cast<int64_t>(dtype_size(T)),
                static_cast<size_t>(n) * dtype_size(T));
    return buf;
  }
  void store(void* row, int64_t i, int64_t n) const {
    std::memcpy(static_cast<char*>(row) + i * static_cast<int64_t>(dtype_size(T)), buf,
                static_cast<size_t>(n) * dtype_size(T));
  }
};

}  // namespace HWY_NAMESPACE
}  // namespace backplane::kernels
HWY_AFTER_NAMESPACE();

#endif  // BACKPLANE_KERNELS_COMMON_SIMD_INL_H_
