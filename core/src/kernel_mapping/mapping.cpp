#include <backplane/error.hpp>
#include <backplane/rules/kernel_mapping.hpp>

#include <algorithm>

namespace backplane {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_' || c == '.';
}

bool is_name(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), is_name_char);
}

constexpr const char* kAcceptedRef =
    "\"org/repo:Layer\", \"org/repo@revision:Layer\" or \"/absolute/path:Layer\"";

bool capability_keyed(std::string_view device_key) {
  return device_key == "cuda" || device_key == "rocm";
}

std::string describe(const KernelMappingEntry& entry) {
  return "kernel mapping entry from " + (entry.source.empty() ? "?" : entry.source) + " (layer \"" +
         entry.layer + "\", device \"" + entry.device_key + "\")";
}

}  // namespace

std::string LayerKernelRef::str() const {
  std::string out = repo;
  if (revision) out += "@" + *revision;
  return out + ":" + layer;
}

LayerKernelRef LayerKernelRef::parse(std::string_view text) {
  const auto fail = [&](const std::string& why) -> LayerKernelRef {
    throw InvalidArgument("layer kernel \"" + std::string(text) + "\": " + why +
                          "; accepted: " + kAcceptedRef);
  };
  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return fail("no \":Layer\" part");
  LayerKernelRef ref;
  ref.layer = std::string(text.substr(colon + 1));
  if (!is_name(ref.layer))
    return fail("the layer name is empty or has characters other than A-Z a-z 0-9 . _ -");
  std::string_view repo = text.substr(0, colon);
  if (!repo.empty() && repo.front() == '/') {
    ref.repo = std::string(repo);
    return ref;
  }
  const size_t at = repo.find('@');
  if (at != std::string_view::npos) {
    ref.revision = std::string(repo.substr(at + 1));
    if (!is_name(*ref.revision)) return fail("the revision after \"@\" is empty or malformed");
    repo = repo.substr(0, at);
  }
  const size_t slash = repo.find('/');
  if (slash == std::string_view::npos || !is_name(repo.substr(0, slash)) ||
      !is_name(repo.substr(slash + 1))) {
    return fail("the repo is not \"org/repo\"");
  }
  ref.repo = std::string(repo);
  return ref;
}

std::string CapabilityRange::str() const {
  if (min == 0 && max == INT_MAX) return "any";
  if (max == INT_MAX) return std::to_string(min) + "+";
  if (min == max) return std::to_string(min);
  return std::to_string(min) + "-" + std::to_string(max);
}

void KernelMapping::add(KernelMappingEntry entry) {
  if (entry.layer.empty() || entry.device_key.empty()) {
    throw InvalidArgument(describe(entry) + ": the layer and the device key must not be empty");
  }
  if (entry.kernel.repo.empty() || entry.kernel.layer.empty()) {
    throw InvalidArgument(describe(entry) + ": the kernel needs a repo and a layer name");
  }
  if (entry.capability) {
    if (!capability_keyed(entry.device_key)) {
      throw InvalidArgument(describe(entry) +
                            ": a compute-capability range applies only to cuda and rocm");
    }
    if (entry.capability->min < 0 || entry.capability->min > entry.capability->max) {
      throw InvalidArgument(describe(entry) + ": capability range " +
                            std::to_string(entry.capability->min) + ".." +
                            std::to_string(entry.capability->max) +
                            " is empty; give min <= max, as major * 10 + minor (8.0 -> 80)");
    }
  }
  entries_.push_back(std::move(entry));
}

void KernelMapping::merge(const KernelMapping& other, bool inherit) {
  if (!inherit) entries_.clear();
  entries_.insert(entries_.end(), other.entries_.begin(), other.entries_.end());
}

std::vector<std::string> KernelMapping::layers() const {
  std::vector<std::string> out;
  for (const KernelMappingEntry& e : entries_) {
    if (std::find(out.begin(), out.end(), e.layer) == out.end()) out.push_back(e.layer);
  }
  return out;
}

LayerKernelChoice KernelMapping::lookup(std::string_view layer, std::string_view device_key,
                                        std::optional<int> capability, KernelMode mode,
                                        const KernelFallbackPolicy& policy) const {
  const std::vector<KernelMode> order = mode.lookup_order();  // throws for fallback
  const std::string name(layer);
  const auto keep_forward = [&](bool allowed, const std::string& error, const std::string& reason,
                                bool warn) {
    if (!allowed) throw InvalidArgument(error);
    LayerKernelChoice choice;
    choice.reason = reason;
    choice.warn = warn;
    return choice;
  };

  const bool layer_known =
      std::any_of(entries_.begin(), entries_.end(),
                  [&](const KernelMappingEntry& e) { return e.layer == name; });
  if (!layer_known) {
    return keep_forward(policy.no_layer, "No layer mapping for `" + name + "`",
                        "No kernel mapping found for layer `" + name +
                            "`. Check if the layer name matches one of the kernels in the "
                            "mapping or add the kernel you want to use to the mapping. "
                            "Defaulting to original forward implementation.",
                        true);
  }

  // The entries for this layer and key; on cuda/rocm, the narrowest range holding the device's
  // capability (a device without one matches only unranged entries). Later entries win ties.
  std::vector<const KernelMappingEntry*> on_key;
  for (const KernelMappingEntry& e : entries_) {
    if (e.layer == name && e.device_key == device_key) on_key.push_back(&e);
  }
  if (on_key.empty()) {
    return keep_forward(
        policy.no_device,
        "No layer mapping for `" + name + "` with device type `" + std::string(device_key) + "`",
        "no kernel for layer `" + name + "` on device type `" + std::string(device_key) + "`",
        false);
  }
  // The group: the narrowest range holding the device's capability (a device without one
  // matches only unranged entries), and of the entries with that range, those of the source
  // that registered last, so that a user's mapping replaces a default one as a whole.
  const KernelMappingEntry* group = nullptr;
  for (const KernelMappingEntry* e : on_key) {
    const CapabilityRange range = e->capability.value_or(CapabilityRange{});
    const bool holds = capability ? range.contains(*capability) : !e->capability;
    if (holds &&
        (!group || range.width() <= group->capability.value_or(CapabilityRange{}).width())) {
      group = e;
    }
  }
  if (group == nullptr) {
    const std::string have =
        capability ? "compute capability " + std::to_string(*capability) : "no compute capability";
    return keep_forward(
        policy.no_compatible_properties,
        "No layer mapping for `" + name + "` device `" + std::string(device_key) +
            "` with the right properties",
        "no kernel for layer `" + name + "` on `" + std::string(device_key) + "` covers " + have,
        false);
  }
  const CapabilityRange chosen = group->capability.value_or(CapabilityRange{});
  const auto in_group = [&](const KernelMappingEntry& e) {
    const CapabilityRange range = e.capability.value_or(CapabilityRange{});
    return e.source == group->source && range.min == chosen.min && range.max == chosen.max;
  };
  for (KernelMode wanted : order) {
    for (auto it = on_key.rbegin(); it != on_key.rend(); ++it) {
      if (in_group(**it) && (*it)->mode == wanted) {
        LayerKernelChoice choice;
        choice.entry = **it;
        choice.matched_mode = wanted;
        return choice;
      }
    }
  }
  return keep_forward(policy.no_compatible_mode,
                      "No repository for `" + name + "` for configuration mode=" + mode.str(),
                      "no kernel for layer `" + name + "` on `" + std::string(device_key) +
                          "` in mode " + mode.str() + " or its fallbacks",
                      false);
}

}  // namespace backplane
