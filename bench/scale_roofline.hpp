// What this CPU gives bfloat16 against float32 per byte on the layer kernels' memory patterns:
// y = ax with the kernels' own row loads, conversions and stores (common/simd-inl.h) and
// nothing else, on the kernels' thread pool. The layer-kernel report sets each bfloat16 kernel's
// per-byte ratio beside this one.
#pragma once

#include <cstdint>

namespace backplane::bench {

// out = factor * in over n elements (a multiple of 64), bfloat16 or float32, in 64 Ki-element items
// over the pool. out != in: non-temporal stores (rmsnorm's and silu_and_mul's outputs; out
// 64-byte aligned), no software prefetch. out == in: in place (rotary's update), with a prefetch
// kPrefetchBytes ahead, without which a bfloat16 loop keeps too few lines in flight to reach the
// float32 loop's rate.
void scale_roofline(bool bf16, const void* in, void* out, int64_t n, float factor);

}  // namespace backplane::bench
