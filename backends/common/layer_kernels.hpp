// The default layer kernels of the in-tree plugins: the kernel packages built from kernels/
// (org "backplane": rmsnorm, activation, rotary). Registered by the cpu and cuda plugins for
// their Hub keys; a user's kernel mapping overrides them, and a package missing from the store
// leaves the layer's own forward in place.
#pragma once

#include <backplane/plugin_sdk.hpp>

#include <initializer_list>
#include <string>

namespace backplane::backends {

// Each layer in inference mode, and in training mode where its package has a backward on this
// device (the packages' BACKWARD_* lists, kernels/*/CMakeLists.txt): `no_backward` names the
// layers whose package has none here, which keep their own forward in training (as the kernels
// library does for a layer without has_backward). `min_capability` (major * 10 + minor, -1:
// none) limits them to devices the package's build runs on. Returns false when the host is
// older than ABI 1.4 and takes none.
bool register_default_layer_kernels(const sdk::Registrar& registrar, const std::string& device_key,
                                    int min_capability = -1,
                                    std::initializer_list<const char*> no_backward = {});

}  // namespace backplane::backends
