// The peers benchmark's bound for a streaming op: the op's own memory traffic with no arithmetic
// in it, on the kernels' thread pool (so on the same threads as every side). A peer that runs
// within 1.2x of this leaves no room for the 1.2x goal, and this says so with a figure measured
// in the same minutes, where a plain copy (Tensor.copy_, whose stores read each line first)
// would understate what the memory does.
//
// Each of `rows` rows reads `inputs` consecutive runs of `row_bytes` from `in` and writes one run
// of `row_bytes` to `out` (their sum as 32-bit integers: no float assists, whatever the bits;
// in place, the bits flipped):
// inputs 1 is a copy (rmsnorm's traffic), 2 the gated activations' two halves into one output.
// out == in (inputs 1) rewrites each line where it lies (rotary in place); out NULL only reads
// (decoding's KV cache). Flags: kStreamStores writes around the caches (the layer kernels' way
// for big outputs); kPrefetchL1 asks for the reads kPrefetchBytes ahead into L1, kPrefetchL2
// kL2PrefetchBytes ahead into L2 (the layer kernels' two ways, common/simd-inl.h).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "peers/stream_bound.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
// foreach_target.h first: it re-includes this file once per target.
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <atomic>
#include <cstdint>

#include "common/parallel.hpp"
#include "common/simd-inl.h"

#ifndef BACKPLANE_BENCH_STREAM_BOUND_ONCE
#define BACKPLANE_BENCH_STREAM_BOUND_ONCE
namespace backplane::bench {
constexpr int kStreamStores = 1;
constexpr int kPrefetchL1 = 2;
constexpr int kPrefetchL2 = 4;
// What the read-only pass found, kept so that its loads are not optimized away.
inline std::atomic<uint32_t> read_sink{0};
}  // namespace backplane::bench
#endif

