// A device type's registration as the facts table says it (backplane/internal/device_types.hpp):
// every in-tree plugin and the simulated backend register their types through this.
#pragma once

#include <backplane/internal/device_types.hpp>
#include <backplane/plugin_sdk.hpp>

#include <stdexcept>
#include <string>

namespace backplane::backends {

// name, Hub key, collective backend, training priority and flags of `name`; availability is
// the plugin's to say.
inline sdk::DeviceTypeSpec device_type_spec(const std::string& name) {
  const internal::DeviceTypeFacts* facts = internal::device_type_facts(name);
  if (facts == nullptr) throw std::logic_error("no device type facts for '" + name + "'");
  sdk::DeviceTypeSpec spec;
  spec.name = name;
  spec.hub_key = std::string(facts->hub_key);
  spec.collective_backend = std::string(facts->collective_backend);
  spec.training_priority = facts->training_priority;
  if (facts->accelerator) spec.flags |= BP_TYPE_ACCELERATOR;
  if (facts->automatic_placement) spec.flags |= BP_TYPE_AUTO_PLACEMENT;
  return spec;
}

}  // namespace backplane::backends
