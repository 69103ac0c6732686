// device_map planning: where each module of a model goes when from_pretrained() is given
// device_map="auto", "balanced", "balanced_low_0", "sequential", a device or an index
// (docs/device-rules.md §4). The result has the shape of model.hf_device_map.
//
// Two rule sets, both matched result for result against the pinned Python oracles by the
// differential test (tests/planner):
//   kFromPretrained  transformers' from_pretrained(device_map=...): its own get_max_memory,
//                    get_balanced_memory and infer_auto_device_map (integrations/accelerate.py),
//                    Accelerate's get_max_layer_size and clean_device_map.
//   kAccelerate      Accelerate's load_checkpoint_and_dispatch(device_map=...): utils/modeling.py
//                    get_balanced_memory and infer_auto_device_map, with its dtype override.
// The planner takes O(n log k) for n modules and tensors and k distinct layer sizes (linear in
// practice); Accelerate's own loops rescan the pending modules at some steps (quadratic).
#pragma once

#include <backplane/export.hpp>
#include <backplane/model/model.hpp>
#include <backplane/rules/device.hpp>
#include <backplane/rules/selection.hpp>
#include <backplane/runtime/device_info.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane {

class Runtime;

// A device as max_memory names it: an accelerator index, "mps", "cpu" or "disk". Ordered the way
// Accelerate's get_max_memory orders max_memory: accelerators by index, then mps, cpu, disk.
struct MemoryDevice {
  enum class Kind { kAccelerator, kMps, kCpu, kDisk };
  Kind kind = Kind::kCpu;
  int index = 0;  // kAccelerator only

  static MemoryDevice accelerator(int index) { return {Kind::kAccelerator, index}; }
  static MemoryDevice mps() { return {Kind::kMps, 0}; }
  static MemoryDevice cpu() { return {Kind::kCpu, 0}; }
  static MemoryDevice disk() { return {Kind::kDisk, 0}; }

  // "0", "mps", "cpu", "disk".
  BACKPLANE_API std::string str() const;
  // What hf_device_map holds for it: an index, "mps", "cpu" or "disk".
  BACKPLANE_API DeviceMapTarget target() const;

  friend bool operator<(const MemoryDevice& a, const MemoryDevice& b) {
    return a.kind != b.kind ? a.kind < b.kind : a.index < b.index;
  }
  friend bool operator==(const MemoryDevice& a, const MemoryDevice& b) {
    return a.kind == b.kind && a.index == b.index;
  }
  friend bool operator!=(const MemoryDevice& a, const MemoryDevice& b) { return !(a == b); }
};

// max_memory: the most bytes of weights each device may take, in Accelerate's device order.
class BACKPLANE_API MaxMemory {
 public:
  MaxMemory() = default;

  // The command-line form "0=10GiB,1=10GiB,cpu=64GiB,disk=1000GB": comma-separated KEY=SIZE.
  // Keys: a non-negative integer (an accelerator index), "mps", "cpu", "disk". Sizes:
  // parse_memory_size (Accelerate's convert_file_size_to_int), so "1TB" is refused with its
  // message, as Accelerate refuses it, and a hint: write "1000GB" or "931GiB". (The disk budget
  // is never a limit anyway: Accelerate places without limit on disk.) `source` names the input
  // in errors ("--max-memory"); an entry's errors name it too. Throws InvalidArgument:
  //   "max_memory gpu=1GB: Device gpu is not recognized, available devices are integers(for
  //    GPU/XPU), 'mps', 'cpu' and 'disk'"                 (Accelerate's message, for a bad key)
  //   "max_memory 0=1TB: `size` 1TB is not in a valid format. ... (Accelerate's sizes stop at
  //    GB: write 1000GB, or 931GiB)"                      (parse_memory_size's, and the hint)
  //   "max_memory 0=2GB: device 0 is given twice", "max_memory -1=1GB: accelerator index -1 is
  //    negative", "max_memory: expected KEY=SIZE, found 'cpu'", "max_memory is empty; ..."
  static MaxMemory parse(std::string_view text, std::string_view source = "max_memory");
  // The dict form, keys and values as text ({"0": "10GiB", "cpu": "64GiB"}); same rules, and an
  // empty map is valid (everything then goes to disk, as with Accelerate's max_memory={}).
  static MaxMemory from_map(const std::vector<std::pair<std::string, std::string>>& entries,
                            std::string_view source = "max_memory");

