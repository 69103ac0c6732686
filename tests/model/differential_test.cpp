// backplane's model descriptions and tensor-parallel plans against what transformers itself
// builds: tests/python/model_oracle.py writes the oracle (one case per generated config.json)
// and ctest hands its path over in BACKPLANE_MODEL_ORACLE.
#include <backplane/error.hpp>
#include <backplane/model/model.hpp>
#include <backplane/model/tensor_parallel.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace {

using Json = nlohmann::json;

Json load_oracle() {
  const char* path = std::getenv("BACKPLANE_MODEL_ORACLE");
  if (path == nullptr) return Json();
  std::ifstream in(path);
  if (!in) return Json();
  return Json::parse(in);
}

const Json& oracle() {
  static const Json json = load_oracle();
  return json;
}

std::string qualified(const std::string& module, const std::string& tensor) {
  return module.empty() ? tensor : module + "." + tensor;
}

// Our description in the oracle's terms.
struct Flat {
  Json modules = Json::array();
  Json parameters = Json::array();
  Json buffers = Json::array();
};

Flat flatten(const backplane::ModelDescription& description) {
  Flat flat;
  for (const backplane::NamedModule& named : backplane::named_modules(description.root)) {
    flat.modules.push_back({named.name, named.module->class_name});
  }
  // named_parameters() and named_buffers() walk the modules in the same order.
  for (const backplane::NamedModule& named : backplane::named_modules(description.root)) {
    for (const backplane::TensorInfo& tensor : named.module->tensors) {
      const std::string name = qualified(named.name, tensor.name);
      if (tensor.buffer) {
        flat.buffers.push_back(
            {name, tensor.shape, backplane::to_string(tensor.dtype), tensor.persistent});
      } else {
        flat.parameters.push_back({name, tensor.shape, backplane::to_string(tensor.dtype)});
      }
    }
  }
  return flat;
}

// Element-wise comparison of two lists, naming the first difference.
void expect_same_list(const Json& ours, const Json& theirs, const std::string& what) {
  const size_t common = std::min(ours.size(), theirs.size());
  for (size_t i = 0; i < common; ++i) {
    if (ours[i] != theirs[i]) {
      ADD_FAILURE() << what << " #" << i << ": backplane " << ours[i].dump() << ", transformers "
                    << theirs[i].dump();
      return;
    }
  }
  EXPECT_EQ(ours.size(), theirs.size())
      << what << ": backplane has " << ours.size() << " entries, transformers " << theirs.size()
      << (ours.size() > common ? "; first extra: " + ours[common].dump() : "")
      << (theirs.size() > common ? "; first missing: " + theirs[common].dump() : "");
}

class Differential : public ::testing::Test {
 protected:
  void SetUp() override {
    if (oracle().is_null()) {
      GTEST_SKIP() << "BACKPLANE_MODEL_ORACLE names no readable oracle (run through ctest)";
    }
  }
};

TEST_F(Differential, OracleHasCases) {
  // The generator must have produced both kinds, or the tests below prove little.
  int built = 0;
  int refused = 0;
  int with_tp = 0;
  for (const Json& c : oracle()["cases"]) {
    (c.contains("error") ? refused : built) += 1;
    if (c.contains("tp") && !c["tp"].empty()) ++with_tp;
  }
  EXPECT_GE(built, 100);
  EXPECT_GE(refused, 10);
  EXPECT_GE(with_tp, 30);
}

TEST_F(Differential, ModelFromConfigMatchesTransformers) {
  for (const Json& c : oracle()["cases"]) {
    const std::string config = c["config"].get<std::string>();
    SCOPED_TRACE(c["name"].get<std::string>() + " " + config);
    if (c.contains("error")) {
      EXPECT_THROW(backplane::model_from_config_json(config), backplane::InvalidArgument)
          << "transformers refused it: " << c["error"].get<std::string>();
      continue;
    }
    backplane::ModelDescription description;
    try {
      description = backplane::model_from_config_json(config);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "backplane refused what transformers builds: " << e.what();
      continue;
    }
    const Flat flat = flatten(description);
    expect_same_list(flat.modules, c["modules"], "named_modules");
    expect_same_list(flat.parameters, c["parameters"], "named_parameters");
    expect_same_list(flat.buffers, c["buffers"], "named_buffers");
    EXPECT_EQ(Json(description.no_split_module_classes), c["no_split"]);
    EXPECT_EQ(Json(description.tied_parameters), c["tied"]);
    Json plan = Json::array();
    for (const auto& [pattern, style] : description.tp_plan) plan.push_back({pattern, style});
    expect_same_list(plan, c["tp_plan"], "tp_plan");
  }
}

