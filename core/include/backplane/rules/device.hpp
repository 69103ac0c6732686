// Device strings with PyTorch's c10 grammar: `name` or `name:index`.
#pragma once

#include <backplane/export.hpp>

#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace backplane {

// A device type and an optional index: `cuda`, `cuda:3`, `cpu`. A plain value type.
class BACKPLANE_API Device {
 public:
  // A device string with c10's grammar and messages, as c10::Device("cuda:1") parses it: a type
  // of [a-zA-Z_]+ and an optional index without sign or leading zeros; cpu takes no index but 0.
  // Any well-formed type is taken, since plugins add types; Runtime::parse_device also checks
  // that a plugin registered it. Throws InvalidArgument ("Invalid device string: 'cuda:-1'").
  explicit Device(std::string_view text);
  // A type and an index. Throws InvalidArgument for an empty or malformed type (a device string
  // such as "cuda:1" belongs in the one-argument form) and for a negative index.
  Device(std::string type, std::optional<int> index);

  const std::string& type() const { return type_; }
  std::optional<int> index() const { return index_; }
  bool has_index() const { return index_.has_value(); }
  // "cuda:3" or "cuda".
  std::string str() const;

  friend bool operator==(const Device& a, const Device& b) {
    return a.type_ == b.type_ && a.index_ == b.index_;
  }
  friend bool operator!=(const Device& a, const Device& b) { return !(a == b); }

 private:
  std::string type_;
  std::optional<int> index_;
};

BACKPLANE_API std::ostream& operator<<(std::ostream& os, const Device& device);

// The device type names every runtime knows, whether or not a plugin provides them: the
// hardware table of Transformers (cpu, cuda, xpu, mps, hpu, npu, mlu, musa, neuron, tpu) and meta.
BACKPLANE_API const std::vector<std::string>& builtin_device_types();

// Names only their owning backend may register (as PyTorch reserves its own device types).
// Returns the plugins allowed to register `type`, or an empty list when anyone may.
BACKPLANE_API std::vector<std::string> reserved_type_owners(std::string_view type);

// Whether `name` is a well-formed device type name ([a-zA-Z_]+).
BACKPLANE_API bool is_valid_device_type_name(std::string_view name);

// Parses a device string against the given known type names (case-sensitive).
// Throws InvalidArgument with c10's messages:
//   "Device string must not be empty"
//   "Invalid device string: 'cuda:01'"
//   "Could not parse device index '99999999999' in device string 'cuda:99999999999'"
//   "Expected one of cpu, cuda, ... device type at start of device string: CUDA"
//   "CPU device index must be absent or zero, got 1"
BACKPLANE_API Device parse_device(std::string_view text,
                                  const std::vector<std::string>& known_types);
// Same, against builtin_device_types().
BACKPLANE_API Device parse_device(std::string_view text);

}  // namespace backplane
