// flash_forward.cu's kernel compiled for the CPU emulator: the NVIDIA path (mma.sync, ldmatrix
// and cp.async emulated), or the AMD path when built with BACKPLANE_GPU_AMD.
#include "gpu_emulator.hpp"
// (order matters: the emulator defines the CUDA names the kernel source uses)
#include "emulated_kernels.hpp"
#include "flash_forward.cu"

namespace backplane::attention::gpu {
namespace {

template <class T, int D>
void run(const Params& p) {
  const emulator::Index grid{static_cast<unsigned>((p.seq_q + kRows - 1) / kRows),
                             static_cast<unsigned>(p.heads_q), static_cast<unsigned>(p.batch)};
  emulator::launch(grid, kThreads, Tile<D>::kSharedBytes, [&] { flash_forward_kernel<T, D>(p); });
}

template <class T>
void run_bucket(const Params& p) {
  const int dim = std::max(p.head_dim, p.head_dim_v);
  if (dim <= 64) return run<T, 64>(p);
  if (dim <= 128) return run<T, 128>(p);
  run<T, 256>(p);
}

}  // namespace

#if defined(BACKPLANE_GPU_AMD)
void emulate_flash_amd(const Params& p) {
#else
void emulate_flash_nvidia(const Params& p) {
#endif
  p.dtype == ElementType::kBfloat16 ? run_bucket<Bf16>(p) : run_bucket<F16>(p);
}

}  // namespace backplane::attention::gpu
