// quantization_support: transformers 5.24's per-device verdicts, one row per (device, machine,
// method). The expected values are read from the quantizers' validate_environment
// (docs/quantized-placement-rules.md, section 2); the fp8 and bitsandbytes rows are the ones
// tests/python/quantized_plan_check.py checks against transformers itself through the planner.
#include <backplane/model/quantization_support.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace {

using backplane::ComputeCapability;
using backplane::QuantDevice;
using backplane::QuantLoad;
using backplane::QuantMachine;

const QuantDevice kH100{"cuda", ComputeCapability{9, 0}, "cuda:0"};
const QuantDevice kA10G{"cuda", ComputeCapability{8, 6}, "cuda:0"};
const QuantDevice kT4{"cuda", ComputeCapability{7, 5}, "cuda:0"};
const QuantDevice kV100{"cuda", ComputeCapability{7, 0}, "cuda:0"};
const QuantDevice kMi300{"rocm", std::nullopt, "rocm:0"};
const QuantDevice kXpu{"xpu", std::nullopt, "xpu:0"};
const QuantDevice kMps{"mps", std::nullopt, "mps:0"};
const QuantDevice kNeuron{"neuron", std::nullopt, "neuron:0"};
const QuantDevice kCpu{"cpu", std::nullopt, "cpu:0"};

const QuantDevice kHpu{"hpu", std::nullopt, "hpu:0"};
const QuantMachine kMixed{kHpu, kA10G, false};

// Machines by their first accelerator: torch.cuda is there for cuda and rocm, torch.xpu for xpu.
QuantMachine on(const std::optional<QuantDevice>& accelerator) {
  QuantMachine m;
  m.accelerator = accelerator;
  if (accelerator && (accelerator->type == "cuda" || accelerator->type == "rocm")) {
    m.cuda = accelerator;
  }
  m.xpu = accelerator && accelerator->type == "xpu";
  return m;
}

struct Row {
  const char* label;
  QuantDevice device;
  QuantMachine machine;
  const char* method;
  QuantLoad on_load;
  QuantLoad pre_quantized;
  const char* why;  // a part of it
};

std::ostream& operator<<(std::ostream& os, const Row& r) {
  return os << r.label;
}

class QuantSupport : public ::testing::TestWithParam<Row> {};

TEST_P(QuantSupport, AsTransformersDecides) {
  const Row& r = GetParam();
  const auto rows = backplane::quantization_support(r.device, r.machine);
  const auto it =
      std::find_if(rows.begin(), rows.end(),
                   [&](const backplane::QuantMethodSupport& s) { return s.method == r.method; });
  ASSERT_NE(it, rows.end()) << r.method;
  EXPECT_EQ(it->on_load, r.on_load) << backplane::to_string(it->on_load) << ": " << it->why;
  EXPECT_EQ(it->pre_quantized, r.pre_quantized)
      << backplane::to_string(it->pre_quantized) << ": " << it->why;
  EXPECT_NE(it->why.find(r.why), std::string::npos) << it->why;
  EXPECT_FALSE(it->needs.empty());
}

using L = QuantLoad;

