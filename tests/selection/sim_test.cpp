// The selection rules over real Runtimes of simulated topologies (the sim plugin alone), through
// the Runtime overloads that read the process environment.
#include <backplane/backplane.hpp>
#include <backplane/rules/selection.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "machine.hpp"
#include "scoped_environment.hpp"

namespace {

using backplane::Runtime;
using backplane::Selection;
using selection_test::strs;
using Strings = std::vector<std::string>;

// Every variable a rule reads; each test starts with all of them unset.
const char* const kVariables[] = {"LOCAL_RANK",
                                  "RANK",
                                  "WORLD_SIZE",
                                  "PMI_RANK",
                                  "PMI_SIZE",
                                  "MPI_LOCALRANKID",
                                  "OMPI_COMM_WORLD_RANK",
                                  "OMPI_COMM_WORLD_SIZE",
                                  "OMPI_COMM_WORLD_LOCAL_RANK",
                                  "MV2_COMM_WORLD_RANK",
                                  "MV2_COMM_WORLD_SIZE",
                                  "MV2_COMM_WORLD_LOCAL_RANK",
                                  "SLURM_PROCID",
                                  "SLURM_NTASKS",
                                  "SLURM_LOCALID",
                                  "ACCELERATE_USE_CPU",
                                  "ACCELERATE_TORCH_DEVICE",
                                  "BACKPLANE_DEVICE",
                                  "CUDA_VISIBLE_DEVICES",
                                  "CUDA_DEVICE_ORDER",
                                  "HABANA_VISIBLE_MODULES",
                                  "NEURON_RT_VISIBLE_CORES",
                                  "ZE_AFFINITY_MASK",
                                  "ZE_FLAT_DEVICE_HIERARCHY",
                                  "ROCR_VISIBLE_DEVICES",
                                  "HIP_VISIBLE_DEVICES"};

class SimSelection : public ::testing::Test {
 protected:
  Runtime open(const std::string& topology, const std::map<std::string, std::string>& vars = {}) {
    for (const char* name : kVariables) env_.unset(name);
    env_.set("BACKPLANE_SIM_TOPOLOGY", std::string(TOPOLOGY_DIR) + "/" + topology + ".json");
    for (const auto& [name, value] : vars) env_.set(name, value);
    backplane::RuntimeOptions options;
    options.plugin_path = std::vector<std::filesystem::path>{PLUGIN_BUILD_DIR};
    options.only_plugins = std::vector<std::string>{"sim"};
    options.log_sink = [](backplane::LogLevel, const std::string&) {};
    return Runtime::open(options);
  }
  void set(const std::string& name, const std::string& value) { env_.set(name, value); }

  static Selection auto_map(const Runtime& runtime) {
    return backplane::select_inference_device(runtime, backplane::parse_device_map("auto"));
  }
  static Selection pipeline(const Runtime& runtime) {
    return backplane::select_pipeline_device(runtime, backplane::PipelineOptions{});
  }

