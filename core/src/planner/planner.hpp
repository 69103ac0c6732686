// Internals of device_map planning (device_map.hpp): the model flattened once into a tree of
// modules and tensors with their sizes, and the four steps of Accelerate's placement. No
// compatibility promise; white-box tests use these.
#pragma once

#include <backplane/model/device_map.hpp>
#include <backplane/model/model.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace backplane::planner {

// Budgets as Python holds them: ints, or floats once a 90% factor applied. Doubles hold both
// exactly (sizes stay below 2^53 bytes) and compare with ints as Python compares them.
using Budgets = std::map<MemoryDevice, double>;

struct Node {
  std::string name;  // full name: "model.layers.0.self_attn.q_proj", "lm_head.weight"; "" root
  int parent = -1;
  bool tensor = false;
  bool buffer = false;
  bool persistent = true;          // buffers: in the state dict
  const Module* module = nullptr;  // modules only
  // Bytes of the tensors at and below this node, as module_sizes[name] (0 when Python has no
  // such key: a tied weight counted under its first name, a module without tensors).
  uint64_t size = 0;
  bool has_child_modules = false;
  bool no_split = false;  // class in no_split_module_classes
  // get_max_layer_size over this subtree: the largest unsplit layer and how many have that size.
  uint64_t layer_max = 0;
  int64_t layer_count = 0;
  // What a split puts in its place: named_parameters(recurse=False) + named_children(), as a
  // range of ModelTree::split_children. The root's initial list also has its buffers.
  int split_begin = 0;
  int split_end = 0;
  // Whether Python's module_sizes has this name: a counted tensor at or below it.
  bool keyed = false;
  // Sum of this module's own counted tensors (transformers' leaf module sizes).
  uint64_t own_size = 0;
  bool has_own_counted = false;
  // Position of the first counted tensor below, in named_parameters() then named_buffers()
  // order: the order of Accelerate's module_sizes keys. -1: none.
  int64_t first_key = -1;
};

// The model as the planner walks it. Node 0 is the root. Built in one pre-order pass; sizes in
// one post-order pass.
class ModelTree {
 public:
  ModelTree(const ModelDescription& model, std::optional<DType> dtype, PlanRules rules);

  const std::vector<Node>& nodes() const { return nodes_; }
  const Node& node(int id) const { return nodes_[id]; }
  const std::vector<int>& split_children() const { return split_children_; }
  // The root's entries before any split: params, child modules, buffers.
  const std::vector<int>& initial_entries() const { return initial_entries_; }
  // Groups of tied parameters, each sorted by name (as find_tied_parameters sorts them).
  const std::vector<std::vector<int>>& tied_groups() const { return tied_groups_; }
  uint64_t model_size() const { return nodes_[0].size; }
  PlanRules rules() const { return rules_; }
  const ModelDescription& model() const { return *model_; }
  // kAccelerate with a dtype larger than some loaded weights' own: they were sized as loaded,
  // where Accelerate's override would have kept their smaller size.
  bool upcast() const { return upcast_; }
  // Bytes of tied weights that transformers' sizes count nowhere (a tied key first in
  // definition order, its source not yielded by named_parameters()).
  uint64_t uncounted_tied_bytes() const { return uncounted_tied_bytes_; }

 private:
  int add(std::string name, int parent, bool tensor, bool buffer, const Module* module);
  void visit(const Module& module, int id, std::vector<std::pair<const TensorInfo*, int>>& params,
             std::vector<std::pair<const TensorInfo*, int>>& buffers);

  const ModelDescription* model_;
  PlanRules rules_;
  bool upcast_ = false;
  uint64_t uncounted_tied_bytes_ = 0;
  std::vector<Node> nodes_;
  std::vector<int> split_children_;
  std::vector<int> initial_entries_;
  std::vector<std::vector<int>> tied_groups_;
  // Tied parameter names by the module that holds them: "lm_head" -> {"weight"}.
  std::unordered_map<std::string, std::vector<std::string>> tied_by_parent_;
};

// get_max_memory: the given budgets in Accelerate's order, or the default from `hardware`;
// kFromPretrained adds transformers' 90% of cpu when none were given.
Budgets get_max_memory(const std::optional<MaxMemory>& given, const PlanHardware& hardware,
                       PlanRules rules);

// get_balanced_memory (low_zero for balanced_low_0).
Budgets get_balanced_memory(const ModelTree& tree, const std::optional<MaxMemory>& given,
                            const PlanHardware& hardware, bool low_zero);

// infer_auto_device_map over `budgets`, before cleaning: the entries placed, in placement order.
struct Placement {
  std::vector<MemoryDevice> devices;          // budgets' keys, then disk
  std::vector<std::pair<int, int>> assigned;  // (node, index into devices)
};
Placement infer_auto_device_map(const ModelTree& tree, const Budgets& budgets);

// clean_device_map: subtrees whose keys (two or more) share one device fold into one key.
// In definition order.
std::vector<std::pair<int, int>> clean_device_map(const ModelTree& tree,
                                                  const std::vector<std::pair<int, int>>& assigned);

// The quantizer's part of a load (quantized_load.cpp): the model after its module swap, what the
// plan reports of it, and the config as its environment check left it (fp8 may dequantize).
struct QuantizedLoad {
  ModelDescription model;
  QuantizationConfig config;
  DevicePlan::Quantized summary;
  std::vector<std::string> warnings;  // transformers' own
  std::vector<std::string> notes;     // where this plan may differ from transformers'
};
// validate_environment on the map as given, then preprocess_model. Throws InvalidArgument with
// transformers' message where it refuses.
QuantizedLoad prepare_quantized_load(const ModelDescription& model, const PlanStrategy& strategy,
                                     const PlanHardware& hardware, const PlanOptions& options);
// validate_environment on a device_map: `strings` when its cpu values are Python strings (a dict,
// an inferred map), not torch.device("cpu") (a device given alone).
void check_quantized_map(const QuantizationConfig& config,
                         const std::vector<std::pair<std::string, DeviceMapTarget>>& map,
                         bool strings);

}  // namespace backplane::planner
