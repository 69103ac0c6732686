// Which quantization methods transformers 5.24 can use on a device, and why not: its quantizers'
// validate_environment and preprocess rules (docs/quantized-placement-rules.md, section 2), as a
// pure function of the device and the machine's first accelerator. hwprobe quant prints it; the
// planner applies the same rules where it plans a method (quantized_load.cpp).
#pragma once

#include <backplane/export.hpp>
#include <backplane/runtime/device_info.hpp>

#include <optional>
#include <string>
#include <vector>

namespace backplane {

// What from_pretrained does with a method on a device.
enum class QuantLoad {
  kLoads,        // quantized modules there
  kDequantized,  // transformers falls back to the full-precision model, with a warning
  kRefused,      // transformers raises
  kUnsupported,  // transformers does not check, but the method's library has no kernels there
  kUnknown,      // depends on what is not known here (the compute capability)
};
BACKPLANE_API const char* to_string(QuantLoad load);  // "loads", "dequantized", ...

struct QuantDevice {
  std::string type;  // "cuda", "rocm", "xpu", "mps", "cpu", "neuron", ...
  std::optional<ComputeCapability> compute_capability;
  std::string name;  // "cuda:0", for the reasons given; empty: the type
};

struct QuantMethodSupport {
  std::string method;  // transformers' quant_method: "bitsandbytes_4bit", "fp8", "gptq", ...
  QuantLoad on_load = QuantLoad::kUnknown;        // quantization_config= on full-precision weights
  QuantLoad pre_quantized = QuantLoad::kUnknown;  // a checkpoint quantized with it
  std::string why;
  std::string needs;     // the Python packages transformers needs for it
  bool planned = false;  // plan_device_map sizes and places it (bitsandbytes, fp8)
};

// What the quantizers ask torch about the machine.
struct QuantMachine {
  // The first device of the type from_pretrained plans on (accelerate's order: xpu and hpu before
  // cuda); nullopt on a machine with none. A device_map's cpu is offload next to it.
  std::optional<QuantDevice> accelerator;
  // cuda:0 when torch.cuda.is_available() (CUDA or ROCm): fp8 and mxfp4 read its capability.
  std::optional<QuantDevice> cuda;
  bool xpu = false;  // torch.xpu.is_available()
};

// Every method transformers' AUTO_QUANTIZER_MAPPING has that the planner knows the rules of, for
// `device` on `machine`. The cpu of a machine with an accelerator is where a device_map offloads
// to: its rows say what offloading does.
BACKPLANE_API std::vector<QuantMethodSupport> quantization_support(const QuantDevice& device,
                                                                   const QuantMachine& machine);
// The machine of a device list (DeviceInfo types and capabilities) whose planning accelerator
// type is `accelerator_type` ("" for none), as plan_hardware chooses it.
BACKPLANE_API QuantMachine quant_machine(const std::vector<DeviceInfo>& devices,
                                         const std::string& accelerator_type);

// fp8 runs on CUDA from compute capability 8.9 (transformers' FineGrainedFP8HfQuantizer).
BACKPLANE_API bool fp8_capable(const ComputeCapability& cc);

}  // namespace backplane