 private:
  backplane::testing::ScopedEnvironment env_;
};

TEST_F(SimSelection, H100x8TrainsOnAllEightInOneProcess) {
  const Runtime runtime = open("h100x8");
  const Selection s = backplane::select_training_device(runtime);
  EXPECT_EQ(s.device.str(), "cuda:0");
  EXPECT_EQ(s.devices.size(), 8u);
  EXPECT_EQ(s.mixed_precision, "bf16");
  EXPECT_EQ(s.collective_backend, std::nullopt);
  EXPECT_EQ(s.world_size, 1);
}

TEST_F(SimSelection, H100x8UnderTorchrunOneGpuPerProcess) {
  const Runtime runtime = open("h100x8");
  for (int rank = 0; rank < 4; ++rank) {
    set("LOCAL_RANK", std::to_string(rank));
    set("RANK", std::to_string(rank + 4));
    set("WORLD_SIZE", "8");
    const Selection s = backplane::select_training_device(runtime);
    EXPECT_EQ(s.device.str(), "cuda:" + std::to_string(rank));
    EXPECT_EQ(s.collective_backend, "nccl");
    EXPECT_EQ(s.rank, rank + 4);
    EXPECT_EQ(s.local_rank, rank);
    EXPECT_EQ(s.world_size, 8);
    EXPECT_EQ(s.launcher, "torchrun");
  }
}

TEST_F(SimSelection, H100x8VisibilityComesFirst) {
  // Two visible GPUs: local rank 3 wraps to cuda:1.
  const Runtime runtime = open(
      "h100x8",
      {{"CUDA_VISIBLE_DEVICES", "4,5"}, {"LOCAL_RANK", "3"}, {"RANK", "3"}, {"WORLD_SIZE", "4"}});
  const Selection s = backplane::select_training_device(runtime);
  EXPECT_EQ(s.device.str(), "cuda:1");
  EXPECT_EQ(auto_map(runtime).devices.size(), 3u);  // cuda:0, cuda:1, cpu
}

TEST_F(SimSelection, H100x8Inference) {
  const Runtime runtime = open("h100x8");
  const Selection s = auto_map(runtime);
  EXPECT_EQ(s.device.str(), "cuda:0");
  EXPECT_EQ(strs(s.devices), (Strings{"cuda:0", "cuda:1", "cuda:2", "cuda:3", "cuda:4", "cuda:5",
                                      "cuda:6", "cuda:7", "cpu"}));
  EXPECT_EQ(pipeline(runtime).device.str(), "cuda:0");
  EXPECT_EQ(backplane::select_inference_device(runtime, std::nullopt).device.str(), "cpu");
}

TEST_F(SimSelection, MixedTrainsOnGaudiButPipelinesOnCuda) {
  const Runtime runtime = open("mixed");
  // Transformers' training order puts hpu before cuda; pipeline()'s int order puts cuda first.
  EXPECT_EQ(backplane::select_training_device(runtime).device.str(), "hpu:0");
  EXPECT_EQ(pipeline(runtime).device.str(), "cuda:0");
  const Selection automatic = auto_map(runtime);
  EXPECT_EQ(automatic.device.str(), "hpu:0");
  EXPECT_EQ(strs(automatic.devices), (Strings{"hpu:0", "hpu:1", "cpu"}));
  EXPECT_EQ(
      backplane::select_inference_device(runtime, backplane::parse_device_map("rocm", runtime))
          .device.str(),
      "rocm:0");
}

TEST_F(SimSelection, MixedCudaDevicesAdviseByComputeCapability) {
  const Runtime runtime = open("mixed", {{"BACKPLANE_DEVICE", "cuda:0"}});
  const Selection first = backplane::select_training_device(runtime);
  EXPECT_EQ(first.device.str(), "cuda:0");
  // Both of the mixed topology's NVIDIA GPUs are Ampere (8.6 and 8.0).
  EXPECT_EQ(first.mixed_precision, "bf16");
}

TEST_F(SimSelection, Trn1AutoIsCpuAndNeuronMustBeNamed) {
  const Runtime runtime = open("trn1-32xlarge");
  const Selection automatic = auto_map(runtime);
  EXPECT_EQ(automatic.device.str(), "cpu");
  EXPECT_EQ(strs(automatic.devices), Strings{"cpu"});
  EXPECT_NE(automatic.reason.find("neuron"), std::string::npos) << automatic.reason;
  const Selection named =
      backplane::select_inference_device(runtime, backplane::parse_device_map("neuron"));
  EXPECT_EQ(named.device.str(), "neuron:0");
  EXPECT_EQ(pipeline(runtime).device.str(), "cpu");
  // Training detects neuron by itself.
  EXPECT_EQ(backplane::select_training_device(runtime).device.str(), "neuron:0");
}

TEST_F(SimSelection, Trn1TorchrunUsesNeuronCollectives) {
  const Runtime runtime =
      open("trn1-32xlarge", {{"LOCAL_RANK", "31"}, {"RANK", "31"}, {"WORLD_SIZE", "32"}});
  const Selection s = backplane::select_training_device(runtime);
  EXPECT_EQ(s.device.str(), "neuron:31");
  EXPECT_EQ(s.collective_backend, "neuron");
}

TEST_F(SimSelection, AppleM2UltraMpsFirst) {
  const Runtime runtime = open("apple-m2-ultra");
  const Selection training = backplane::select_training_device(runtime);
  EXPECT_EQ(training.device.str(), "mps");
  EXPECT_EQ(training.mixed_precision, "bf16");
  const Selection automatic = auto_map(runtime);
  EXPECT_EQ(strs(automatic.devices), Strings{"mps"});
  EXPECT_EQ(pipeline(runtime).device.str(), "mps:0");
}

TEST_F(SimSelection, Mi300x8AnswersToCuda) {
  const Runtime runtime = open("mi300x8");
  const Selection s = backplane::select_training_device(runtime);
  EXPECT_EQ(s.device.str(), "cuda:0");
  EXPECT_EQ(s.devices.size(), 8u);
  EXPECT_EQ(s.mixed_precision, "bf16");  // gfx942
}

TEST_F(SimSelection, IntelMaxTiles) {
  const Runtime runtime = open("intel-max1550x4");
  EXPECT_EQ(backplane::select_training_device(runtime).device.str(), "xpu:0");
  EXPECT_EQ(pipeline(runtime).device.str(), "xpu:0");
  EXPECT_EQ(auto_map(runtime).devices.size(), 9u);  // 8 tiles (FLAT) and cpu
}

TEST_F(SimSelection, UseCpuAndOverridesThroughTheEnvironment) {
  const Runtime runtime = open("h100x8", {{"ACCELERATE_USE_CPU", "true"}});
  EXPECT_EQ(backplane::select_training_device(runtime).device.str(), "cpu");
  set("ACCELERATE_USE_CPU", "false");
  set("BACKPLANE_DEVICE", "cuda:7");
  EXPECT_EQ(backplane::select_training_device(runtime).device.str(), "cuda:7");
}

}  // namespace
