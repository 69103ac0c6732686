// Everything a host application needs from backplane's core. The folders say what each part is:
//   backplane/runtime/  the runtime and plugin loader: devices, their backends and kernels as
//                       plugins registered them, simulated machines
//   backplane/rules/    Transformers' and Accelerate's rules as pure functions: device strings,
//                       visibility variables, training and inference selection, attention
//                       resolution, kernel mapping
//   backplane/model/    model descriptions (config.json, safetensors headers, tree files),
//                       device_map planning and tensor parallelism
//   backplane/          what every part uses: errors, warnings, byte units, the version
// The kernel hub (<backplane/hub.hpp>, backplane::hub) and the LibTorch bridge
// (<backplane/torch.hpp>, backplane::torch) are separate libraries.
#pragma once

#include <backplane/error.hpp>
#include <backplane/model/device_map.hpp>
#include <backplane/model/model.hpp>
#include <backplane/model/model_source.hpp>
#include <backplane/model/tensor_parallel.hpp>
#include <backplane/rules/attention.hpp>
#include <backplane/rules/device.hpp>
#include <backplane/rules/kernel_mapping.hpp>
#include <backplane/rules/selection.hpp>
#include <backplane/rules/visibility.hpp>
#include <backplane/runtime/device_info.hpp>
#include <backplane/runtime/kernels.hpp>
#include <backplane/runtime/runtime.hpp>
#include <backplane/runtime/sim_topology.hpp>
#include <backplane/units.hpp>
#include <backplane/version.hpp>
#include <backplane/warnings.hpp>
