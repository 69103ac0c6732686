// The threads the layer benchmarks run on, for backplane's pool and LibTorch's alike:
// BACKPLANE_BENCH_THREADS, default hardware_concurrency(). The first call sets both pools.
#pragma once

namespace backplane::bench {

int layer_threads();

}  // namespace backplane::bench
