// The quantizer's part of from_pretrained around planning (transformers 5.24): validate_environment
// before (on the device_map as given) and after (on the inferred map), preprocess_model's module
// swap, adjust_max_memory. Messages are transformers' own, verbatim.
#include <backplane/error.hpp>
#include <backplane/model/quantization_support.hpp>

#include <algorithm>
#include <set>

#include "../model/quantized_modules.hpp"
#include "planner.hpp"

namespace backplane::planner {
namespace {

// The values of a device_map as Python compares them with "cpu" and "disk": the strings a dict
// holds, or an inferred map's; a device given alone ({"": torch.device("cpu")}) is no string.
std::set<std::string> string_values(const std::vector<std::pair<std::string, DeviceMapTarget>>& map,
                                    bool strings) {
  std::set<std::string> out;
  for (const auto& [name, target] : map) {
    if (target.kind == DeviceMapTarget::Kind::kIndex) {
      out.insert("#" + std::to_string(target.index));
    } else if (target.kind == DeviceMapTarget::Kind::kDisk) {
      out.insert("disk");
    } else {
      out.insert(strings ? target.device.str() : "device " + target.device.str());
    }
  }
  return out;
}

const char* const kBnbOffload =
    "Some modules are dispatched on the CPU or the disk. Make sure you have enough GPU RAM to fit "
    "the quantized model. If you want to dispatch the model on the CPU or the disk while keeping "
    "these modules in 32-bit, you need to set `llm_int8_enable_fp32_cpu_offload=True` and pass a "
    "custom `device_map` to `from_pretrained`. Check "
    "https://huggingface.co/docs/transformers/main/en/main_classes/quantization"
    "#offload-between-cpu-and-gpu for more details. ";
const char* const kFp8Offload =
    "You are attempting to load an FP8 model with a device_map that contains a cpu/disk device."
    "This is not supported when the model is quantized on the fly. Please use a quantized "
    "checkpoint or remove the cpu/disk device from the device_map.";

const char* const kMxfp4Disk =
    "You are attempting to load an FP4 model with a device_map that contains a disk device.This is "
    "not supported when the model is quantized on the fly. Please use a quantized checkpoint or "
    "remove the disk device from the device_map.";

bool cuda_like(const std::string& type) {
  return type == "cuda" || type == "rocm";
}

bool bnb_method(QuantMethod m) {
  return m == QuantMethod::kBitsAndBytes4bit || m == QuantMethod::kBitsAndBytes8bit;
}

// The machine as the planner sees it, for the quantizers' rules (quantization_support.hpp).
QuantMachine machine_of(const PlanHardware& hardware) {
  QuantMachine machine;
  if (hardware.accelerator_type.empty()) return machine;
  QuantDevice first{hardware.accelerator_type, std::nullopt, hardware.accelerator_type + ":0"};
  if (!hardware.accelerators.empty()) {
    first.compute_capability = hardware.accelerators.front().compute_capability;
    first.name =
        hardware.accelerator_type + ":" + std::to_string(hardware.accelerators.front().index);
  }
  machine.accelerator = first;
  if (cuda_like(first.type)) machine.cuda = first;
  machine.xpu = first.type == "xpu";
  return machine;
}

// Where from_pretrained runs a model: torch's current accelerator, else the cpu.
QuantDevice first_device(const QuantMachine& machine) {
  return machine.accelerator.value_or(QuantDevice{"cpu", std::nullopt, "cpu"});
}

// hwprobe quant's verdict on `method` there, for a checkpoint or quantizing on load.
QuantLoad verdict_for(const char* method, const QuantizationConfig& config,
                      const QuantDevice& where, const QuantMachine& machine) {
  for (const QuantMethodSupport& s : quantization_support(where, machine)) {
    if (s.method == method) return config.pre_quantized ? s.pre_quantized : s.on_load;
  }
  return QuantLoad::kUnknown;
}

// FineGrainedFP8HfQuantizer.validate_environment, by the verdict hwprobe quant shows: loads,
// dequantizes (with transformers' warning) or refuses.
void check_fp8_environment(const PlanHardware& hardware, QuantizedLoad& load) {
  QuantizationConfig& config = load.config;
  const QuantMachine machine = machine_of(hardware);
  const QuantDevice where = first_device(machine);
  const QuantLoad verdict = verdict_for("fp8", config, where, machine);
  const bool gpu = machine.cuda.has_value() || machine.xpu;
  switch (verdict) {
    case QuantLoad::kLoads:
      return;
    case QuantLoad::kRefused:
      throw InvalidArgument(
          "quantization_config: No GPU or XPU found. A GPU or XPU is needed for FP8 "
          "quantization.");
    case QuantLoad::kDequantized:
      if (!gpu) {
        load.warnings.push_back(
            "Using FP8 quantized models requires a GPU or XPU, we will default to dequantizing "
            "the model to bf16 since no GPU or XPU is available");
      } else {
        load.warnings.push_back(
            "FP8 quantized models is only supported on GPUs with compute capability >= 8.9 (e.g "
            "4090/H100), actual = `" +
            machine.cuda->compute_capability->str() +
            "`. We will default to dequantizing the model to bf16. Feel free to use a different "
            "quantization method like bitsandbytes or torchao");
      }
      config.dequantize = true;
      return;
    case QuantLoad::kUnknown:
    case QuantLoad::kUnsupported:
      load.notes.push_back(where.name +
                           " does not say its compute capability: this plan assumes 8.9 or more, "
                           "where transformers runs fp8 (under 8.9 it dequantizes the model "
                           "instead)");
      return;
  }
}

// Mxfp4HfQuantizer.validate_environment and its preprocess, by the verdict hwprobe quant shows,
// for a checkpoint (the only way a config here carries MXFP4). Where it runs, transformers also
// needs triton and the kernels package; this plan assumes they are installed.
void check_mxfp4_environment(const PlanHardware& hardware, QuantizedLoad& load) {
  QuantizationConfig& config = load.config;
  const QuantMachine machine = machine_of(hardware);
  const QuantDevice where = first_device(machine);
  const QuantLoad verdict = verdict_for("mxfp4", config, where, machine);
  switch (verdict) {
    case QuantLoad::kLoads:
      load.notes.push_back(
          "MXFP4 runs here only with triton (3.4 or later on CUDA, 3.5 on XPU) and the kernels "
          "package (0.18.2 up to 0.19) installed where transformers runs; without them it loads "
          "the checkpoint dequantized, and this plan assumes they are there");
      return;
    case QuantLoad::kDequantized:
      if (where.type == "cpu") {
        load.warnings.push_back(
            "MXFP4 inference on CPU requires use_kernels=True, but use_kernels is disabled. We "
            "will dequantize the model to bf16. To run MXFP4 natively on CPU, please set "
            "use_kernels=True.");
      } else if (cuda_like(where.type) || where.type == "xpu") {
        load.warnings.push_back(
            "MXFP4 quantization is only supported on GPUs with compute capability >= 7.5 (e.g T4, "
            "A100, L4, H100, or B200) or XPUs (e.g Intel\u00ae Data Center GPU Max Series). We "
            "will default to dequantizing the model to bf16.");
      } else {
        load.warnings.push_back(
            "Using MXFP4 quantized models requires model on cuda/xpu/cpu, but "
            "found " +
            where.type +
            ", we will default to dequantizing the model to bf16. To use "
            "mxfp4, please disable the current accelerator.");
      }
      config.dequantize = true;
      return;
    case QuantLoad::kRefused:
    case QuantLoad::kUnknown:
    case QuantLoad::kUnsupported:
      load.notes.push_back(where.name +
                           " does not say its compute capability: this plan assumes 7.5 or more, "
                           "where transformers runs MXFP4 (under 7.5 it dequantizes instead)");
      return;
  }
}

}  // namespace

void check_quantized_map(const QuantizationConfig& config,
                         const std::vector<std::pair<std::string, DeviceMapTarget>>& map,
                         bool strings) {
  const std::set<std::string> values = string_values(map, strings);
  const bool offloads = values.count("cpu") > 0 || values.count("disk") > 0;
  switch (config.method) {
    case QuantMethod::kBitsAndBytes4bit:
    case QuantMethod::kBitsAndBytes8bit:
      if (!config.fp32_cpu_offload && offloads && values != std::set<std::string>{"cpu"}) {
        throw InvalidArgument(std::string("quantization_config: ") + kBnbOffload);
      }
      return;
    case QuantMethod::kFp8:
      if (!config.dequantize && !config.pre_quantized && map.size() > 1 && offloads) {
        throw InvalidArgument(std::string("quantization_config: ") + kFp8Offload);
      }
      return;
    case QuantMethod::kMxfp4:
      if (!config.dequantize && !config.pre_quantized && strings && values.count("disk") > 0) {
        throw InvalidArgument(std::string("quantization_config: ") + kMxfp4Disk);
      }
      return;
    case QuantMethod::kCompressedTensors:
    case QuantMethod::kGptq:
    case QuantMethod::kAwq:
      return;  // no device_map checks
  }
}

QuantizedLoad prepare_quantized_load(const ModelDescription& model, const PlanStrategy& strategy,
                                     const PlanHardware& hardware, const PlanOptions& options) {
  if (options.rules != PlanRules::kFromPretrained) {
    throw InvalidArgument(std::string("a quantized model (") +
                          to_string(model.quantization->method) +
                          ") is planned as from_pretrained loads it; the accelerate rules "
                          "(load_checkpoint_and_dispatch) have no quantizer");
  }
  QuantizedLoad load;
  load.config = *model.quantization;
  QuantizationConfig& config = load.config;
  if (config.method == QuantMethod::kFp8 && !config.dequantize) {
    check_fp8_environment(hardware, load);
  }
  if (config.method == QuantMethod::kMxfp4 && !config.dequantize) {
    check_mxfp4_environment(hardware, load);
  }
  // The first validate_environment sees the map as given: a dict is checked now, a strategy
  // after planning.
  std::vector<std::string> offloaded;
  if (!strategy.is_strategy()) {
    const bool dict = strategy.kind == DeviceMapKind::kExplicit;
    check_quantized_map(config, strategy.modules, dict);
    if (bnb_method(config.method) && config.fp32_cpu_offload && dict) {
      for (const auto& [name, target] : strategy.modules) {
        const bool cpu =
            target.kind == DeviceMapTarget::Kind::kDevice && target.device.str() == "cpu";
        if (cpu || target.kind == DeviceMapTarget::Kind::kDisk) offloaded.push_back(name);
      }
    }
  }
  const DType dtype = options.dtype.value_or(model.dtype);
  quantization::SwappedModel swapped =
      quantization::swap_quantized_modules(model, config, dtype, offloaded);
  load.model = std::move(swapped.model);
  load.model.quantization.reset();
  load.summary.method = to_string(config.method);
  load.summary.pre_quantized = config.pre_quantized;
  load.summary.dequantized = config.dequantize;
  load.summary.replaced = swapped.replaced;
  load.summary.replaced_with = swapped.replaced_with;
  load.summary.not_converted = swapped.not_converted;
  load.summary.max_memory_factor = bnb_method(config.method) ? 0.90 : 1.0;
  if (swapped.half_bytes_rounded) {
    load.notes.push_back(
        "a 4-bit weight has an odd number of elements: transformers counts its half byte, this "
        "plan rounds it up to a whole byte, so a budget within a byte of a module's size can "
        "place it differently");
  }
  if (config.method == QuantMethod::kMxfp4 && !config.dequantize && swapped.replaced == 0) {
    load.warnings.push_back(
        "You are loading your model using mixed-precision FP4 quantization but no linear modules "
        "were found in your model. Please double check your model architecture, or submit an "
        "issue on github if you think this is a bug.");
  }
  if (config.method == QuantMethod::kFp8 && !config.dequantize && swapped.replaced == 0) {
    load.warnings.push_back(
        "You are loading your model using fp8 but no linear modules were found in your model. "
        "Please double check your model architecture.");
  }
  return load;
}

}  // namespace backplane::planner
