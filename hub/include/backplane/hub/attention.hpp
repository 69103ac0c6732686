// attn_implementation with the local kernel store: the Runtime's resolution told which Hub
// kernels the store holds, and a callable kernel for Hub resolutions too (the core resolves,
// but only the hub can load a package).
#pragma once

#include <backplane/export.hpp>
#include <backplane/hub/store.hpp>
#include <backplane/rules/attention.hpp>
#include <backplane/runtime/runtime.hpp>

#include <optional>
#include <string_view>

namespace backplane::hub {

// Runtime::resolve_attention with AttentionQuery::hub_installed answered by `store` (unless the
// query already has its own answer).
BACKPLANE_API AttentionResolution resolve_attention(const Runtime& runtime, const Store& store,
                                                    const Device& device,
                                                    std::optional<std::string_view> requested = {},
                                                    AttentionQuery query = {});

// The kernel a resolution names: a plugin's (Runtime::attention_kernel) or, for a Hub
// resolution, the attention_forward kernel of the Hub package loaded from `store` for the
// resolved device (its function when the id names one, else the package's only
// attention_forward kernel), under the store's lock and trust rules. Throws NotFound when the
// package or a fitting variant is missing, PackageError / IntegrityError when the store
// refuses it, Unavailable when the kernel cannot run on the device.
BACKPLANE_API AttentionKernel attention_kernel(const Runtime& runtime, const Store& store,
                                               const AttentionResolution& resolution,
                                               const LoadOptions& options = {});

}  // namespace backplane::hub
