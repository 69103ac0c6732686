// Everything a host application needs from backplane's core: devices and their strings, the
// runtime and its plugins, selection, device_map planning and the model descriptions it takes,
// tensor parallelism, simulated machines. The kernel hub (<backplane/hub.hpp>, backplane::hub)
// and the LibTorch bridge (<backplane/torch.hpp>, backplane::torch) are separate libraries.
#pragma once

#include <backplane/attention.hpp>
#include <backplane/device.hpp>
#include <backplane/device_info.hpp>
#include <backplane/device_map.hpp>
#include <backplane/error.hpp>
#include <backplane/kernel_mapping.hpp>
#include <backplane/kernels.hpp>
#include <backplane/model.hpp>
#include <backplane/model_source.hpp>
#include <backplane/runtime.hpp>
#include <backplane/selection.hpp>
#include <backplane/sim_topology.hpp>
#include <backplane/tensor_parallel.hpp>
#include <backplane/units.hpp>
#include <backplane/version.hpp>
#include <backplane/visibility.hpp>
#include <backplane/warnings.hpp>
