// The sdpa implementation: fused, tiled attention with an online softmax (FlashAttention-2
// style). The score matrix exists only as one [kv block x query block] tile per worker.
//
// Layouts: the score tile is transposed, keys in rows and queries across the vector lanes:
//   S^T[j][i] = sum_p K[j][p] * Q^T[p][i]     K scalars broadcast, Q^T packed once per block
//   O[i][c]   = alpha[i] * O[i][c] + sum_j P^T[j][i] * V[j][c]
//                                             P scalars broadcast (contiguous in P^T's rows),
//                                             V rows loaded as vectors
// so the softmax max/sum over keys is a vertical max/add across S^T's rows: no horizontal
// reductions. K and V come from per-head panels (Panels) for blocks of queries, and straight
// from their rows when decoding (QKDot). bf16 runs on AMX or AVX512-BF16 where it can
// (RunBlockBf16).
//
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/sdpa.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
// foreach_target.h first: it re-includes this file once per target.
#include <hwy/highway.h>

#include <algorithm>
#include <atomic>

#include "common/thread_pool.hpp"
#include "cpu/problem.hpp"
#include "cpu/sdpa_amx-inl.h"
#include "cpu/sdpa_block-inl.h"

HWY_BEFORE_NAMESPACE();
namespace backplane::attention::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using BlockFn = void (*)(const Problem&, const Plan&, int64_t, int64_t, int64_t, int64_t, float*);

void RunAll(const Problem& p, const Plan& plan, int threads, BlockFn run_block) {
  const int64_t heads = p.batch * p.heads_kv;
  const int64_t nrb = plan.row_blocks;
  const int64_t blocks = heads * nrb;
  kernels::ThreadPool& pool = kernels::ThreadPool::global();
  if (plan.splits == 1) {
    // A work item is a share of one kv head's row blocks (every chunks-th one, the blocks that
    // see the most keys first): a thread keeps a head's panels to itself and packs them once,
    // while the items stay many enough (4 per thread) to balance.
    const int64_t chunks =
        std::min<int64_t>(nrb, std::max<int64_t>(1, (4 * threads + heads - 1) / heads));
    pool.parallel_for(heads * chunks, threads, [&](int64_t item, int) {
      const int64_t bh = item / chunks, c = item % chunks;
      for (int64_t rb = nrb - 1 - c; rb >= 0; rb -= chunks)
        run_block(p, plan, bh / p.heads_kv, bh % p.heads_kv, rb, 0, nullptr);
    });
    return;
  }
  const int64_t stride = plan.partial_floats();
  float* partials = PartialScratch().get(static_cast<size_t>(blocks * plan.splits * stride));
  pool.parallel_for(blocks * plan.splits, threads, [&](int64_t item, int) {
    const int64_t split = item % plan.splits, block = item / plan.splits;
    const int64_t bh = block / nrb, rb = block % nrb;
    run_block(p, plan, bh / p.heads_kv, bh % p.heads_kv, rb, split, partials + item * stride);
  });
  pool.parallel_for(blocks, threads, [&](int64_t block, int) {
    const int64_t bh = block / nrb, rb = block % nrb;
    BlockBuffers buf = AllocBuffers(p, plan);
    MergeSplits(p, plan, bh / p.heads_kv, bh % p.heads_kv, rb,
                partials + block * plan.splits * stride, buf.o, buf.m, buf.l);
  });
}

void RunSdpa(const Problem& p, int threads, RunInfo* info) {
  static std::atomic<uint64_t> calls{0};
  // Blocks of at most kDotMaxRows rows (decoding) take the dot-product path, not tiles.
  const bool decoding = p.group() * p.seq_q <= kDotMaxRows;
  const Bf16Tiles tiles = decoding ? Bf16Tiles::kNone : Bf16TilesFor(p);
  // The AMX tiles take 192 keys per block, twice the fp32 tiles' 96: each block ends with
  // O = alpha O + P V on the vector units, which cost 8-10% of the kernel at 96 (bf16 causal
  // prefill 717 -> 785 GFLOP/s, interleaved runs on a Xeon with AMX).
  constexpr int64_t kAmxKvBlock = 192;
  Plan plan = MakePlan(p, threads, tiles == Bf16Tiles::kAmx ? kAmxKvBlock : 0);
  plan.call = calls.fetch_add(1, std::memory_order_relaxed);
  BlockFn run_block = plan.nr == 1 ? &RunBlock<1> : &RunBlock<2>;
  const char* tile_kernel = "f32-fma";
  (void)tiles;  // only the AVX3 targets have bf16 tiles
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  if (tiles == Bf16Tiles::kAmx) {
    run_block = plan.nr == 1 ? &RunBlockBf16<1, true> : &RunBlockBf16<2, true>;
    tile_kernel = "amx-bf16";
  } else if (tiles == Bf16Tiles::kDpbf16) {
    run_block = plan.nr == 1 ? &RunBlockBf16<1, false> : &RunBlockBf16<2, false>;
    tile_kernel = "avx512-bf16";
  }
  // The dot path's Q.K on vdpbf16ps where that pays as for the tiles, with K and V rows of whole
  // vectors as they lie and head_dim in whole 32-element vectors of pairs (QKDotBf16).
  plan.dpbf16_dot = p.dtype == DType::kBF16 && dpbf16_tiles_available() && p.k.stride[3] == 1 &&
                    p.v.stride[3] == 1 && p.head_dim % 32 == 0 &&
                    p.head_dim_v % static_cast<int64_t>(hn::Lanes(DF())) == 0;
  if (decoding && plan.dpbf16_dot) tile_kernel = "avx512-bf16";
#endif
  if (info) {
    info->target = hwy::TargetName(HWY_TARGET);
    info->tile_kernel = tile_kernel;
    info->block_keys = plan.bk;
  }
  RunAll(p, plan, threads, run_block);
}

const char* TargetNameHere() {
  return hwy::TargetName(HWY_TARGET);
}
}  // namespace HWY_NAMESPACE
}  // namespace backplane::attention::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace backplane::attention::cpu {

HWY_EXPORT(RunSdpa);
HWY_EXPORT(TargetNameHere);

void run_sdpa(const Problem& p, int threads, RunInfo* info) {
  HWY_DYNAMIC_DISPATCH(RunSdpa)(p, threads, info);
}

const char* sdpa_target() {
  return HWY_DYNAMIC_DISPATCH(TargetNameHere)();
}

}  // namespace backplane::attention::cpu
#endif  // HWY_ONCE
