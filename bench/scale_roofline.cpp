// scale_roofline.hpp's loop, compiled once per SIMD target (Highway foreach_target) like the
// kernels it stands beside, and dispatched at runtime.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "scale_roofline.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
// foreach_target.h first: it re-includes this file once per target.
#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>

#include "common/parallel.hpp"
#include "common/simd-inl.h"
#include "scale_roofline.hpp"

HWY_BEFORE_NAMESPACE();
namespace backplane::bench {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using kernels::DType;
using kernels::HWY_NAMESPACE::DF;
using kernels::HWY_NAMESPACE::kPrefetchBytes;
using kernels::HWY_NAMESPACE::LoadTwoF;
using kernels::HWY_NAMESPACE::StoreTwoF;
using kernels::HWY_NAMESPACE::VF;

template <DType T, bool kInPlace>
void ScaleRange(const char* in, char* out, int64_t begin, int64_t end, float factor) {
  const DF d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const int64_t es = static_cast<int64_t>(kernels::dtype_size(T));
  const VF a = hn::Set(d, factor);
  for (int64_t i = begin; i < end; i += 2 * N) {
    if constexpr (kInPlace) {  // past the end it reaches other memory: a prefetch never faults
      for (int64_t b = i * es; b < (i + 2 * N) * es; b += 64)
        hwy::Prefetch(in + kPrefetchBytes + b);
    }
    VF x0, x1;
    LoadTwoF<T>(d, in, i, x0, x1);
    StoreTwoF<T, !kInPlace>(d, hn::Mul(x0, a), hn::Mul(x1, a), out, i);
  }
  if (!kInPlace) hwy::FlushStream();
}

void Run(bool bf16, const void* in, void* out, int64_t n, float factor) {
  constexpr int64_t kItem = int64_t{1} << 16;
  const int64_t es = bf16 ? 2 : 4;
  const bool in_place = in == out;
  const auto* from = static_cast<const char*>(in);
  auto* to = static_cast<char*>(out);
  kernels::parallel_ranges((n + kItem - 1) / kItem, 2 * kItem * es, [&](int64_t b, int64_t e) {
    const int64_t begin = b * kItem, end = std::min(n, e * kItem);
    if (bf16) {
      if (in_place) return ScaleRange<DType::kBF16, true>(from, to, begin, end, factor);
      return ScaleRange<DType::kBF16, false>(from, to, begin, end, factor);
    }
    if (in_place) return ScaleRange<DType::kF32, true>(from, to, begin, end, factor);
    return ScaleRange<DType::kF32, false>(from, to, begin, end, factor);
  });
}

}  // namespace HWY_NAMESPACE
}  // namespace backplane::bench
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace backplane::bench {

HWY_EXPORT(Run);

void scale_roofline(bool bf16, const void* in, void* out, int64_t n, float factor) {
  HWY_DYNAMIC_DISPATCH(Run)(bf16, in, out, n, factor);
}

}  // namespace backplane::bench
#endif  // HWY_ONCE
