// Layer-to-kernel mapping: which Hub kernel replaces a model layer on a device in a mode, by the
// rules of the `kernels` library that transformers' use_kernels=True relies on
// (docs/device-rules.md §7.1).
//
// A mapping holds entries "layer on device key [within a capability range]: mode -> kernel",
// registered in order: the plugins' defaults first (in load order), then the user's
// (KernelConfig). Lookup for one layer on one device in one mode:
//   1. the entries for the layer and the device's Hub key (cuda, rocm, xpu, npu, mps, cpu, ...);
//   2. the group: on cuda and rocm, the narrowest capability range that holds the device's
//      compute capability (unranged entries hold every one; a device without a capability
//      matches only those); of the entries with that range, those of the source that
//      registered last, so that a user's mapping replaces a plugin's default as a whole;
//   3. in that group, the first mode of the requested mode's priority list that it has:
//        inference:               inference, inference|torch_compile, training,
//                                 training|torch_compile, fallback
//        training:                training, training|torch_compile, fallback
//        inference|torch_compile: inference|torch_compile, training|torch_compile, fallback
//        training|torch_compile:  training|torch_compile, fallback
// When a step finds nothing, the layer keeps its own forward (with the `kernels` library's
// warning), unless the caller's fallback policy forbids it for that step: then an error.
#pragma once

#include <backplane/export.hpp>

#include <nlohmann/json_fwd.hpp>

#include <climits>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane {

// A kernelize mode: inference or training, optionally with torch_compile; or, in a mapping
// only, fallback (used when no other mode matches).
class BACKPLANE_API KernelMode {
 public:
  static KernelMode inference() { return KernelMode(kInference); }
  static KernelMode training() { return KernelMode(kTraining); }
  static KernelMode fallback() { return KernelMode(kFallback); }
  KernelMode with_torch_compile() const;  // throws InvalidArgument on fallback

  // "inference", "training", "fallback", "inference|torch_compile", "training|torch_compile"
  // (any order, any case). Throws InvalidArgument naming `text` and what is accepted.
  static KernelMode parse(std::string_view text);

  // From the plugin ABI's bp_kernel_mode bits (the same values); throws InvalidArgument for a
  // combination parse() would refuse.
  static KernelMode from_bits(uint32_t bits);
  uint32_t bits() const { return bits_; }

  bool is_fallback() const { return bits_ == kFallback; }
  bool is_training() const { return (bits_ & kTraining) != 0; }
  bool has_torch_compile() const { return (bits_ & kTorchCompile) != 0; }
  std::string str() const;

  // The modes tried, in order, when looking up this one. Throws InvalidArgument for fallback,
  // which is a mapping-only mode.
  std::vector<KernelMode> lookup_order() const;

  friend bool operator==(KernelMode a, KernelMode b) { return a.bits_ == b.bits_; }
  friend bool operator!=(KernelMode a, KernelMode b) { return a.bits_ != b.bits_; }

 private:
  enum Bits : uint8_t { kFallback = 1, kTraining = 2, kInference = 4, kTorchCompile = 8 };
  explicit KernelMode(uint8_t bits) : bits_(bits) {}
  uint8_t bits_;
};

// A layer kernel in a Hub repo: "org/repo:Layer", or a local folder "/abs/path:Layer".
struct BACKPLANE_API LayerKernelRef {
  std::string repo;                     // "kernels-community/activation", or an absolute path
  std::string layer;                    // "SiluAndMul"
  std::optional<std::string> revision;  // a branch, tag or commit
  std::optional<int> version;           // a kernel version (the kernels library's `version=`)
  bool trust_remote_code = false;

  bool is_local_path() const { return !repo.empty() && repo.front() == '/'; }
  std::string str() const;  // "org/repo:Layer", with "@revision" after the repo when set
  // Throws InvalidArgument naming `text` and the accepted forms.
  static LayerKernelRef parse(std::string_view text);
};

// Compute capabilities as the kernels library counts them: major * 10 + minor (8.9 -> 89).
struct BACKPLANE_API CapabilityRange {
  int min = 0;
  int max = INT_MAX;
  bool contains(int capability) const { return min <= capability && capability <= max; }
  int64_t width() const { return int64_t{max} - min; }
  std::string str() const;  // "80-89", "90+", "any"
};