const Row kRows[] = {
    Row{"bnb_cuda", kH100, on(kH100), "bitsandbytes_4bit", L::kLoads, L::kLoads, "cuda backend"},
    Row{"bnb_cpu_only", kCpu, on(std::nullopt), "bitsandbytes_8bit", L::kLoads, L::kLoads,
        "cpu backend"},
    Row{"bnb_offload", kCpu, on(kH100), "bitsandbytes_4bit", L::kRefused, L::kRefused,
        "llm_int8_enable_fp32_cpu_offload=True"},
    Row{"bnb_neuron", kNeuron, on(kNeuron), "bitsandbytes_4bit", L::kUnsupported, L::kUnsupported,
        "no neuron backend"},
    Row{"fp8_h100", kH100, on(kH100), "fp8", L::kLoads, L::kLoads, "9.0 >= 8.9"},
    Row{"fp8_a10g", kA10G, on(kA10G), "fp8", L::kDequantized, L::kDequantized, "8.6 < 8.9"},
    Row{"fp8_rocm_unknown", kMi300, on(kMi300), "fp8", L::kUnknown, L::kUnknown,
        "does not say its compute capability"},
    Row{"fp8_xpu", kXpu, on(kXpu), "fp8", L::kLoads, L::kLoads, "XPU"},
    Row{"fp8_cpu_only", kCpu, on(std::nullopt), "fp8", L::kRefused, L::kDequantized,
        "No GPU or XPU found"},
    Row{"fp8_mps", kMps, on(kMps), "fp8", L::kRefused, L::kDequantized, "no GPU or XPU"},
    Row{"fp8_offload_h100", kCpu, on(kH100), "fp8", L::kRefused, L::kLoads,
        "offloaded modules run on cuda"},
    Row{"fp8_offload_a10g", kCpu, on(kA10G), "fp8", L::kDequantized, L::kDequantized, "8.6 < 8.9"},
    Row{"gptq_cuda", kH100, on(kH100), "gptq", L::kLoads, L::kLoads, "gptqmodel has cuda kernels"},
    Row{"gptq_mps", kMps, on(kMps), "gptq", L::kUnknown, L::kUnknown, "not known here"},
    Row{"awq_cuda", kH100, on(kH100), "awq", L::kRefused, L::kLoads,
        "does require the model to be pre-quantized"},
    Row{"awq_float16", kH100, on(kH100), "awq", L::kRefused, L::kLoads,
        "bfloat16 becomes float16 on this machine"},
    Row{"compressed_tensors_cpu", kCpu, on(std::nullopt), "compressed-tensors", L::kRefused,
        L::kLoads, "no device check"},
    Row{"mxfp4_h100", kH100, on(kH100), "mxfp4", L::kLoads, L::kLoads, ">= 7.5"},
    Row{"mxfp4_t4", kT4, on(kT4), "mxfp4", L::kLoads, L::kLoads, "7.5 >= 7.5"},
    Row{"mxfp4_v100", kV100, on(kV100), "mxfp4", L::kRefused, L::kDequantized, "7.0 < 7.5"},
    Row{"mxfp4_cpu_only", kCpu, on(std::nullopt), "mxfp4", L::kDequantized, L::kDequantized,
        "unless use_kernels=True"},
    Row{"mxfp4_mps", kMps, on(kMps), "mxfp4", L::kRefused, L::kDequantized, "not mps"},
    Row{"mxfp4_offload", kCpu, on(kV100), "mxfp4", L::kRefused, L::kDequantized,
        "offloaded modules run on cuda"},
    // A machine whose planning accelerator is an HPU but which has CUDA too: fp8 asks torch.cuda,
    // MXFP4 refuses the HPU as torch's accelerator.
    Row{"fp8_mixed", kHpu, kMixed, "fp8", L::kDequantized, L::kDequantized, "8.6 < 8.9"},
    Row{"fp8_hpu_next_to_h100", kHpu, QuantMachine{kHpu, kH100, false}, "fp8", L::kRefused,
        L::kUnsupported, "not hpu"},
    Row{"mxfp4_mixed", kA10G, kMixed, "mxfp4", L::kRefused, L::kDequantized, "not hpu"},
};

INSTANTIATE_TEST_SUITE_P(Devices, QuantSupport, ::testing::ValuesIn(kRows),
                         [](const ::testing::TestParamInfo<Row>& param) {
                           return std::string(param.param.label);
                         });

TEST(QuantSupport, EveryMethodOnceAndEachPlanned) {
  const auto rows = backplane::quantization_support(kH100, on(kH100));
  std::vector<std::string> methods;
  for (const auto& r : rows) {
    methods.push_back(r.method);
    EXPECT_TRUE(r.planned) << r.method;
  }
  EXPECT_EQ(methods, (std::vector<std::string>{"bitsandbytes_4bit", "bitsandbytes_8bit", "fp8",
                                               "gptq", "awq", "compressed-tensors", "mxfp4"}));
}

TEST(QuantSupport, Fp8NeedsComputeCapability89) {
  EXPECT_TRUE(backplane::fp8_capable({8, 9}));
  EXPECT_TRUE(backplane::fp8_capable({9, 0}));
  EXPECT_TRUE(backplane::fp8_capable({12, 0}));
  EXPECT_FALSE(backplane::fp8_capable({8, 6}));
  EXPECT_FALSE(backplane::fp8_capable({7, 5}));
}

}  // namespace