  // Budgets that are most likely a mistake: above 0 and under 1 MiB (cpu=30 is 30 bytes), one
  // sentence each naming `source`, the key and the size as written, with a hint to add a unit
  // when it had none. Accelerate takes them without a word.
  std::vector<std::string> warnings(std::string_view source = "max_memory") const;

  void set(MemoryDevice device, uint64_t bytes) {
    entries_[device] = bytes;
    written_.erase(device);
  }
  std::optional<uint64_t> get(MemoryDevice device) const;
  const std::map<MemoryDevice, uint64_t>& entries() const { return entries_; }
  bool empty() const { return entries_.empty(); }
  // "0=10737418240,cpu=68719476736" (bytes).
  std::string str() const;

 private:
  // One KEY=SIZE of parse or from_map.
  void add(std::string_view key, std::string_view size, std::string_view source);

  std::map<MemoryDevice, uint64_t> entries_;
  std::map<MemoryDevice, std::string> written_;  // the sizes as parse and from_map read them
};

// One accelerator "auto" may fill, and its free memory: the default max_memory of its index.
struct PlanAccelerator {
  int index = 0;
  uint64_t free_bytes = 0;
  // CUDA's compute capability (fp8 needs 8.9); nullopt when the backend has none or cannot tell.
  std::optional<ComputeCapability> compute_capability;
};

// What the default max_memory (none given) is made of, as Accelerate's get_max_memory reads it
// from torch and psutil: the accelerators of one type, and host RAM available.
struct PlanHardware {
  // "cuda", "xpu", "npu", "hpu", "mlu", "musa", "mps", ...; empty: no accelerator. Integer
  // targets in a plan are indices of this type.
  std::string accelerator_type;
  std::vector<PlanAccelerator> accelerators;
  uint64_t cpu_available = 0;
  // An integrated GPU sharing host RAM (Jetson): Accelerate then gives no separate cpu budget.
  bool unified_memory = false;
};

// The accelerators "auto" may fill on this machine: the devices of the first available backend
// with automatic placement, in Accelerate's order of preference (npu, mlu, musa, xpu, hpu, cuda,
// then mps); a backend without automatic placement (neuron) is never used, so a neuron-only
// machine plans on cpu. Free memory from Runtime::memory_info, or memory_total when the plugin
// cannot tell (simulated devices); cpu_available from the cpu device likewise.
BACKPLANE_API PlanHardware plan_hardware(const Runtime& runtime);

// Which rule set plans (see the top of this file): transformers' from_pretrained, or Accelerate's
// load_checkpoint_and_dispatch. They differ in the default cpu budget (transformers keeps 10%),
// the balancing buffer, how tied modules count, and when a module is split.
enum class PlanRules { kFromPretrained, kAccelerate };

// The already-parsed device_map argument (parse_device_map in selection.hpp).
using PlanStrategy = DeviceMapRequest;

// Bytes and modules one device received.
struct DevicePlacement {
  DeviceMapTarget device;  // as hf_device_map holds it: an index prints as "0"
  std::string label;       // the device string: "cuda:0" for index 0 of cuda, "cpu", "disk"
  uint64_t bytes = 0;
  std::vector<std::string> modules;  // device_map keys, in definition order
};

