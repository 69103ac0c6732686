// The per-device verdicts of transformers 5.24's quantizers (quantizers/quantizer_*.py:
// validate_environment, and mxfp4's preprocess), one rule function per method.
#include <backplane/model/quantization_support.hpp>

#include <algorithm>
#include <array>

namespace backplane {
namespace {

using Verdict = QuantMethodSupport;

bool cuda_like(const std::string& type) {
  return type == "cuda" || type == "rocm";
}

bool offload(const QuantDevice& device, const QuantMachine& machine) {
  return device.type == "cpu" && machine.accelerator.has_value();
}

const std::string& name_of(const QuantDevice& d) {
  return d.name.empty() ? d.type : d.name;
}

std::string cc_text(const QuantDevice& d) {
  return d.compute_capability ? d.compute_capability->str() : std::string("unknown");
}

Verdict bitsandbytes(const QuantDevice& device, const QuantMachine& machine) {
  // bitsandbytes 0.50's supported_torch_devices (ROCm is torch's cuda).
  static const std::array<const char*, 7> kBackends = {"cuda", "rocm", "xpu", "cpu",
                                                       "mps",  "hpu",  "npu"};
  Verdict v;
  v.needs = "bitsandbytes>=0.46.1";
  v.planned = true;
  if (offload(device, machine)) {
    v.on_load = v.pre_quantized = QuantLoad::kRefused;
    v.why = "a device_map with cpu or disk next to " + machine.accelerator->type +
            " is refused unless llm_int8_enable_fp32_cpu_offload=True, which keeps the offloaded "
            "modules unquantized";
  } else if (std::find(kBackends.begin(), kBackends.end(), device.type) != kBackends.end()) {
    v.on_load = v.pre_quantized = QuantLoad::kLoads;
    v.why = "bitsandbytes has a " + device.type + " backend";
  } else {
    v.on_load = v.pre_quantized = QuantLoad::kUnsupported;
    v.why = "bitsandbytes has no " + device.type +
            " backend (it has cuda, rocm, xpu, cpu, mps, hpu, npu)";
  }
  return v;
}

// fp8 on torch.cuda's current device: by compute capability.
void fp8_on_gpu(const QuantDevice& gpu, Verdict& v) {
  if (!gpu.compute_capability) {
    v.on_load = v.pre_quantized = QuantLoad::kUnknown;
    v.why = name_of(gpu) +
            " does not say its compute capability: fp8 runs from 8.9, below it transformers "
            "loads the model dequantized";
  } else if (fp8_capable(*gpu.compute_capability)) {
    v.on_load = v.pre_quantized = QuantLoad::kLoads;
    v.why = name_of(gpu) + "'s compute capability " + cc_text(gpu) + " >= 8.9";
  } else {
    v.on_load = v.pre_quantized = QuantLoad::kDequantized;
    v.why = name_of(gpu) + "'s compute capability " + cc_text(gpu) +
            " < 8.9: transformers loads the model dequantized (bf16), with a warning";
  }
}

// FineGrainedFP8HfQuantizer.validate_environment asks torch.cuda and torch.xpu, whatever the
// device; quantizing on the fly refuses cpu or disk next to other devices.
Verdict fp8(const QuantDevice& device, const QuantMachine& machine) {
  Verdict v;
  v.needs = "accelerate";
  v.planned = true;
  if (!machine.cuda && !machine.xpu) {
    v.on_load = QuantLoad::kRefused;
    v.pre_quantized = QuantLoad::kDequantized;
    v.why =
        "no GPU or XPU: quantizing refuses (\"No GPU or XPU found\"), a quantized checkpoint "
        "loads dequantized (bf16)";
    return v;
  }
  if (machine.cuda) {
    fp8_on_gpu(*machine.cuda, v);
  } else {
    v.on_load = v.pre_quantized = QuantLoad::kLoads;
    v.why = "an XPU";
  }
  if (v.on_load != QuantLoad::kLoads || cuda_like(device.type) || device.type == "xpu") return v;
  const std::string refusal =
      "quantizing on the fly refuses cpu or disk in a device_map with other entries";
  v.on_load = QuantLoad::kRefused;
  if (offload(device, machine)) {
    v.why = "offloaded modules run on " + machine.accelerator->type + "; " + refusal;
  } else {
    v.pre_quantized = QuantLoad::kUnsupported;
    v.why = "fp8 modules run on cuda or xpu, not " + device.type;
  }
  return v;
}

// GPTQ and AWQ run on gptqmodel's kernels; transformers checks no device once it is installed.
bool gptqmodel_kernels(const std::string& type) {
  return cuda_like(type) || type == "cpu";
}

const std::string& execution_type(const QuantDevice& device, const QuantMachine& machine) {
  return offload(device, machine) ? machine.accelerator->type : device.type;
}

Verdict gptq(const QuantDevice& device, const QuantMachine& machine) {
  Verdict v;
  const std::string& where = execution_type(device, machine);
  const QuantLoad load = gptqmodel_kernels(where) ? QuantLoad::kLoads : QuantLoad::kUnknown;
  v.on_load = v.pre_quantized = load;
  v.why = load == QuantLoad::kLoads
              ? "gptqmodel has " + where +
                    " kernels; quantizing calibrates on a dataset (GPTQConfig(dataset=...))"
              : "gptqmodel's kernels for " + where + " are not known here";
  v.needs = "optimum, gptqmodel";
  v.planned = true;  // a pre-quantized checkpoint (quantizing on load plans the dense model)
  return v;
}

std::string calibration_refusal(const char* method) {
  return std::string("quantizing refuses: \"The quantization method ") + method +
         " does require the model to be pre-quantized.\"";
}

Verdict awq(const QuantDevice& device, const QuantMachine& machine) {
  Verdict v;
  const std::string& where = execution_type(device, machine);
  v.on_load = QuantLoad::kRefused;
  v.pre_quantized = gptqmodel_kernels(where) ? QuantLoad::kLoads : QuantLoad::kUnknown;
  v.why = calibration_refusal("awq") +
          (gptqmodel_kernels(where) ? "; gptqmodel has " + where + " kernels"
                                    : "; gptqmodel's kernels for " + where + " are not known here");
  // AwqQuantizer.update_dtype: bfloat16 becomes float16 where torch.cuda or torch.xpu is there.
  if (machine.cuda || machine.xpu) v.why += "; bfloat16 becomes float16 on this machine";
  v.needs = "gptqmodel";
  v.planned = true;  // its GEMM format
  return v;
}

Verdict compressed_tensors(const QuantDevice&, const QuantMachine&) {
  Verdict v;
  v.on_load = QuantLoad::kRefused;
  v.pre_quantized = QuantLoad::kLoads;
  v.why = calibration_refusal("compressed-tensors") + "; a checkpoint loads with no device check";
  v.needs = "compressed-tensors>=0.15.0";
  v.planned = true;
  return v;
}

// Mxfp4HfQuantizer: torch's current accelerator must be cuda, xpu or cpu; then torch.xpu, else
// torch.cuda's capability, else the cpu; on cpu, preprocess dequantizes without use_kernels.
Verdict mxfp4(const QuantDevice& device, const QuantMachine& machine) {
  Verdict v;
  const QuantDevice cpu{"cpu", std::nullopt, "cpu"};
  const QuantDevice& current = machine.accelerator ? *machine.accelerator : cpu;
  const std::string prefix =
      offload(device, machine) ? "offloaded modules run on " + current.type + ": " : "";
  v.needs = "triton>=3.5.0, kernels>=0.18.2,<0.19";
  if (!cuda_like(current.type) && current.type != "xpu" && current.type != "cpu") {
    v.on_load = QuantLoad::kRefused;
    v.pre_quantized = QuantLoad::kDequantized;
    v.why = "MXFP4 needs cuda, xpu or cpu as torch's accelerator, not " + current.type +
            ": quantizing refuses, a checkpoint loads dequantized (bf16)";
  } else if (machine.xpu) {
    v.on_load = v.pre_quantized = QuantLoad::kLoads;
    v.why = "an XPU";
  } else if (machine.cuda) {
    const QuantDevice& gpu = *machine.cuda;
    v.needs = "triton>=3.4.0, kernels>=0.18.2,<0.19";
    if (!gpu.compute_capability) {
      v.on_load = v.pre_quantized = QuantLoad::kUnknown;
      v.why = name_of(gpu) + " does not say its compute capability: MXFP4 needs 7.5";
    } else if (!(*gpu.compute_capability < ComputeCapability{7, 5})) {
      v.on_load = v.pre_quantized = QuantLoad::kLoads;
      v.why = name_of(gpu) + "'s compute capability " + cc_text(gpu) + " >= 7.5";
    } else {
      v.on_load = QuantLoad::kRefused;
      v.pre_quantized = QuantLoad::kDequantized;
      v.why = name_of(gpu) + "'s compute capability " + cc_text(gpu) +
              " < 7.5: quantizing refuses, a checkpoint loads dequantized (bf16)";
    }
  } else {
    v.on_load = v.pre_quantized = QuantLoad::kDequantized;
    v.why = "on cpu transformers dequantizes (bf16) unless use_kernels=True";
  }
  v.why = prefix + v.why;
  v.planned = true;  // a gpt-oss checkpoint's experts
  return v;
}

struct Rule {
  const char* method;
  Verdict (*verdict)(const QuantDevice&, const QuantMachine&);
};

constexpr Rule kRules[] = {
    {"bitsandbytes_4bit", &bitsandbytes},
    {"bitsandbytes_8bit", &bitsandbytes},
    {"fp8", &fp8},
    {"gptq", &gptq},
    {"awq", &awq},
    {"compressed-tensors", &compressed_tensors},
    {"mxfp4", &mxfp4},
};

}  // namespace

const char* to_string(QuantLoad load) {
  switch (load) {
    case QuantLoad::kLoads:
      return "loads";
    case QuantLoad::kDequantized:
      return "dequantized";
    case QuantLoad::kRefused:
      return "refused";
    case QuantLoad::kUnsupported:
      return "unsupported";
    case QuantLoad::kUnknown:
      return "unknown";
  }
  return "?";
}

bool fp8_capable(const ComputeCapability& cc) {
  return !(cc < ComputeCapability{8, 9});
}

std::vector<QuantMethodSupport> quantization_support(const QuantDevice& device,
                                                     const QuantMachine& machine) {
  std::vector<QuantMethodSupport> out;
  for (const Rule& rule : kRules) {
    QuantMethodSupport v = rule.verdict(device, machine);
    v.method = rule.method;
    out.push_back(std::move(v));
  }
  return out;
}

QuantMachine quant_machine(const std::vector<DeviceInfo>& devices,
                           const std::string& accelerator_type) {
  QuantMachine machine;
  for (const DeviceInfo& d : devices) {
    const QuantDevice facts{d.device.type(), d.compute_capability, d.device.str()};
    if (!machine.accelerator && facts.type == accelerator_type) machine.accelerator = facts;
    if (!machine.cuda && cuda_like(facts.type)) machine.cuda = facts;
    machine.xpu = machine.xpu || facts.type == "xpu";
  }
  return machine;
}

}  // namespace backplane