HWY_BEFORE_NAMESPACE();
namespace backplane::bench {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DU = hn::ScalableTag<uint32_t>;
using VU = hn::Vec<DU>;

// The line at `at`, ahead as the flags say (or not at all): the layer kernels' own distances and
// prefetches (common/simd-inl.h), so the bound follows them.
HWY_INLINE void PrefetchLine(const uint8_t* at, int flags) {
  if (flags & kPrefetchL1) hwy::Prefetch(at + kernels::HWY_NAMESPACE::kPrefetchBytes);
  if (flags & kPrefetchL2)
    kernels::HWY_NAMESPACE::PrefetchToL2(at + kernels::HWY_NAMESPACE::kL2PrefetchBytes);
}

// Reads [begin, end) of `rows` rows and returns their xor.
uint32_t ReadRows(const uint8_t* in, int64_t row_bytes, int64_t begin, int64_t end, int flags) {
  const DU d;
  const int64_t V = static_cast<int64_t>(hn::Lanes(d) * sizeof(uint32_t));
  VU acc0 = hn::Zero(d), acc1 = hn::Zero(d), acc2 = hn::Zero(d), acc3 = hn::Zero(d);
  const uint8_t* p = in + begin * row_bytes;
  const uint8_t* last = in + end * row_bytes;
  for (; p + 4 * V <= last; p += 4 * V) {
    for (int64_t b = 0; b < 4 * V; b += 64) PrefetchLine(p + b, flags);
    acc0 = hn::Xor(acc0, hn::LoadU(d, reinterpret_cast<const uint32_t*>(p)));
    acc1 = hn::Xor(acc1, hn::LoadU(d, reinterpret_cast<const uint32_t*>(p + V)));
    acc2 = hn::Xor(acc2, hn::LoadU(d, reinterpret_cast<const uint32_t*>(p + 2 * V)));
    acc3 = hn::Xor(acc3, hn::LoadU(d, reinterpret_cast<const uint32_t*>(p + 3 * V)));
  }
  for (; p + V <= last; p += V)
    acc0 = hn::Xor(acc0, hn::LoadU(d, reinterpret_cast<const uint32_t*>(p)));
  const VU all = hn::Xor(hn::Xor(acc0, acc1), hn::Xor(acc2, acc3));
  HWY_ALIGN uint32_t lanes[hn::MaxLanes(d)];
  hn::Store(all, d, lanes);
  uint32_t x = 0;
  for (size_t i = 0; i < hn::Lanes(d); ++i) x ^= lanes[i];
  return x;
}

void WriteRows(const uint8_t* in, uint8_t* out, int64_t row_bytes, int64_t inputs, int64_t begin,
               int64_t end, int flags) {
  const DU d;
  const int64_t V = static_cast<int64_t>(hn::Lanes(d) * sizeof(uint32_t));
  const bool stream = (flags & kStreamStores) != 0;
  // In place each line's bits are flipped: a value stored back unchanged could be left out.
  const VU flip = in == out ? hn::Not(hn::Zero(d)) : hn::Zero(d);
  for (int64_t r = begin; r < end; ++r) {
    const uint8_t* src = in + r * inputs * row_bytes;
    uint32_t* dst = reinterpret_cast<uint32_t*>(out + r * row_bytes);
    for (int64_t c = 0; c < row_bytes; c += V) {
      if (c % 64 == 0) {
        for (int64_t j = 0; j < inputs; ++j) PrefetchLine(src + j * row_bytes + c, flags);
      }
      VU v = hn::LoadU(d, reinterpret_cast<const uint32_t*>(src + c));
      for (int64_t j = 1; j < inputs; ++j)
        v = hn::Add(v, hn::LoadU(d, reinterpret_cast<const uint32_t*>(src + j * row_bytes + c)));
      v = hn::Xor(v, flip);
      if (stream) {
        hn::Stream(v, d, dst + c / 4);
      } else {
        hn::StoreU(v, d, dst + c / 4);
      }
    }
  }
  if (stream) hwy::FlushStream();
}

void Run(const uint8_t* in, uint8_t* out, int64_t rows, int64_t row_bytes, int64_t inputs,
         int flags) {
  const int64_t item_bytes = row_bytes * (inputs + (out ? 1 : 0));
  if (!out) {
    kernels::parallel_ranges(rows, item_bytes, [&](int64_t begin, int64_t end) {
      read_sink.fetch_xor(ReadRows(in, row_bytes, begin, end, flags), std::memory_order_relaxed);
    });
    return;
  }
  kernels::parallel_ranges(rows, item_bytes, [&](int64_t begin, int64_t end) {
    WriteRows(in, out, row_bytes, inputs, begin, end, flags);
  });
}

int64_t VectorBytes() {
  return static_cast<int64_t>(hn::Lanes(DU()) * sizeof(uint32_t));
}

}  // namespace HWY_NAMESPACE
}  // namespace backplane::bench
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace backplane::bench {
HWY_EXPORT(Run);
HWY_EXPORT(VectorBytes);
}  // namespace backplane::bench

// Returns 0, or -1 when the shape cannot be streamed: row_bytes a multiple of 64 and, for
// streaming stores, `out` aligned to a vector; inputs >= 1, and 1 when out == in.
extern "C" __attribute__((visibility("default"))) int bp_stream_bound(const void* in, void* out,
                                                                      int64_t rows,
                                                                      int64_t row_bytes,
                                                                      int64_t inputs, int flags) {
  using namespace backplane::bench;
  const int64_t vector = HWY_DYNAMIC_DISPATCH(VectorBytes)();
  if (!in || rows < 0 || row_bytes <= 0 || row_bytes % 64 != 0 || inputs < 1) return -1;
  if (out == in && inputs != 1) return -1;
  if (out && (flags & kStreamStores) && reinterpret_cast<uintptr_t>(out) % vector != 0) return -1;
  HWY_DYNAMIC_DISPATCH(Run)
  (static_cast<const uint8_t*>(in), static_cast<uint8_t*>(out), rows, row_bytes, inputs, flags);
  return 0;
}
#endif  // HWY_ONCE