// A device as layer-kernel lookup sees it (Runtime::hub_device gives it for a device).
struct HubDevice {
  std::string key;                // the backend's Hub key: "cuda", "rocm", "cpu", ...
  std::optional<int> capability;  // compute capability as major * 10 + minor; none: none
};

struct KernelMappingEntry {
  std::string layer;       // "RMSNorm"
  std::string device_key;  // a Hub device key: "cuda", "rocm", "xpu", "npu", "mps", "cpu", ...
  std::optional<CapabilityRange> capability;  // cuda and rocm only; none: every capability
  KernelMode mode = KernelMode::fallback();
  LayerKernelRef kernel;
  std::string source;  // who registered it: a plugin's name, or "user"
};

// How lookup ends when a step finds nothing (the kernels library's KernelizeFallback flags).
// Each flag set lets the layer keep its own forward at that step; a cleared flag makes it an
// error.
struct KernelFallbackPolicy {
  bool no_layer = true;                  // no entry names the layer
  bool no_device = true;                 // none for the device's key
  bool no_compatible_properties = true;  // none whose capability range holds the device's
  bool no_compatible_mode = true;        // none for the mode or its fallbacks
  static KernelFallbackPolicy none() { return {false, false, false, false}; }
};

struct LayerKernelChoice {
  std::optional<KernelMappingEntry> entry;  // the kernel to use; none: keep the layer's forward
  std::optional<KernelMode> matched_mode;   // the mode of the lookup order that matched
  std::string reason;  // why the layer keeps its own forward; empty when entry is set
  bool warn = false;   // the kernels library warns (an unmapped layer) rather than stays quiet
};

// Entries in registration order. Value type: copy it to derive a mapping with more entries.
class BACKPLANE_API KernelMapping {
 public:
  // Checks the entry (non-empty names; a capability range only on cuda or rocm; min <= max)
  // and appends it. Throws InvalidArgument naming the entry's source and field.
  void add(KernelMappingEntry entry);
  // Appends `other`'s entries after these (inherit), or replaces these with them.
  void merge(const KernelMapping& other, bool inherit = true);
  const std::vector<KernelMappingEntry>& entries() const { return entries_; }

  // The kernel for `layer` on a device with Hub key `device_key` and compute capability
  // `capability` (major * 10 + minor; none when the device has none) in `mode`. Throws
  // InvalidArgument when `policy` forbids the fallback that would be taken, and for a
  // fallback `mode`.
  LayerKernelChoice lookup(std::string_view layer, std::string_view device_key,
                           std::optional<int> capability, KernelMode mode,
                           const KernelFallbackPolicy& policy = {}) const;

  LayerKernelChoice lookup(std::string_view layer, const HubDevice& device, KernelMode mode,
                           const KernelFallbackPolicy& policy = {}) const {
    return lookup(layer, device.key, device.capability, mode, policy);
  }

  // The layer names with entries, in first-registration order.
  std::vector<std::string> layers() const;

 private:
  std::vector<KernelMappingEntry> entries_;
};

// A user mapping in transformers' KernelConfig form, as JSON:
//   {"RMSNorm": "org/repo:RMSNorm"}                        every device key, every mode
//   {"RMSNorm": {"cuda": "org/repo:RMSNorm", "cpu": ...}}  per device key
//   {"RMSNorm": ["org/repo:RMSNorm", {"revision": "v2", "version": 1,
//                                     "trust_remote_code": false}]}   with metadata
//   {"RMSNorm": {"cuda": {"inference": "...", "training": "..."}}}    per mode (an extension)
// A value without modes is registered in mode fallback, so it serves every mode (transformers
// instead registers it in the model's mode at load time; a later train()/eval() then finds no
// entry for the other mode). A value without device keys is registered for every key in
// `device_keys`. Throws InvalidArgument naming `source` and the offending layer and field.
BACKPLANE_API KernelMapping parse_kernel_config(const nlohmann::json& config,
                                                const std::vector<std::string>& device_keys,
                                                std::string_view source = "user");

// The device keys a KernelConfig may name: cuda, rocm, xpu, npu, neuron, tpu, mps (as
// transformers accepts) and cpu.
BACKPLANE_API const std::vector<std::string>& kernel_config_device_keys();

}  // namespace backplane
