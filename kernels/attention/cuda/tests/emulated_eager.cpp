// eager_forward.cu's kernel compiled for the CPU emulator.
#include "gpu_emulator.hpp"
// (order matters: the emulator defines the CUDA names the kernel source uses)
#include "eager_forward.cu"
#include "emulated_kernels.hpp"

namespace backplane::attention::gpu {

void emulate_eager(const Params& p) {
  const emulator::Index grid{static_cast<unsigned>(p.seq_q), static_cast<unsigned>(p.heads_q),
                             static_cast<unsigned>(p.batch)};
  emulator::launch(grid, kThreads, 0, [&] { eager_forward_kernel(p); });
}

}  // namespace backplane::attention::gpu
