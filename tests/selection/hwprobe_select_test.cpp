// hwprobe select as a process: the JSON keys, the rules end to end over simulated topologies,
// and exit code 2 with the library's message for bad input.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "process.hpp"

namespace {

using nlohmann::json;
using testing_support::ProcessResult;
using Env = std::map<std::string, std::string>;

// Only the sim plugin, and none of the launchers' variables of the calling environment.
ProcessResult select(std::vector<std::string> args, Env env = {}) {
  args.insert(args.begin(), {HWPROBE_PATH, "select"});
  Env full = {{"BACKPLANE_PLUGIN_PATH", PLUGIN_BUILD_DIR},
              {"BACKPLANE_PLUGINS", "sim"},
              {"BACKPLANE_LOG", "error"}};
  for (const char* name :
       {"LOCAL_RANK", "RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_SIZE", "PMI_RANK", "SLURM_NTASKS", "SLURM_PROCID",
        "SLURM_LOCALID", "ACCELERATE_USE_CPU", "ACCELERATE_TORCH_DEVICE", "BACKPLANE_DEVICE",
        "CUDA_VISIBLE_DEVICES", "BACKPLANE_SIM_TOPOLOGY"}) {
    full[name] = "";  // unset
  }
  for (const auto& [name, value] : env) full[name] = value;
  return testing_support::run_process(args, full);
}

json select_json(std::vector<std::string> args, Env env = {}) {
  args.push_back("--json");
  const ProcessResult r = select(args, env);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return json::parse(r.out);
}

TEST(HwprobeSelect, JsonHasEveryKey) {
  const json j = select_json({"--for", "training", "--sim", "h100x8"});
  for (const char* key : {"device", "devices", "collective_backend", "rank", "local_rank",
                          "world_size", "mixed_precision", "reason"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j.size(), 8u);
  EXPECT_EQ(j["device"], "cuda:0");
  EXPECT_EQ(j["devices"].size(), 8u);
  EXPECT_TRUE(j["collective_backend"].is_null());
  EXPECT_EQ(j["world_size"], 1);
  EXPECT_EQ(j["mixed_precision"], "bf16");
  EXPECT_TRUE(j["reason"].is_string());
}

TEST(HwprobeSelect, TorchrunRanksOnH100x8) {
  for (int rank = 0; rank < 4; ++rank) {
    const json j =
        select_json({"--for", "training", "--sim", "h100x8"}, {{"LOCAL_RANK", std::to_string(rank)},
                                                               {"RANK", std::to_string(rank)},
                                                               {"WORLD_SIZE", "4"}});
    EXPECT_EQ(j["device"], "cuda:" + std::to_string(rank));
    EXPECT_EQ(j["collective_backend"], "nccl");
    EXPECT_EQ(j["rank"], rank);
    EXPECT_EQ(j["local_rank"], rank);
    EXPECT_EQ(j["world_size"], 4);
  }
}

TEST(HwprobeSelect, UseCpuAndNoAccelerator) {
  const json forced = select_json({"--for", "training", "--sim", "h100x8", "--use-cpu"});
  EXPECT_EQ(forced["device"], "cpu");
  EXPECT_TRUE(forced["mixed_precision"].is_null());
  const json plain = select_json({"--for", "training"});
  EXPECT_EQ(plain["device"], "cpu");
}

TEST(HwprobeSelect, InferenceOnTrainium) {
  const json automatic =
      select_json({"--for", "inference", "--sim", "trn1-32xlarge", "--device-map", "auto"});
  EXPECT_EQ(automatic["device"], "cpu");
  const json named =
      select_json({"--for", "inference", "--sim", "trn1-32xlarge", "--device-map", "neuron"});
  EXPECT_EQ(named["device"], "neuron:0");
  const json none = select_json({"--for", "inference", "--sim", "trn1-32xlarge"});
  EXPECT_EQ(none["device"], "cpu");
}

TEST(HwprobeSelect, PipelineAndDictForms) {
  EXPECT_EQ(select_json({"--for", "pipeline", "--sim", "mixed"})["device"], "cuda:0");
  EXPECT_EQ(select_json({"--for", "pipeline", "--sim", "mixed", "--device", "1"})["device"],
            "cuda:1");
  EXPECT_EQ(select_json({"--for", "pipeline", "--sim", "mixed", "--device=-1"})["device"], "cpu");
  const json dict = select_json({"--for", "inference", "--sim", "h100x8", "--device-map",
                                 R"({"model": 3, "lm_head": "cpu"})"});
  EXPECT_EQ(dict["device"], "cuda:3");
  EXPECT_EQ(dict["devices"], json({"cuda:3", "cpu"}));
}

TEST(HwprobeSelect, TextOutput) {
  const ProcessResult r = select({"--for", "training", "--sim", "apple-m2-ultra"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("device:             mps\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mixed precision:    bf16\n"), std::string::npos) << r.out;
}

struct Bad {
  std::vector<std::string> args;
  Env env;
  const char* message;  // on stderr
};

void PrintTo(const Bad& bad, std::ostream* os) {
  for (const std::string& arg : bad.args) *os << arg << " ";
}

class HwprobeSelectBadInput : public ::testing::TestWithParam<Bad> {};

TEST_P(HwprobeSelectBadInput, ExitsTwoWithTheMessage) {
  const ProcessResult r = select(GetParam().args, GetParam().env);
  EXPECT_EQ(r.exit_code, 2) << r.out;
  EXPECT_NE(r.err.find(GetParam().message), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

INSTANTIATE_TEST_SUITE_P(
    Table, HwprobeSelectBadInput,
    ::testing::Values(
        Bad{{}, {}, "--for is required"},
        Bad{{"--for", "testing"}, {}, "--for 'testing' is not one of training"},
        Bad{{"--for", "inference", "--device-map", "foo"},
            {},
            "When passing device_map as a string, the value needs to be a device name (e.g. cpu, "
            "cuda:0) or 'auto', 'balanced', 'balanced_low_0', 'sequential' but found foo."},
        Bad{{"--for", "inference", "--device-map=-1"},
            {},
            "You can't pass device_map as a negative int. If you want to put the model on the "
            "cpu, pass device_map = 'cpu' "},
        Bad{{"--for", "inference", "--sim", "h100x8", "--device-map", "cuda:8"},
            {},
            "'cuda:8' does not exist"},
        Bad{{"--for", "training", "--sim", "h100x8", "--backend", "hccl"},
            {{"LOCAL_RANK", "0"}, {"RANK", "0"}, {"WORLD_SIZE", "2"}},
            "Your assigned backend hccl is not available, please use nccl"},
        Bad{{"--for", "training"}, {{"LOCAL_RANK", "zero"}}, "LOCAL_RANK='zero'"},
        Bad{{"--for", "training"}, {{"ACCELERATE_USE_CPU", "sure"}}, "invalid truth value"},
        Bad{{"--for", "training", "--device", "CUDA:0"}, {}, "Expected one of"},
        Bad{{"--for", "pipeline", "--device", "xpu"},
            {},
            "xpu is not available, you should use device=\"cpu\" instead"},
        Bad{{"--for", "training", "--device-map", "auto"}, {}, "--device-map is for inference"},
        Bad{{"--for", "inference", "--use-cpu"}, {}, "--use-cpu and --backend are for training"},
        Bad{{"--for", "inference", "--device", "0"}, {}, "inference takes --device-map"},
        Bad{{"--for", "training", "--bogus"}, {}, "unrecognised option"}));

}  // namespace
