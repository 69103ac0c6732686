// estimate_memory: accelerate 1.15's estimate-memory numbers (calculate_maximum_sizes on the
// float32 model AutoModel builds, estimate_training_usage, the dtype divisors), the training
// anatomy beside them, and how each size compares with a machine's free memory.
#include <backplane/error.hpp>
#include <backplane/model/memory_estimate.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <utility>

#include "auto_models_data.hpp"  // generated: kAutoModelsJson

namespace backplane {
namespace {

using Json = nlohmann::json;

// auto_models.json (tests/python/auto_models.py): where AutoModel's tree sits in the causal LM's.
const Json& auto_models() {
  static const Json models = Json::parse(kAutoModelsJson).at("models");
  return models;
}

// accelerate's dtype_byte_size on the float32 model: floating tensors 4 bytes (from_config
// builds them in float32; float8 keeps 1), bool 1/8, others their bits / 8.
double element_bytes(DType dtype) {
  if (dtype == DType::kBool) return 1.0 / 8.0;
  if (is_float8(dtype)) return 1.0;
  if (is_floating_point(dtype)) return 4.0;
  return dtype_bits(dtype) / 8;
}

struct Sized {
  double bytes = 0;
  uint64_t parameters = 0;
};

Sized tensor_size(const TensorInfo& t) {
  const auto numel = static_cast<uint64_t>(t.numel());
  return {static_cast<double>(numel) * element_bytes(t.dtype), t.buffer ? 0 : numel};
}

Sized module_size(const Module& m) {
  Sized s;
  for (const TensorInfo& t : m.tensors) {
    const Sized ts = tensor_size(t);
    s.bytes += ts.bytes;
    s.parameters += ts.parameters;
  }
  for (const Module& child : m.children) {
    const Sized cs = module_size(child);
    s.bytes += cs.bytes;
    s.parameters += cs.parameters;
  }
  return s;
}

// get_max_layer_size's walk: a module without children, or of a no-split class, is a layer;
// other modules give way to their children (their own tensors are not layers then).
struct LargestLayer {
  double bytes = 0;
  std::string name;
  void offer(double size, const std::string& layer) {
    if (size > bytes) {  // the first of equal sizes keeps the name, as Python's list does
      bytes = size;
      name = layer;
    }
  }
};

std::string joined(const std::string& parent, const std::string& local) {
  return parent.empty() ? local : parent + "." + local;
}

void walk_layers(const Module& m, const std::string& name, const std::vector<std::string>& no_split,
                 LargestLayer& largest) {
  const bool unsplit = m.children.empty() ||
                       std::find(no_split.begin(), no_split.end(), m.class_name) != no_split.end();
  if (unsplit) {
    largest.offer(module_size(m).bytes, name);
    return;
  }
  for (const Module& child : m.children)
    walk_layers(child, joined(name, child.name), no_split, largest);
}

// The model estimate-memory sizes: AutoModel's part of the tree, and its no-split classes.
struct Sizing {
  Module root;
  std::string model_class;
  std::vector<std::string> no_split;
  bool known = false;
  Sized separate;  // tied parameters estimate-memory's build holds apart (counted again)
};

// The tensor `qualified` ("model.embed_tokens.weight") of the tree, or nullptr.
const TensorInfo* find_tensor(const Module& root, const std::string& qualified) {
  const size_t dot = qualified.rfind('.');
  const Module* owner =
      dot == std::string::npos ? &root : find_module(root, qualified.substr(0, dot));
  if (!owner) return nullptr;
  const std::string local = dot == std::string::npos ? qualified : qualified.substr(dot + 1);
  for (const TensorInfo& t : owner->tensors) {
    if (t.name == local) return &t;
  }
  return nullptr;
}

// AutoModel's parameter `name` (relative to the prefix) that the tree shares with another: the
// tensor it shares storage with, as the tree holds it.
const TensorInfo* shared_tensor(const ModelDescription& model, const std::string& qualified) {
  for (const std::vector<std::string>& group : model.tied_parameters) {
    if (std::find(group.begin(), group.end(), qualified) == group.end()) continue;
    for (const std::string& member : group) {
      if (const TensorInfo* t = find_tensor(model.root, member)) return t;
    }
  }
  return nullptr;
}

// The whole tree, when AutoModel's part of it is not known.
Sizing whole_tree(const ModelDescription& model) {
  Sizing s;
  s.root = model.root;
  s.model_class = model.architecture;
  s.no_split = model.no_split_module_classes;
  return s;
}

Sizing model_to_size(const ModelDescription& model) {
  if (!model.from_config) return whole_tree(model);
  const auto it = auto_models().find(model.model_type);
  if (it == auto_models().end()) return whole_tree(model);
  Sizing s;
  s.root = model.root;
  const std::string prefix = it->at("prefix");
  if (!prefix.empty()) {
    const Module* base = find_module(model.root, prefix);
    if (!base) return whole_tree(model);
    s.root = *base;
  } else if (it->contains("without")) {
    const std::vector<std::string> without = it->at("without");
    auto& kids = s.root.children;
    kids.erase(std::remove_if(kids.begin(), kids.end(),
                              [&](const Module& c) {
                                return std::find(without.begin(), without.end(), c.name) !=
                                       without.end();
                              }),
               kids.end());
  }
  for (const std::string& name : it->value("separate", std::vector<std::string>{})) {
    const TensorInfo* t = shared_tensor(model, prefix.empty() ? name : prefix + "." + name);
    if (!t) return whole_tree(model);  // not the tie the table was written for
    const Sized ts = tensor_size(*t);
    s.separate.bytes += ts.bytes;
    s.separate.parameters += ts.parameters;
  }
  s.model_class = it->at("class");
  s.no_split = it->at("no_split_modules").get<std::vector<std::string>>();
  s.known = true;
  return s;
}

// Free memory as Accelerate's get_max_memory reads it: the accelerators', then host RAM.
Fit fit_of(double bytes, const PlanHardware& hw) {
  uint64_t largest = 0, all = 0;
  for (const PlanAccelerator& a : hw.accelerators) {
    largest = std::max(largest, a.free_bytes);
    all += a.free_bytes;
  }
  if (hw.accelerators.empty()) {
    return bytes <= static_cast<double>(hw.cpu_available) ? Fit::kWhole : Fit::kNone;
  }
  if (bytes <= static_cast<double>(largest)) return Fit::kWhole;
  if (bytes <= static_cast<double>(all)) return Fit::kSplit;
  const uint64_t host = hw.unified_memory ? 0 : hw.cpu_available;
  if (bytes <= static_cast<double>(all + host)) return Fit::kCpuOffload;
  return Fit::kNone;
}

// accelerate's --dtypes: each name and what gather_data divides the float32 sizes by.
struct EstimateDTypeInfo {
  EstimateDType dtype;
  const char* name;
  double divisor;
};
constexpr EstimateDTypeInfo kEstimateDTypes[] = {{EstimateDType::kFloat32, "float32", 1},
                                                 {EstimateDType::kFloat16, "float16", 2},
                                                 {EstimateDType::kInt8, "int8", 4},
                                                 {EstimateDType::kInt4, "int4", 8}};

const EstimateDTypeInfo& info_of(EstimateDType dtype) {
  for (const EstimateDTypeInfo& info : kEstimateDTypes) {
    if (info.dtype == dtype) return info;
  }
  return kEstimateDTypes[0];  // unreachable: every enumerator is in the table
}

}  // namespace

EstimateDType parse_estimate_dtype(std::string_view text) {
  for (const EstimateDTypeInfo& info : kEstimateDTypes) {
    if (text == info.name) return info.dtype;
  }
  throw InvalidArgument("dtype '" + std::string(text) +
                        "' is not one accelerate estimate-memory takes: choose from 'float32', "
                        "'float16', 'int8', 'int4'");
}

const char* to_string(EstimateDType dtype) {
  return info_of(dtype).name;
}

const char* to_string(Fit fit) {
  switch (fit) {
    case Fit::kWhole:
      return "whole";
    case Fit::kSplit:
      return "split";
    case Fit::kCpuOffload:
      return "cpu offload";
    case Fit::kNone:
      return "no";
  }
  return "?";
}

MemoryEstimate estimate_memory(const ModelDescription& model,
                               const std::vector<EstimateDType>& dtypes,
                               const PlanHardware& hardware) {
  const Sizing sizing = model_to_size(model);
  MemoryEstimate e;
  e.model_class = sizing.model_class;
  e.base_model_known = sizing.known;
  const Sized total = module_size(sizing.root);
  e.total_bytes = total.bytes + sizing.separate.bytes;
  e.parameters = total.parameters + sizing.separate.parameters;
  // calculate_maximum_sizes starts from the root's own parameters, children, then buffers.
  LargestLayer largest;
  for (const TensorInfo& t : sizing.root.tensors) {
    if (!t.buffer) largest.offer(tensor_size(t).bytes, t.name);
  }
  for (const Module& child : sizing.root.children)
    walk_layers(child, child.name, sizing.no_split, largest);
  for (const TensorInfo& t : sizing.root.tensors) {
    if (t.buffer) largest.offer(tensor_size(t).bytes, t.name);
  }
  e.largest_layer_bytes = largest.bytes;
  e.largest_layer = largest.name;

  const double fp32 = e.total_bytes;
  for (EstimateDType dtype : dtypes) {
    EstimateRow row;
    row.dtype = dtype;
    row.total = e.total_bytes / info_of(dtype).divisor;
    row.largest_layer = e.largest_layer_bytes / info_of(dtype).divisor;
    row.inference_fit = fit_of(row.total, hardware);
    if (dtype == EstimateDType::kFloat32 || dtype == EstimateDType::kFloat16) {
      // estimate_training_usage's peak: the optimizer step, 4x (float32) or 2x (float16) the
      // float32 size (its float16 "step" equals the optimizer states alone).
      row.training_adam = dtype == EstimateDType::kFloat32 ? 4 * fp32 : 2 * fp32;
      TrainingParts parts;
      parts.weights = dtype == EstimateDType::kFloat32 ? fp32 : fp32 * 1.5;
      parts.gradients = fp32;
      parts.optimizer = 2 * fp32;
      row.training = parts;
      row.training_fit = fit_of(parts.total(), hardware);
    }
    e.rows.push_back(row);
  }
  return e;
}

}  // namespace backplane
