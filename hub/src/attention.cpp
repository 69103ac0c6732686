#include <backplane/error.hpp>
#include <backplane/hub/attention.hpp>
#include <backplane/hub/errors.hpp>

#include <memory>
#include <string>
#include <vector>

namespace backplane::hub {

AttentionResolution resolve_attention(const Runtime& runtime, const Store& store,
                                      const Device& device,
                                      std::optional<std::string_view> requested,
                                      AttentionQuery query) {
  if (!query.hub_installed) {
    query.hub_installed = [&store](const HubKernelId& id) { return store.installed(id); };
  }
  return runtime.resolve_attention(device, requested, query);
}

AttentionKernel attention_kernel(const Runtime& runtime, const Store& store,
                                 const AttentionResolution& resolution,
                                 const LoadOptions& options) {
  if (resolution.source != AttentionResolution::Source::kHub) {
    return runtime.attention_kernel(resolution);
  }
  if (!resolution.hub) {
    throw InvalidArgument("attention resolution for " + resolution.device.str() +
                          " is from the Hub but names no Hub kernel");
  }
  const HubKernelId& id = *resolution.hub;
  const DeviceInfo& device = runtime.device(resolution.device);
  const HubDevice hub_device = runtime.hub_device(resolution.device);
  LoadOptions load = options;
  if (id.revision) load.revision = *id.revision;
  load.device = &device;
  const LoadedPackage package = store.load(RepoId::parse(id.repo, "attn_implementation"),
                                           system_facts(device, hub_device.key), load);

  std::vector<const PackageKernel*> candidates;
  for (const PackageKernel& k : package.kernels()) {
    if (k.info.op != kAttentionForward) continue;
    if (id.function && k.info.implementation != *id.function) continue;
    candidates.push_back(&k);
  }
  if (candidates.size() != 1) {
    std::string have;
    for (const PackageKernel& k : package.kernels()) {
      if (k.info.op == kAttentionForward)
        have += (have.empty() ? "" : ", ") + k.info.implementation;
    }
    throw PackageError("kernel package " + id.repo + "@" + package.source().revision + " (" +
                       package.source().variant + ") " +
                       (candidates.empty() ? "has no attention_forward kernel"
                                           : "has several attention_forward kernels") +
                       (id.function ? " named " + *id.function : std::string()) +
                       "; it has: " + (have.empty() ? "none" : have) +
                       (candidates.empty() ? "" : "; name one with org/repo:function"));
  }
  const PackageKernel& kernel = *candidates.front();
  if (const std::string why = kernel_mismatch(kernel.info, device); !why.empty()) {
    throw Unavailable("Hub kernel " + id.str() + ": " + why);
  }
  return AttentionKernel(kernel.info, reinterpret_cast<bp_attention_forward_fn>(kernel.function),
                         kernel.context, kernel.owner);
}

}  // namespace backplane::hub
