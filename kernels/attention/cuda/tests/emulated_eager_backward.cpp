// eager_backward.cu's kernels compiled for the CPU emulator, launched as the plugin launches
// them: the dq kernel, then the dk/dv kernel.
#include "gpu_emulator.hpp"
// (order matters: the emulator defines the CUDA names the kernel source uses)
#include "eager_backward.cu"
#include "emulated_kernels.hpp"

namespace backplane::attention::gpu {

void emulate_eager_backward(const BackwardParams& bp) {
  const Params& p = bp.fwd;
  if (p.seq_q > 0 && p.heads_q > 0) {
    const emulator::Index grid{static_cast<unsigned>(p.seq_q), static_cast<unsigned>(p.heads_q),
                               static_cast<unsigned>(p.batch)};
    emulator::launch(grid, kThreads, 0, [&] { eager_backward_dq_kernel(bp); });
  }
  if (p.seq_k > 0 && p.heads_kv > 0) {
    const emulator::Index grid{static_cast<unsigned>(p.seq_k), static_cast<unsigned>(p.heads_kv),
                               static_cast<unsigned>(p.batch)};
    emulator::launch(grid, kThreads, 0, [&] { eager_backward_dkv_kernel(bp); });
  }
}

}  // namespace backplane::attention::gpu