int64_t element_bytes(const std::string& dtype) {
  return backplane::dtype_bits(backplane::parse_dtype(dtype)) / 8;
}

// Against transformers' own apply_tensor_parallelism on a fake process group: the styles of
// its expanded plan, and the local shape of every parameter on every rank.
TEST_F(Differential, TensorParallelPlanMatchesTransformers) {
  int compared = 0;
  int uneven = 0;
  for (const Json& c : oracle()["cases"]) {
    if (!c.contains("tp")) continue;
    const std::string config = c["config"].get<std::string>();
    backplane::ModelDescription description;
    try {
      description = backplane::model_from_config_json(config);
    } catch (const std::exception& e) {
      ADD_FAILURE() << c["name"].get<std::string>() << ": " << e.what();
      continue;
    }
    const int64_t intermediate = description.hyperparameters.at("intermediate_size");
    const int64_t vocab = description.hyperparameters.at("vocab_size");
    std::map<std::string, std::string> dtypes;
    for (const Json& p : c["parameters"]) dtypes[p[0].get<std::string>()] = p[2].get<std::string>();
    for (const auto& [size_text, expected] : c["tp"].items()) {
      const int tp_size = std::stoi(size_text);
      SCOPED_TRACE(c["name"].get<std::string>() + " tp_size " + size_text + " " + config);
      const bool even = intermediate % tp_size == 0 && vocab % tp_size == 0;
      if (!even) {
        // Refused by default, naming the number and the tp size; planned when allowed.
        try {
          backplane::plan_tensor_parallel(description, tp_size);
          ADD_FAILURE() << "an uneven split was not refused";
        } catch (const backplane::InvalidArgument& e) {
          const std::string message = e.what();
          EXPECT_NE(message.find("tp_size " + size_text), std::string::npos) << message;
          EXPECT_NE(message.find(intermediate % tp_size != 0 ? "intermediate_size" : "vocab_size"),
                    std::string::npos)
              << message;
        }
        ++uneven;
      }
      backplane::TensorParallelOptions options;
      options.allow_uneven_shards = !even;
      const backplane::TensorParallelPlan plan =
          backplane::plan_tensor_parallel(description, tp_size, options);
      ++compared;

      // Styles: transformers' expanded plan lists each ruled module and its parameters.
      std::map<std::string, std::string> ours;
      std::map<std::string, std::vector<std::vector<int64_t>>> local_shapes;
      for (const backplane::TensorParallelModule& module : plan.modules) {
        if (!module.style.empty()) ours[module.name] = module.style;
        for (const backplane::TensorShard& shard : module.parameters) {
          const std::string name = qualified(module.name, shard.name);
          if (!module.style.empty()) ours[name] = module.style;
          local_shapes[name] = shard.rank_shapes;
        }
      }
      std::map<std::string, std::string> theirs;
      for (const Json& entry : expected["expanded"]) {
        const std::string name = entry[0].get<std::string>();
        // Built untied, as from_pretrained distributes before tying: a tied parameter is
        // listed under lm_head too; our tree lists it once, under embed_tokens.
        if (name == "lm_head.weight" && !description.tied_parameters.empty()) continue;
        theirs[name] = entry[1].get<std::string>();
      }
      EXPECT_EQ(Json(ours), Json(theirs));

      ASSERT_EQ(static_cast<int>(expected["ranks"].size()), tp_size);
      ASSERT_EQ(static_cast<int>(plan.rank_parameter_bytes.size()), tp_size);
      for (int rank = 0; rank < tp_size; ++rank) {
        int64_t bytes = 0;
        const Json& shapes = expected["ranks"][static_cast<size_t>(rank)];
        EXPECT_EQ(shapes.size(), local_shapes.size()) << "parameters on rank " << rank;
        for (const Json& entry : shapes) {
          const std::string name = entry[0].get<std::string>();
          const auto found = local_shapes.find(name);
          if (found == local_shapes.end()) {
            ADD_FAILURE() << "rank " << rank << ": no parameter " << name;
            continue;
          }
          EXPECT_EQ(Json(found->second[static_cast<size_t>(rank)]), entry[1])
              << name << " on rank " << rank;
          int64_t numel = 1;
          for (const Json& dim : entry[1]) numel *= dim.get<int64_t>();
          bytes += numel * element_bytes(dtypes.at(name));
        }
        EXPECT_EQ(plan.rank_parameter_bytes[static_cast<size_t>(rank)], bytes) << "rank " << rank;
      }
    }
  }
  EXPECT_GE(compared, 30);
  EXPECT_GE(uneven, 5);
}

}  // namespace