struct DevicePlan {
  // What model.hf_device_map holds: module name -> accelerator index, "mps", "cpu", "disk", or
  // the device given. In definition order (Python's order depends on string hashing, see
  // clean_device_map); {"": device} when one device takes everything.
  std::vector<std::pair<std::string, DeviceMapTarget>> device_map;
  // The budgets placement ran with (after balancing), whole bytes (floor of Python's floats
  // after a 90% factor). For a device, an index or an explicit map: the given or default ones.
  MaxMemory max_memory;
  uint64_t model_size = 0;  // bytes; tied weights once
  // Per device that received something, in device order (accelerators, mps, cpu, disk; a given
  // device or explicit map's devices in first-use order).
  std::vector<DevicePlacement> placed;
  std::string accelerator_type;  // what integer targets index; empty when none
  // Where this plan knowingly departs from what the rules' library would compute, and why (one
  // sentence each). Empty for plans equal to the library's.
  std::vector<std::string> notes;
  // What from_pretrained would warn while loading this way (a quantizer falling back to
  // dequantizing), in its words.
  std::vector<std::string> warnings;
  // The quantizer's part, when the model has a quantization (quantization.hpp).
  struct Quantized {
    std::string method;  // transformers' quant_method: "bitsandbytes_4bit", "fp8", "gptq", ...
    bool pre_quantized = false;
    // Loaded in full precision: fp8 or MXFP4 where they cannot run, or dequantize=True.
    bool dequantized = false;
    int64_t replaced = 0;       // modules swapped (or given qparams) by the quantizer
    std::string replaced_with;  // "Linear4bit", "QuantLinear", "compressed-tensors"
    // The quantizer's modules_to_not_convert (empty for compressed-tensors, whose `ignore`
    // decides, and for GPTQ, whose block prefix does).
    std::vector<std::string> not_converted;
    double max_memory_factor = 1.0;  // adjust_max_memory, after balancing
    uint64_t unquantized_size = 0;   // model_size without the quantizer
  };
  std::optional<Quantized> quantized;
};

// What plan_device_map takes besides the model and the device_map value.
struct PlanOptions {
  // The user's max_memory, or nullopt for Accelerate's default (free memory of each
  // accelerator, and available RAM).
  std::optional<MaxMemory> max_memory;
  // from_pretrained(dtype=...): floating-point parameters in that dtype (buffers keep theirs:
  // RoPE's inv_freq stays float32). With kAccelerate, the weights are converted to it as
  // load_checkpoint_and_dispatch(dtype=...) loads them, and Accelerate's size override then
  // counts floating tensors at min(dtype, their own) bytes.
  std::optional<DType> dtype;
  PlanRules rules = PlanRules::kFromPretrained;
};
// A model with a `quantization` is planned as from_pretrained loads it with that quantizer
// (kFromPretrained only): the quantizer's environment check on `hardware` and the map (in
// transformers' words: bitsandbytes refuses cpu or disk entries without fp32 cpu offload, fp8
// quantized on the fly needs a GPU of compute capability 8.9 or an XPU, pre-quantized fp8 and
// MXFP4 checkpoints fall back to dequantizing where they cannot run, with its warning; the
// verdicts are quantization_support.hpp's), its module swap (quantized_modules.hpp), its element
// sizes (4-bit weights 0.5 bytes an element) and its max_memory factor (bitsandbytes: 0.90 of
// every budget, after balancing).

// Plans `model` for `strategy` on `hardware`. Throws InvalidArgument for a model the rules
// cannot place (tied parameter that is not in the model, balanced_low_0 with accelerator indices
// that are not 0..n-1, a map that leaves parameters without a device, an index or a device of
// the accelerator type that `hardware` does not have).
BACKPLANE_API DevicePlan plan_device_map(const ModelDescription& model,
                                         const PlanStrategy& strategy, const PlanHardware& hardware,
                                         const PlanOptions& options = {});
// Same, on this machine (plan_hardware(runtime)); every device the map names must exist here,
// as select_inference_device checks it (InvalidArgument with its message otherwise).
BACKPLANE_API DevicePlan plan_device_map(const ModelDescription& model,
                                         const PlanStrategy& strategy, const Runtime& runtime,
                                         const PlanOptions& options = {});

}  // namespace backplane
