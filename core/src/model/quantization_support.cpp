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
// torch.cuda.is_available() or torch.xpu.is_available() on this machine.
bool gpu_or_xpu(const std::optional<QuantDevice>& accelerator) {
  return accelerator && (cuda_like(accelerator->type) || accelerator->type == "xpu");
}
bool offload(const QuantDevice& device, const std::optional<QuantDevice>& accelerator) {
  return device.type == "cpu" && accelerator.has_value();
}

std::string cc_text(const QuantDevice& d) {
  return d.compute_capability ? d.compute_capability->str() : std::string("unknown");
}

Verdict bitsandbytes(const QuantDevice& device, const std::optional<QuantDevice>& accelerator) {
  // bitsandbytes 0.50's supported_torch_devices (ROCm is torch's cuda).
  static const std::array<const char*, 7> kBackends = {"cuda", "rocm", "xpu", "cpu",
                                                       "mps",  "hpu",  "npu"};
  Verdict v;
  if (offload(device, accelerator)) {
    v.on_load = v.pre_quantized = QuantLoad::kRefused;
    v.why = "a device_map with cpu or disk next to " + accelerator->type +
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
  v.needs = "bitsandbytes>=0.46.1";
  v.planned = true;
  return v;
}

// fp8 on a CUDA-like device: by compute capability.
void fp8_on_gpu(const QuantDevice& gpu, Verdict& v) {
  if (!gpu.compute_capability) {
    v.on_load = v.pre_quantized = QuantLoad::kUnknown;
    v.why = gpu.type +
            " does not say its compute capability: fp8 runs from 8.9, below it "
            "transformers loads the model dequantized";
  } else if (fp8_capable(*gpu.compute_capability)) {
    v.on_load = v.pre_quantized = QuantLoad::kLoads;
    v.why = "compute capability " + cc_text(gpu) + " >= 8.9";
  } else {
    v.on_load = v.pre_quantized = QuantLoad::kDequantized;
    v.why = "compute capability " + cc_text(gpu) +
            " < 8.9: transformers loads the model dequantized (bf16), with a warning";
  }
}

Verdict fp8(const QuantDevice& device, const std::optional<QuantDevice>& accelerator) {
  Verdict v;
  if (offload(device, accelerator) && gpu_or_xpu(accelerator)) {
    if (accelerator->type == "xpu") {
      v.pre_quantized = QuantLoad::kLoads;
    } else {
      fp8_on_gpu(*accelerator, v);
    }
    const bool dequantized = v.pre_quantized == QuantLoad::kDequantized;
    v.on_load = dequantized ? QuantLoad::kDequantized : QuantLoad::kRefused;
    v.why = dequantized ? v.why
                        : "offloaded modules run on " + accelerator->type +
                              "; quantizing on the fly refuses cpu or disk in a device_map "
                              "with other entries";
  } else if (cuda_like(device.type)) {
    fp8_on_gpu(device, v);
  } else if (device.type == "xpu") {
    v.on_load = v.pre_quantized = QuantLoad::kLoads;
    v.why = "an XPU";
  } else {
    v.on_load = QuantLoad::kRefused;
    v.pre_quantized = QuantLoad::kDequantized;
    v.why =
        "no GPU or XPU: quantizing refuses (\"No GPU or XPU found\"), a quantized checkpoint "
        "loads dequantized (bf16)";
  }
  v.needs = "accelerate";
  v.planned = true;
  return v;
}

// GPTQ and AWQ run on gptqmodel's kernels; transformers checks no device once it is installed.
bool gptqmodel_kernels(const std::string& type) {
  return cuda_like(type) || type == "cpu";
}

Verdict gptq(const QuantDevice& device, const std::optional<QuantDevice>& accelerator) {
  Verdict v;
  const std::string& where = offload(device, accelerator) ? accelerator->type : device.type;
  const QuantLoad load = gptqmodel_kernels(where) ? QuantLoad::kLoads : QuantLoad::kUnknown;
  v.on_load = v.pre_quantized = load;
  v.why = load == QuantLoad::kLoads ? "gptqmodel has " + where +
                                          " kernels; quantizing calibrates on a dataset "
                                          "(GPTQConfig(dataset=...))"
                                    : "gptqmodel's kernels for " + where + " are not known here";
  v.needs = "optimum, gptqmodel";
  return v;
}

std::string calibration_refusal(const char* method) {
  return std::string("quantizing refuses: \"The quantization method ") + method +
         " does require the model to be pre-quantized.\"";
}

Verdict awq(const QuantDevice& device, const std::optional<QuantDevice>& accelerator) {
  Verdict v;
  const std::string& where = offload(device, accelerator) ? accelerator->type : device.type;
  v.on_load = QuantLoad::kRefused;
  v.pre_quantized = gptqmodel_kernels(where) ? QuantLoad::kLoads : QuantLoad::kUnknown;
  v.why = calibration_refusal("awq") +
          (gptqmodel_kernels(where) ? "; gptqmodel has " + where + " kernels"
                                    : "; gptqmodel's kernels for " + where + " are not known here");
  if (cuda_like(where) || where == "xpu") v.why += "; bfloat16 becomes float16 there";
  v.needs = "gptqmodel";
  return v;
}

Verdict compressed_tensors(const QuantDevice&, const std::optional<QuantDevice>&) {
  Verdict v;
  v.on_load = QuantLoad::kRefused;
  v.pre_quantized = QuantLoad::kLoads;
  v.why = calibration_refusal("compressed-tensors") + "; a checkpoint loads with no device check";
  v.needs = "compressed-tensors>=0.15.0";
  return v;
}

Verdict mxfp4(const QuantDevice& device, const std::optional<QuantDevice>& accelerator) {
  Verdict v;
  // The quantizer looks at torch's current accelerator, or the cpu where there is none.
  const QuantDevice& where = accelerator ? *accelerator : device;
  const std::string prefix =
      offload(device, accelerator) ? "offloaded modules run on " + where.type + ": " : "";
  if (cuda_like(where.type)) {
    if (!where.compute_capability) {
      v.on_load = v.pre_quantized = QuantLoad::kUnknown;
      v.why = where.type + " does not say its compute capability: MXFP4 needs 7.5";
    } else if (!(*where.compute_capability < ComputeCapability{7, 5})) {
      v.on_load = v.pre_quantized = QuantLoad::kLoads;
      v.why = "compute capability " + cc_text(where) + " >= 7.5";
    } else {
      v.on_load = QuantLoad::kRefused;
      v.pre_quantized = QuantLoad::kDequantized;
      v.why = "compute capability " + cc_text(where) +
              " < 7.5: quantizing refuses, a checkpoint loads dequantized (bf16)";
    }
    v.needs = "triton>=3.4.0, kernels>=0.18.2,<0.19";
  } else if (where.type == "xpu") {
    v.on_load = v.pre_quantized = QuantLoad::kLoads;
    v.why = "an XPU";
    v.needs = "triton>=3.5.0, kernels>=0.18.2,<0.19";
  } else if (where.type == "cpu") {
    v.on_load = v.pre_quantized = QuantLoad::kDequantized;
    v.why = "on cpu transformers dequantizes (bf16) unless use_kernels=True";
    v.needs = "triton>=3.5.0, kernels>=0.18.2,<0.19";
  } else {
    v.on_load = QuantLoad::kRefused;
    v.pre_quantized = QuantLoad::kDequantized;
    v.needs = "triton, kernels>=0.18.2,<0.19";
    v.why = "MXFP4 needs cuda, xpu or cpu as torch's accelerator, not " + where.type +
            ": quantizing refuses, a checkpoint loads dequantized (bf16)";
  }
  v.why = prefix + v.why;
  return v;
}

struct Rule {
  const char* method;
  Verdict (*verdict)(const QuantDevice&, const std::optional<QuantDevice>&);
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

std::vector<QuantMethodSupport> quantization_support(
    const QuantDevice& device, const std::optional<QuantDevice>& accelerator) {
  std::vector<QuantMethodSupport> out;
  for (const Rule& rule : kRules) {
    QuantMethodSupport v = rule.verdict(device, accelerator);
    v.method = rule.method;
    out.push_back(std::move(v));
  }
  return out;
}

}  // namespace backplane
