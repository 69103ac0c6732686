// The CUDA attention kernels (kernels/attention/cuda) as plugin kernels: flash_attention_2,
// sdpa and eager for `cuda` devices of compute capability 8.0 and later.
#pragma once

#include <backplane/plugin_sdk.hpp>

namespace backplane::cuda {

// Registers the kernels whether or not a driver is usable here, so that their requirements
// are listed everywhere; a call without a usable device returns the CUDA runtime's error.
// `host` must outlive the plugin's state.
void register_attention_kernels(sdk::Registrar& registrar, const sdk::Host* host);

}  // namespace backplane::cuda
