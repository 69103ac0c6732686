// device_map planning speed: an 80-layer Llama 70B (bench/data/llama-70b-config.json, bf16) over
// eight simulated 80 GiB GPUs, and the same model with 10x the layers. The planner is meant to be
// linear in the number of modules: the last line prints the 800-layer / 80-layer time ratio
// (10 is linear; Accelerate's own loops are quadratic in places).
//
//   build/bin/backplane-planner-bench [--benchmark_filter=...]
#include <backplane/model/device_map.hpp>
#include <backplane/model/model.hpp>
#include <backplane/rules/selection.hpp>

#include <benchmark/benchmark.h>

#include "model/architecture_descriptor.hpp"
#include "model/config_loader.hpp"

#include <nlohmann/json.hpp>

#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

namespace {

backplane::ModelDescription llama_70b(int layers) {
  std::ifstream in(BENCH_DATA "/llama-70b-config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config["num_hidden_layers"] = layers;
  return backplane::model_from_config_json(config.dump());
}

backplane::PlanHardware eight_h100() {
  backplane::PlanHardware hardware;
  hardware.accelerator_type = "cuda";
  for (int i = 0; i < 8; ++i)
    hardware.accelerators.push_back({i, 80ull << 30, backplane::ComputeCapability{9, 0}});
  hardware.cpu_available = 1ull << 40;
  return hardware;
}

void plan(benchmark::State& state, const char* strategy) {
  const int layers = static_cast<int>(state.range(0));
  const backplane::ModelDescription model = llama_70b(layers);
  const backplane::PlanStrategy request = backplane::parse_device_map(strategy);
  const backplane::PlanHardware hardware = eight_h100();
  size_t entries = 0;
  for (auto _ : state) {
    const backplane::DevicePlan p = backplane::plan_device_map(model, request, hardware);
    entries = p.device_map.size();
    benchmark::DoNotOptimize(entries);
  }
  state.counters["layers"] = layers;
  state.counters["map_entries"] = static_cast<double>(entries);
  state.SetComplexityN(layers);
}

void BM_PlanAuto(benchmark::State& state) {
  plan(state, "auto");
}
void BM_PlanSequential(benchmark::State& state) {
  plan(state, "sequential");
}
BENCHMARK(BM_PlanAuto)->Arg(80)->Arg(800)->Unit(benchmark::kMicrosecond)->Complexity(benchmark::oN);
BENCHMARK(BM_PlanSequential)
    ->Arg(80)
    ->Arg(800)
    ->Unit(benchmark::kMicrosecond)
    ->Complexity(benchmark::oN);

// config.json -> ModelDescription for the 70B through its architecture descriptor
// (architectures/llama.json): reading the config, its checks and the module tree.
nlohmann::json llama_70b_config() {
  std::ifstream in(BENCH_DATA "/llama-70b-config.json");
  return nlohmann::json::parse(in);
}

void BM_DescribeFromConfig(benchmark::State& state) {
  const nlohmann::json config = llama_70b_config();
  for (auto _ : state) {
    const backplane::ModelDescription model =
        backplane::model_detail::build_from_config(config, "config.json", std::nullopt);
    benchmark::DoNotOptimize(model.root.children.size());
  }
}
BENCHMARK(BM_DescribeFromConfig)->Unit(benchmark::kMicrosecond);

// Console output, plus the 800/80 ratio of each benchmark at the end.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      // Single runs, or the median of repetitions (--benchmark_repetitions=N), which wins.
      std::string name = run.benchmark_name();
      const bool median = run.run_type == Run::RT_Aggregate && run.aggregate_name == "median";
      if (median) {
        name = name.substr(0, name.size() - std::string("_median").size());
      } else if (run.run_type != Run::RT_Iteration || run.iterations == 0 ||
                 medians_.count(name) > 0) {
        continue;
      }
      if (median) medians_.insert(name);
      const size_t slash = name.rfind('/');
      if (slash == std::string::npos) {
        times_[name][""] = run.GetAdjustedRealTime();
        continue;
      }
      times_[name.substr(0, slash)][name.substr(slash + 1)] = run.GetAdjustedRealTime();
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    if (const auto describe = times_.find("BM_DescribeFromConfig"); describe != times_.end()) {
      std::ostringstream line;
      line.precision(3);
      line << "describing the 70B from config.json: " << describe->second.begin()->second
           << " us\n";
      GetOutputStream() << line.str();
    }
    for (const auto& [name, by_arg] : times_) {
      const auto small = by_arg.find("80");
      const auto large = by_arg.find("800");
      if (small == by_arg.end() || large == by_arg.end()) continue;
      std::ostringstream line;
      line.precision(3);
      line << name << ": " << small->second << " us per plan at 80 layers, " << large->second
           << " us at 800; ratio " << large->second / small->second << " (linear: 10)\n";
      GetOutputStream() << line.str();
    }
  }

 private:
  std::map<std::string, std::map<std::string, double>> times_;
  std::set<std::string> medians_;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
