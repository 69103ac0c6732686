// select_inference_device (from_pretrained's device_map) and select_pipeline_device
// (transformers pipelines/base.py), over snapshots written as tables.
#include <backplane/error.hpp>
#include <backplane/rules/selection.hpp>

#include <gtest/gtest.h>

#include "expect_error.hpp"
#include "machine.hpp"

namespace {

using backplane::InvalidArgument;
using backplane::NotFound;
using backplane::parse_device_map;
using backplane::PipelineOptions;
using backplane::Selection;
using backplane::Unavailable;
using selection_test::env;
using selection_test::error_of;
using selection_test::Machine;
using selection_test::strs;
using Strings = std::vector<std::string>;
using Vars = std::map<std::string, std::string>;

constexpr uint64_t kHalf = selection_test::kHalf;

Selection infer(const Machine& m, std::optional<std::string> device_map, const Vars& vars = {}) {
  std::optional<backplane::DeviceMapRequest> request;
  if (device_map) request = parse_device_map(*device_map);
  return backplane::select_inference_device(m.backends, m.devices, request, env(vars));
}

Selection pipe(const Machine& m, std::optional<std::string> device,
               std::optional<std::string> device_map = std::nullopt) {
  PipelineOptions options;
  options.device = std::move(device);
  if (device_map) options.device_map = parse_device_map(*device_map);
  return backplane::select_pipeline_device(m.backends, m.devices, options, env());
}

Machine mixed() {
  // The sim's "mixed": NVIDIA, AMD (as rocm beside NVIDIA), Gaudi.
  return Machine()
      .add("cuda", 2, kHalf, {{8, 6}})
      .add("rocm", 1, kHalf)
      .add("hpu", 2, kHalf)
      .add("cpu", 1);
}
Machine neuron_only() {
  return Machine().add("neuron", 32, kHalf).add("cpu", 1);
}
Machine apple() {
  return Machine().add("mps", 1, kHalf).add("cpu", 1);
}

struct Row {
  const char* name;
  Machine machine;
  std::optional<std::string> device_map;
  const char* device;
  Strings devices;
  std::optional<std::string> mixed_precision;
  const char* reason_fragment;
};

void PrintTo(const Row& row, std::ostream* os) {
  *os << row.name;
}

class Inference : public ::testing::TestWithParam<Row> {};

TEST_P(Inference, ChoosesTheDevice) {
  const Row& row = GetParam();
  const Selection s = infer(row.machine, row.device_map);
  EXPECT_EQ(s.device.str(), row.device);
  EXPECT_EQ(strs(s.devices), row.devices);
  EXPECT_EQ(s.mixed_precision, row.mixed_precision);
  EXPECT_EQ(s.collective_backend, std::nullopt);
  EXPECT_EQ(s.world_size, 1);
  EXPECT_NE(s.reason.find(row.reason_fragment), std::string::npos) << s.reason;
}

INSTANTIATE_TEST_SUITE_P(
    Table, Inference,
    ::testing::Values(
        Row{"none_is_cpu",
            selection_test::h100(2),
            std::nullopt,
            "cpu",
            {"cpu"},
            {},
            "no device_map"},
        Row{"auto",
            selection_test::h100(2),
            "auto",
            "cuda:0",
            {"cuda:0", "cuda:1", "cpu"},
            "bf16",
            "cuda devices, then cpu"},
        Row{"balanced",
            selection_test::h100(2),
            "balanced",
            "cuda:0",
            {"cuda:0", "cuda:1", "cpu"},
            "bf16",
            "automatic placement"},
        Row{"balanced_low_0",
            selection_test::h100(2),
            "balanced_low_0",
            "cuda:0",
            {"cuda:0", "cuda:1", "cpu"},
            "bf16",
            "planner"},
        Row{"sequential",
            selection_test::h100(2),
            "sequential",
            "cuda:0",
            {"cuda:0", "cuda:1", "cpu"},
            "bf16",
            "automatic placement"},
        Row{"auto_cpu_only", selection_test::cpu_only(), "auto", "cpu", {"cpu"}, {}, "cpu only"},
        // Neuron has no automatic placement: auto gives cpu, and the reason says to name it.
        Row{"auto_neuron_only",
            neuron_only(),
            "auto",
            "cpu",
            {"cpu"},
            {},
            "automatic placement does not cover neuron; name the device instead "
            "(device_map=\"neuron\")"},
        Row{"named_neuron",
            neuron_only(),
            "neuron",
            "neuron:0",
            {"neuron:0"},
            "bf16",
            "the whole model on neuron:0"},
        Row{"named_neuron_core",
            neuron_only(),
            "neuron:31",
            "neuron:31",
            {"neuron:31"},
            "bf16",
            "neuron:31"},
        // mps takes cpu's place (get_max_memory).
        Row{"auto_mps", apple(), "auto", "mps", {"mps"}, "bf16", "mps"},
        // One accelerator type, in get_max_memory's order: hpu before cuda.
        Row{"auto_mixed",
            mixed(),
            "auto",
            "hpu:0",
            {"hpu:0", "hpu:1", "cpu"},
            "bf16",
            "here also cuda, rocm"},
        Row{"named_cuda", mixed(), "cuda:1", "cuda:1", {"cuda:1"}, "bf16", "cuda:1"},
        Row{"index_less_cuda",
            selection_test::h100(2),
            "cuda",
            "cuda:0",
            {"cuda:0"},
            "bf16",
            "cuda:0"},
        Row{"named_cpu", selection_test::h100(2), "cpu", "cpu", {"cpu"}, {}, "cpu"},
        Row{"meta", selection_test::h100(2), "meta", "meta", {"meta"}, {}, "meta"},
        Row{"index", selection_test::h100(2), "1", "cuda:1", {"cuda:1"}, "bf16", "cuda:1"},
        Row{"index_mixed_is_hpu", mixed(), "1", "hpu:1", {"hpu:1"}, "bf16", "hpu:1"},
        Row{"dict",
            selection_test::h100(2),
            R"({"model.embed_tokens": 1, "model.layers": 0, "model.norm": "cpu", "lm_head": "disk"})",
            "cuda:1",
            {"cuda:1", "cuda:0", "cpu"},
            "bf16",
            "first module"},
        Row{"dict_all_disk",
            selection_test::h100(2),
            R"({"": "disk"})",
            "cpu",
            {"cpu"},
            {},
            "disk"}),
    [](const ::testing::TestParamInfo<Row>& row) { return std::string(row.param.name); });

TEST(InferenceErrors, NamedDeviceMustExist) {
  EXPECT_EQ(error_of<NotFound>([] { infer(selection_test::h100(2), "cuda:5"); }),
            "device_map='cuda:5': 'cuda:5' does not exist; cuda has cuda:0, cuda:1");
  EXPECT_EQ(error_of<Unavailable>([] { infer(selection_test::h100(2), "xpu"); }),
            "device_map='xpu': 'xpu': no loaded plugin provides xpu devices");
  EXPECT_EQ(error_of<NotFound>([] { infer(selection_test::h100(2), "2"); }),
            "device_map='2': 'cuda:2' does not exist; cuda has cuda:0, cuda:1");
  EXPECT_EQ(
      error_of<NotFound>([] { infer(selection_test::h100(2), R"({"a": 0, "b": "cuda:7"})"); }),
      "device_map entry 'b': 'cuda:7' does not exist; cuda has cuda:0, cuda:1");
}

TEST(InferenceErrors, IndexNeedsAnAutomaticAccelerator) {
  EXPECT_EQ(error_of<Unavailable>([] { infer(neuron_only(), "0"); }),
            "device_map='0' names accelerator 0, but no available accelerator is covered by "
            "automatic placement; name the device instead (e.g. 'cpu' or 'neuron:0')");
}

TEST(InferenceLocalRank, CudaMeansTheLocalRanksGpu) {
  // check_and_set_device_map: "cuda" becomes f"cuda:{LOCAL_RANK}".
  const Machine m = selection_test::h100(4);
  EXPECT_EQ(infer(m, "cuda", {{"LOCAL_RANK", "3"}}).device.str(), "cuda:3");
  EXPECT_EQ(infer(m, "cuda:1", {{"LOCAL_RANK", "3"}}).device.str(), "cuda:1");
  EXPECT_EQ(infer(m, "auto", {{"LOCAL_RANK", "3"}}).device.str(), "cuda:0");
  EXPECT_EQ(error_of<InvalidArgument>([&] {
              infer(m, "cuda", {{"LOCAL_RANK", "-1"}});
            }),
            "When passing device_map as a string, the value needs to be a device name (e.g. cpu, "
            "cuda:0) or 'auto', 'balanced', 'balanced_low_0', 'sequential' but found cuda:-1.");
  EXPECT_NE(error_of<InvalidArgument>([&] {
              infer(m, "cuda", {{"LOCAL_RANK", "x"}});
            }).find("LOCAL_RANK='x'"),
            std::string::npos);
  EXPECT_EQ(error_of<NotFound>([&] {
              infer(m, "cuda", {{"LOCAL_RANK", "4"}});
            }),
            "device_map='cuda': 'cuda:4' does not exist; cuda has cuda:0, cuda:1, cuda:2, cuda:3");
}

struct PipeRow {
  const char* name;
  Machine machine;
  std::optional<std::string> device;
  std::optional<std::string> device_map;
  const char* expected;
  const char* reason_fragment;
};

void PrintTo(const PipeRow& row, std::ostream* os) {
  *os << row.name;
}

class Pipeline : public ::testing::TestWithParam<PipeRow> {};

TEST_P(Pipeline, ChoosesTheDevice) {
  const PipeRow& row = GetParam();
  const Selection s = pipe(row.machine, row.device, row.device_map);
  EXPECT_EQ(s.device.str(), row.expected);
  EXPECT_EQ(strs(s.devices).front(), row.expected);
  EXPECT_NE(s.reason.find(row.reason_fragment), std::string::npos) << s.reason;
}

INSTANTIATE_TEST_SUITE_P(
    Table, Pipeline,
    ::testing::Values(
        PipeRow{"none_gpu", selection_test::h100(2), {}, {}, "cuda:0", "pipeline() uses device 0"},
        PipeRow{"none_cpu", selection_test::cpu_only(), {}, {}, "cpu", "none of mlu"},
        PipeRow{"none_neuron", neuron_only(), {}, {}, "cpu", "none of mlu"},
        PipeRow{"none_mps", apple(), {}, {}, "mps:0", "mps:0"},
        // The int order differs from training's: cuda before hpu.
        PipeRow{"none_mixed", mixed(), {}, {}, "cuda:0", "first available of mlu, musa, cuda"},
        PipeRow{"int", selection_test::h100(2), "1", {}, "cuda:1", "device=1"},
        PipeRow{"minus_one", selection_test::h100(2), "-1", {}, "cpu", "negative"},
        PipeRow{"minus_five", selection_test::h100(2), "-5", {}, "cpu", "negative"},
        PipeRow{"mlu_first",
                Machine().add("cuda", 1, kHalf).add("mlu", 1, kHalf),
                {},
                {},
                "mlu:0",
                "mlu:0"},
        PipeRow{"musa_before_cuda",
                Machine().add("cuda", 1, kHalf).add("musa", 1, kHalf),
                {},
                {},
                "musa:0",
                "musa:0"},
        PipeRow{"npu_before_hpu",
                Machine().add("hpu", 1, kHalf).add("npu", 1, kHalf),
                {},
                {},
                "npu:0",
                "npu:0"},
        PipeRow{"hpu_before_xpu",
                Machine().add("xpu", 1, kHalf).add("hpu", 1, kHalf),
                {},
                {},
                "hpu:0",
                "hpu:0"},
        PipeRow{"xpu_before_mps",
                Machine().add("mps", 1, kHalf).add("xpu", 1, kHalf),
                {},
                {},
                "xpu:0",
                "xpu:0"},
        PipeRow{"string", mixed(), "hpu:1", {}, "hpu:1", "device='hpu:1'"},
        PipeRow{"string_neuron", neuron_only(), "neuron:3", {}, "neuron:3", "neuron:3"},
        PipeRow{"string_cpu", selection_test::h100(2), "cpu", {}, "cpu", "device='cpu'"},
        PipeRow{"device_map_auto",
                selection_test::h100(2),
                {},
                "auto",
                "cuda:0",
                "pipeline(device_map=...)"},
        PipeRow{"device_map_neuron_auto", neuron_only(), {}, "auto", "cpu", "neuron"}),
    [](const ::testing::TestParamInfo<PipeRow>& row) { return std::string(row.param.name); });

TEST(PipelineErrors, XpuAndHpuStringsNeedTheirBackend) {
  EXPECT_EQ(error_of<InvalidArgument>([] { pipe(selection_test::h100(1), "xpu"); }),
            "xpu is not available, you should use device=\"cpu\" instead");
  EXPECT_EQ(error_of<InvalidArgument>([] { pipe(selection_test::h100(1), "hpu:0"); }),
            "hpu:0 is not available, you should use device=\"cpu\" instead");
}

TEST(PipelineErrors, DeviceAndDeviceMapTogether) {
  EXPECT_EQ(error_of<InvalidArgument>([] { pipe(selection_test::h100(1), "0", "auto"); }),
            "Both `device` and `device_map` are specified. `device` will override `device_map`. "
            "You will most likely encounter unexpected behavior. Please remove `device` and keep "
            "`device_map`.");
}

TEST(PipelineErrors, DevicesMustExist) {
  EXPECT_EQ(error_of<NotFound>([] { pipe(selection_test::h100(2), "2"); }),
            "device=2 (cuda:2): 'cuda:2' does not exist; cuda has cuda:0, cuda:1");
  EXPECT_NE(error_of<InvalidArgument>([] {
              pipe(selection_test::h100(2), "CUDA");
            }).find("device='CUDA': Expected one of"),
            std::string::npos);
}

}  // namespace
