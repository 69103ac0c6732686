// The core's half of the simulated backend: a vendor runtime applies its visibility variables
// to the devices it finds; for devices described by a topology, the core does it instead.
#pragma once

#include <backplane/rules/visibility.hpp>

#include "registry.hpp"

namespace backplane::detail {

// For each simulated backend in `registered` (its devices in physical order), keeps the devices
// the vendor's variables make visible, in their logical order, renumbered, with physical_index,
// visibility_variable and the backend's visibility_notes set. A variable the vendor runtime
// would refuse makes the backend unavailable with that reason.
void apply_simulated_visibility(Registry& registered, const EnvLookup& env);

}  // namespace backplane::detail
