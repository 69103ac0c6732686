// Which device a program uses: the rules of Transformers and Accelerate for training, inference
// and pipeline() (spec/device-rules.md §2 and §3), and the device_map value of from_pretrained().
//
// Pure functions over plain data: the registry snapshot (backends and devices, as a Runtime
// returns them) and an environment lookup, so tables can test every rule. Each rule names the
// source it mirrors. The overloads that take a Runtime read the process environment with
// secure_getenv.
#pragma once

#include <backplane/device.hpp>
#include <backplane/device_info.hpp>
#include <backplane/export.hpp>
#include <backplane/visibility.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane {

class Runtime;

// ---- device_map values (transformers modeling_utils.py / integrations/accelerate.py) -----------

enum class DeviceMapKind {
  kAuto,          // "auto"
  kBalanced,      // "balanced"
  kBalancedLow0,  // "balanced_low_0"
  kSequential,    // "sequential"
  kDevice,        // a device string: "cuda:3", "cpu", "neuron"
  kIndex,         // a non-negative int: an accelerator index
  kExplicit,      // a dict {module name: device}
};

// "auto", "balanced", "balanced_low_0", "sequential", "device", "index", "explicit".
BACKPLANE_API const char* to_string(DeviceMapKind kind);

// Where one module goes: what hf_device_map holds for it.
struct DeviceMapTarget {
  enum class Kind { kIndex, kDevice, kDisk };
  Kind kind = Kind::kIndex;
  int index = 0;         // kIndex: the accelerator with this index
  Device device{"cpu"};  // kDevice: as written ("cuda:1", "cpu", "mps")
  // "0", "cuda:1", "disk".
  BACKPLANE_API std::string str() const;
};

// A parsed device_map argument. The planner (device_map.hpp) takes one of these.
struct DeviceMapRequest {
  DeviceMapKind kind = DeviceMapKind::kAuto;
  // kDevice, kIndex and kExplicit: module name -> target, in the order given. A device string or
  // an int becomes {"": target}, as transformers turns them. Empty for the four strategies.
  std::vector<std::pair<std::string, DeviceMapTarget>> modules;

  bool is_strategy() const { return modules.empty() && kind != DeviceMapKind::kExplicit; }
  // The value in the form it was given: "auto", "cuda:3", "0", or a JSON object.
  BACKPLANE_API std::string str() const;
};

// Parses a device_map value written as text (a command line, a config file):
//   "auto" | "balanced" | "balanced_low_0" | "sequential"   a placement strategy
//   an integer ("0", "-1")                                 the int form (a text cannot tell
//                                                          "3" from 3, so digits mean the int)
//   a JSON object ({"model.layers.0": 0, "lm_head": "cpu", "model.norm": "disk"})  the dict form;
//     values are non-negative ints, "disk" or device strings
//   anything else                                          a device string, parsed with c10's
//                                                          grammar against `known_types`
// Throws InvalidArgument with transformers' messages:
//   "When passing device_map as a string, the value needs to be a device name (e.g. cpu,
//    cuda:0) or 'auto', 'balanced', 'balanced_low_0', 'sequential' but found <value>."
//   "You can't pass device_map as a negative int. If you want to put the model on the cpu, pass
//    device_map = 'cpu' "   (transformers' own trailing space included)
// and, for the dict form (where transformers fails later, inside Accelerate), messages that
// name the module and the value.
BACKPLANE_API DeviceMapRequest parse_device_map(std::string_view value,
                                                const std::vector<std::string>& known_types);
// Same, against builtin_device_types().
BACKPLANE_API DeviceMapRequest parse_device_map(std::string_view value);
// The int form: {"": index}; a negative index throws the negative-int message.
BACKPLANE_API DeviceMapRequest parse_device_map_index(long long index);

}  // namespace backplane
