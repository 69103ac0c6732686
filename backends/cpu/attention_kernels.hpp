// The CPU attention kernels (kernels/attention) behind the plugin ABI's attention_forward.
#pragma once

#include <backplane/plugin_sdk.hpp>

namespace backplane::cpu {

// Registers attention_forward "sdpa" (fused, the default) and "eager" (the reference) for
// `cpu`. `host` is the kernels' context: it makes their error statuses and must outlive them.
void register_attention_kernels(sdk::Registrar& registrar, const sdk::Host* host);

}  // namespace backplane::cpu
