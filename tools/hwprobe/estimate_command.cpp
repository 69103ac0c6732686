// hwprobe estimate: what `accelerate estimate-memory` prints for a model (its table, to the
// character), the parts of training beside it, and whether each size fits this machine's (or
// --sim's) devices (core/include/backplane/model/memory_estimate.hpp).
#include <backplane/model/device_map.hpp>
#include <backplane/model/memory_estimate.hpp>
#include <backplane/model/model.hpp>
#include <backplane/model/model_source.hpp>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "text_report.hpp"

namespace po = boost::program_options;

namespace hwprobe {
namespace {

using OrderedJson = nlohmann::ordered_json;

std::vector<backplane::EstimateDType> parse_dtypes(const std::string& text) {
  std::vector<backplane::EstimateDType> out;
  std::stringstream in(text);
  std::string word;
  while (std::getline(in, word, ',')) {
    if (word.empty()) continue;
    try {
      out.push_back(backplane::parse_estimate_dtype(word));
    } catch (const backplane::InvalidArgument&) {
      throw backplane::InvalidArgument("--dtypes " + text + ": '" + word +
                                       "' is not one of float32, float16, int8, int4");
    }
  }
  if (out.empty()) {
    throw backplane::InvalidArgument("--dtypes is empty: give some of float32,float16,int8,int4");
  }
  return out;
}

// "cuda:0-7 79.6 GiB each, cpu 22.8 GiB": runs of accelerators with the same free memory folded.
std::string devices_text(const backplane::PlanHardware& hw) {
  std::string out;
  const auto& accels = hw.accelerators;
  for (size_t i = 0; i < accels.size();) {
    size_t j = i + 1;
    while (j < accels.size() && accels[j].free_bytes == accels[i].free_bytes &&
           accels[j].index == accels[j - 1].index + 1) {
      ++j;
    }
    out += (out.empty() ? "" : ", ") + hw.accelerator_type + ":" + std::to_string(accels[i].index) +
           (j - i > 1 ? "-" + std::to_string(accels[j - 1].index) : "") + " " +
           format_bytes(accels[i].free_bytes) + (j - i > 1 ? " each" : "");
    i = j;
  }
  if (!hw.unified_memory)
    out += (out.empty() ? "" : ", ") + ("cpu " + format_bytes(hw.cpu_available));
  return out;
}

OrderedJson estimate_json(const backplane::MemoryEstimate& e, const backplane::PlanHardware& hw,
                          const std::string& name) {
  OrderedJson rows = OrderedJson::array();
  for (const backplane::EstimateRow& r : e.rows) {
    OrderedJson row = {{"dtype", backplane::to_string(r.dtype)},
                       {"largest_layer_bytes", r.largest_layer},
                       {"total_bytes", r.total},
                       {"training_adam_bytes",
                        r.training_adam ? OrderedJson(*r.training_adam) : OrderedJson(nullptr)}};
    if (r.training) {
      row["training"] = {{"weights_bytes", r.training->weights},
                         {"gradients_bytes", r.training->gradients},
                         {"optimizer_bytes", r.training->optimizer},
                         {"total_bytes", r.training->total()}};
    } else {
      row["training"] = nullptr;
    }
    row["fits"] = {{"inference", backplane::to_string(r.inference_fit)},
                   {"training", r.training_fit ? OrderedJson(backplane::to_string(*r.training_fit))
                                               : OrderedJson(nullptr)}};
    rows.push_back(row);
  }
  OrderedJson devices = OrderedJson::array();
  for (const backplane::PlanAccelerator& a : hw.accelerators) {
    devices.push_back({{"device", hw.accelerator_type + ":" + std::to_string(a.index)},
                       {"free_bytes", a.free_bytes}});
  }
  if (!hw.unified_memory) devices.push_back({{"device", "cpu"}, {"free_bytes", hw.cpu_available}});
  return {{"model", name},
          {"model_class", e.model_class},
          {"base_model_known", e.base_model_known},
          {"parameters", e.parameters},
          {"total_bytes", e.total_bytes},
          {"largest_layer", {{"name", e.largest_layer}, {"bytes", e.largest_layer_bytes}}},
          {"rows", rows},
          {"devices", devices},
          {"table", backplane::estimate_table(e, name)}};
}

void print_estimate(const backplane::MemoryEstimate& e, const backplane::PlanHardware& hw,
                    const std::string& name) {
  std::cout << backplane::estimate_table(e, name) << "\n\n";
  std::cout << "sized: " << e.model_class << " in float32, " << e.parameters
            << " parameters; largest layer " << (e.largest_layer.empty() ? "-" : e.largest_layer)
            << "\n";
  bool any_training = false;
  for (const backplane::EstimateRow& r : e.rows) any_training = any_training || r.training;
  if (any_training) {
    std::cout << "\ntraining with Adam, batch size 1, activations not counted:\n"
              << "DTYPE    WEIGHTS     GRADIENTS   ADAM STATES TOTAL\n";
    for (const backplane::EstimateRow& r : e.rows) {
      if (!r.training) continue;
      const auto cell = [](double b) {
        std::string s = format_bytes(static_cast<uint64_t>(b));
        return s + std::string(s.size() < 12 ? 12 - s.size() : 1, ' ');
      };
      const std::string dtype = backplane::to_string(r.dtype);
      std::cout << dtype << std::string(9 - dtype.size(), ' ') << cell(r.training->weights)
                << cell(r.training->gradients) << cell(r.training->optimizer)
                << format_bytes(static_cast<uint64_t>(r.training->total()))
                << (r.dtype == backplane::EstimateDType::kFloat16
                        ? "  (mixed precision: fp32 master weights and a float16 copy)"
                        : "")
                << "\n";
    }
  }
  std::cout << "\nfits " << devices_text(hw) << " (free memory; hwprobe plan places it):\n"
            << "DTYPE    INFERENCE    TRAINING\n";
  for (const backplane::EstimateRow& r : e.rows) {
    const std::string dtype = backplane::to_string(r.dtype);
    const std::string inference = backplane::to_string(r.inference_fit);
    std::cout << dtype << std::string(9 - dtype.size(), ' ') << inference
              << std::string(13 - inference.size(), ' ')
              << (r.training_fit ? backplane::to_string(*r.training_fit) : "N/A") << "\n";
  }
  if (!e.base_model_known) {
    std::cout << "\nnote: AutoModel's part of this tree is not known here (a tree file or "
                 "weights): the whole tree was sized\n";
  }
}

// accelerate estimate-memory builds the model from its config alone (AutoModel.from_config
// applies no quantizer): a quantized checkpoint is sized as its dense float32 model. So a
// config.json with a quantization_config is described without it; anything else as hwprobe
// plan describes it.
backplane::ModelDescription estimate_model(const backplane::ModelSource& source, bool& dense) {
  namespace fs = std::filesystem;
  fs::path config;
  if (source.kind == backplane::ModelFileKind::kConfig) config = source.path;
  if (source.kind == backplane::ModelFileKind::kWeights) {
    config = source.path.parent_path() / "config.json";
  }
  std::error_code ec;
  if (!config.empty() && fs::is_regular_file(config, ec) &&
      fs::file_size(config, ec) < (16u << 20)) {
    std::ifstream in(config, std::ios::binary);
    const nlohmann::json json = nlohmann::json::parse(in, nullptr, false);
    if (json.is_object() && json.contains("quantization_config")) {
      nlohmann::json dense_config = json;
      dense_config.erase("quantization_config");
      dense = true;
      return backplane::model_from_config_json(dense_config.dump());
    }
  }
  return backplane::model_from_source(source);
}

}  // namespace

int run_estimate(const std::vector<std::string>& args) {
  CommonOptions common;
  std::string dtypes_text = "float32,float16,int8,int4";
  po::options_description description("Options");
  description.add_options()("dtypes", po::value(&dtypes_text)->value_name("LIST"),
                            "some of float32,float16,int8,int4 (accelerate's --dtypes; default all "
                            "four, in that order)");
  add_common_options(description, common);
  const char* usage = "hwprobe estimate MODEL [--dtypes LIST] [--json] [--sim NAME|FILE]";
  po::variables_map vm;
  if (!parse_command_or_help(args, description, "model", usage, vm)) return kExitOk;
  const std::vector<std::string> words = positional_words(vm, "model");
  if (words.size() != 1) {
    std::cerr << "hwprobe estimate: give one MODEL (a folder, config.json, .safetensors file, "
                 "index, module tree file or Hub id org/name[@revision])\nUsage: "
              << usage << "\n";
    return kExitUsage;
  }
  const std::vector<backplane::EstimateDType> dtypes = parse_dtypes(dtypes_text);
  const backplane::ModelSource source = backplane::locate_model(words.front());
  bool dense = false;
  const backplane::ModelDescription model = estimate_model(source, dense);
  if (dense) {
    std::cerr << "hwprobe: note: the config's quantization_config is left out, as accelerate "
                 "estimate-memory leaves it out: the dense model is sized\n";
  }
  for (const std::string& warning : model.warnings) {
    std::cerr << "hwprobe: warning: " << warning << "\n";
  }
  const backplane::Runtime runtime = open_runtime(common);
  const backplane::PlanHardware hardware = backplane::plan_hardware(runtime);
  const backplane::MemoryEstimate estimate = backplane::estimate_memory(model, dtypes, hardware);
  const std::string name = source.hub_id ? source.hub_id->repo_id : words.front();
  if (common.json) {
    std::cout << estimate_json(estimate, hardware, name).dump(2) << "\n";
  } else {
    print_estimate(estimate, hardware, name);
  }
  return kExitOk;
}

}  // namespace hwprobe
