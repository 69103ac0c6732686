// The GPU kernels run on CPU threads by gpu_emulator.hpp, one function per kernel and path.
#pragma once

#include "params.hpp"

namespace backplane::attention::gpu {

void emulate_flash_nvidia(const Params& p);  // mma.sync / ldmatrix / cp.async path, 4 warps
void emulate_flash_amd(const Params& p);     // FMA path, 2 warps, one stage
void emulate_eager(const Params& p);
void emulate_eager_backward(const BackwardParams& p);  // both kernels, dq first

}  // namespace backplane::attention::gpu
