// The model flattened for planning, with compute_module_sizes' numbers: every module's and
// tensor's bytes, tied weights counted once (under their first name in named_parameters()
// order, which is the name transformers keeps as the tie's source for these models).
#include <backplane/error.hpp>

#include <algorithm>
#include <limits>
#include <unordered_map>
#include <unordered_set>

#include "planner.hpp"

namespace backplane::planner {
namespace {

uint64_t checked_mul(uint64_t a, uint64_t b, const std::string& name) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) {
    throw InvalidArgument("tensor " + name + " is too large to size: its byte count overflows");
  }
  return a * b;
}

uint64_t checked_add(uint64_t a, uint64_t b) {
  if (b > std::numeric_limits<uint64_t>::max() - a) {
    throw InvalidArgument("the model is too large to size: its byte count overflows");
  }
  return a + b;
}

// Bytes per element as the rules count them. from_pretrained builds the model in `dtype`, so
// floating parameters take it; buffers keep the dtype their module gives them.
// load_checkpoint_and_dispatch(dtype=...) converts every floating tensor of the checkpoint
// (parameters and persistent buffers) to `dtype` as it loads it, so those take it too; Accelerate's
// own size override (the min of the two) would count a bfloat16 model's weights at 2 bytes
// although they arrive as float32, and so overfill the devices. Tensors that are not loaded
// (non-persistent buffers) get that override: they only ever shrink. Integers keep their size.
// bool counts 1 byte (torch's element_size; Accelerate's dtype_byte_size says 1/8).
uint64_t element_bytes(const TensorInfo& t, std::optional<DType> dtype, PlanRules rules,
                       bool& upcast) {
  const int own = dtype_bits(t.dtype) / 8;
  if (!dtype || t.explicit_dtype || !is_floating_point(t.dtype)) return static_cast<uint64_t>(own);
  const int wanted = dtype_bits(*dtype) / 8;
  if (rules == PlanRules::kAccelerate) {
    const bool loaded = !t.buffer || t.persistent;
    if (!loaded) return static_cast<uint64_t>(std::min(own, wanted));
    upcast = upcast || wanted > own;
    return static_cast<uint64_t>(wanted);
  }
  return static_cast<uint64_t>(t.buffer ? own : wanted);
}

uint64_t tensor_bytes(const TensorInfo& t, const std::string& name, std::optional<DType> dtype,
                      PlanRules rules, bool& upcast) {
  uint64_t numel = 1;
  for (int64_t d : t.shape) {
    if (d < 0) throw InvalidArgument("tensor " + name + " has a negative dimension");
    numel = checked_mul(numel, static_cast<uint64_t>(d), name);
  }
  // A weight its quantizer quantizes while loading counts its quantized bits (param_element_size);
  // half a byte is rounded up (the plan's notes say when that happened).
  if (t.quantized_bits) {
    return checked_mul(numel, static_cast<uint64_t>(*t.quantized_bits), name) / 8 +
           (numel * static_cast<uint64_t>(*t.quantized_bits) % 8 != 0 ? 1 : 0);
  }
  return checked_mul(numel, element_bytes(t, dtype, rules, upcast), name);
}

std::string join(const std::string& parent, const std::string& local) {
  if (parent.empty()) return local;
  std::string name;
  name.reserve(parent.size() + 1 + local.size());
  name.append(parent).append(1, '.').append(local);
  return name;
}

size_t count_nodes(const Module& module) {
  size_t n = 1 + module.tensors.size();
  for (const Module& child : module.children) n += count_nodes(child);
  return n;
}

}  // namespace

int ModelTree::add(std::string name, int parent, bool tensor, bool buffer, const Module* module) {
  Node node;
  node.name = std::move(name);
  node.parent = parent;
  node.tensor = tensor;
  node.buffer = buffer;
  node.module = module;
  nodes_.push_back(std::move(node));
  return static_cast<int>(nodes_.size() - 1);
}

// Pre-order: a module's own tensors, then its children. Records each module's split list. A
// tied parameter the description lists only once (under its first module, as named_parameters()
// does) is put back under its other modules too, counted zero: Python's modules still hold it.
void ModelTree::visit(const Module& module, int id,
                      std::vector<std::pair<const TensorInfo*, int>>& params,
                      std::vector<std::pair<const TensorInfo*, int>>& buffers) {
  std::vector<int> own_params;
  std::vector<int> own_buffers;
  for (const TensorInfo& t : module.tensors) {
    const int tid = add(join(nodes_[id].name, t.name), id, true, t.buffer, nullptr);
    nodes_[tid].persistent = t.persistent;
    (t.buffer ? own_buffers : own_params).push_back(tid);
    (t.buffer ? buffers : params).emplace_back(&t, tid);
  }
  if (const auto it = tied_by_parent_.find(nodes_[id].name); it != tied_by_parent_.end()) {
    for (const std::string& local : it->second) {
      const bool listed = std::any_of(module.tensors.begin(), module.tensors.end(),
                                      [&](const TensorInfo& t) { return t.name == local; });
      if (listed) continue;
      const int tid = add(join(nodes_[id].name, local), id, true, false, nullptr);
      own_params.push_back(tid);
      params.emplace_back(nullptr, tid);  // its shape comes from the tensor it shares
    }
  }
  std::vector<int> children;
  for (const Module& child : module.children) {
    const int cid = add(join(nodes_[id].name, child.name), id, false, false, &child);
    children.push_back(cid);
    visit(child, cid, params, buffers);
  }
  Node& node = nodes_[id];
  node.has_child_modules = !children.empty();
  node.split_begin = static_cast<int>(split_children_.size());
  split_children_.insert(split_children_.end(), own_params.begin(), own_params.end());
  split_children_.insert(split_children_.end(), children.begin(), children.end());
  node.split_end = static_cast<int>(split_children_.size());
  if (id == 0) {
    initial_entries_ = own_params;
    initial_entries_.insert(initial_entries_.end(), children.begin(), children.end());
    initial_entries_.insert(initial_entries_.end(), own_buffers.begin(), own_buffers.end());
  }
}

ModelTree::ModelTree(const ModelDescription& model, std::optional<DType> dtype, PlanRules rules)
    : model_(&model), rules_(rules) {
  for (const auto& group : model.tied_parameters) {
    for (const std::string& name : group) {
      const size_t dot = name.rfind('.');
      const std::string parent = dot == std::string::npos ? "" : name.substr(0, dot);
      std::vector<std::string>& locals = tied_by_parent_[parent];
      const std::string local = dot == std::string::npos ? name : name.substr(dot + 1);
      if (std::find(locals.begin(), locals.end(), local) == locals.end()) locals.push_back(local);
    }
  }
  std::vector<std::pair<const TensorInfo*, int>> params;
  std::vector<std::pair<const TensorInfo*, int>> buffers;
  const size_t expected = count_nodes(model.root);
  nodes_.reserve(expected + 2 * model.tied_parameters.size());
  split_children_.reserve(expected);
  add("", -1, false, false, &model.root);
  visit(model.root, 0, params, buffers);

  // named_parameters() then named_buffers(): the order Python's module_sizes keys appear in.
  std::vector<int> order;
  order.reserve(params.size() + buffers.size());
  for (const auto& p : params) order.push_back(p.second);
  for (const auto& b : buffers) order.push_back(b.second);
  std::vector<const TensorInfo*> info(nodes_.size(), nullptr);
  for (const auto& p : params) info[p.second] = p.first;
  for (const auto& b : buffers) info[b.second] = b.first;

  // Tied groups: every name must be a tensor; the first one in `order` is counted.
  std::unordered_map<std::string, int> tied_index;
  for (const auto& group : model.tied_parameters) {
    for (const std::string& name : group) tied_index.emplace(name, -1);
  }
  if (!tied_index.empty()) {
    for (int id : order) {
      auto it = tied_index.find(nodes_[id].name);
      if (it != tied_index.end()) it->second = id;
    }
  }
  std::vector<int64_t> position(nodes_.size(), -1);
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = static_cast<int64_t>(i);
  std::vector<bool> counted(nodes_.size(), false);
  for (int id : order) counted[id] = true;
  for (const auto& group : model.tied_parameters) {
    std::vector<int> ids;
    const TensorInfo* shared = nullptr;
    for (const std::string& name : group) {
      const int id = tied_index.at(name);
      if (id < 0) {
        throw InvalidArgument("tied parameter " + name + " is in no module of the model" +
                              (model.architecture.empty() ? "" : " " + model.architecture));
      }
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
      if (info[id] != nullptr) shared = info[id];
    }
    if (shared == nullptr) {
      throw InvalidArgument("tied parameters " + group.front() + ", ... : the model lists none " +
                            "of them as a tensor");
    }
    std::vector<bool> listed(ids.size());  // a tensor of the description, not a placeholder
    for (size_t k = 0; k < ids.size(); ++k) {
      listed[k] = info[ids[k]] != nullptr;
      if (info[ids[k]] == nullptr) info[ids[k]] = shared;
    }
    if (ids.size() < 2) continue;
    if (rules == PlanRules::kFromPretrained && !model.tied_weights_keys.empty()) {
      // transformers' compute_module_sizes skips every tied key (all_tied_weights_keys' targets)
      // that named_parameters() yields, and the source counts only where it is yielded: when a
      // target comes first in definition order, the shared tensor counts nowhere.
      for (size_t k = 0; k < ids.size(); ++k) {
        const bool key = model.tied_weights_keys.count(nodes_[ids[k]].name) > 0;
        counted[ids[k]] = listed[k] && !key;
        if (key && listed[k]) uncounted_tied_bytes_ += static_cast<uint64_t>(shared->nbytes());
      }
    } else {
      const int first = *std::min_element(ids.begin(), ids.end(),
                                          [&](int a, int b) { return position[a] < position[b]; });
      for (int id : ids) {
        if (id != first) counted[id] = false;
      }
    }
    std::sort(ids.begin(), ids.end(),
              [&](int a, int b) { return nodes_[a].name < nodes_[b].name; });
    tied_groups_.push_back(std::move(ids));
  }

  std::unordered_set<std::string> no_split(model.no_split_module_classes.begin(),
                                           model.no_split_module_classes.end());
  // Post-order: children come after their parent in nodes_, so a reverse walk sums bottom-up.
  std::vector<bool> subtree_counted(nodes_.size(), false);
  for (size_t i = nodes_.size(); i-- > 0;) {
    Node& node = nodes_[i];
    if (node.tensor) {
      if (counted[i]) {
        node.size = tensor_bytes(*info[i], node.name, dtype, rules, upcast_);
        node.first_key = position[i];
        subtree_counted[i] = true;
      }
    } else {
      node.no_split = no_split.count(node.module->class_name) > 0;
      if (!node.has_child_modules || node.no_split) {
        node.layer_max = node.size;
        node.layer_count = 1;
      }
    }
    if (node.parent < 0) continue;
    Node& parent = nodes_[node.parent];
    parent.size = checked_add(parent.size, node.size);
    if (node.first_key >= 0 && (parent.first_key < 0 || node.first_key < parent.first_key)) {
      parent.first_key = node.first_key;
    }
    if (subtree_counted[i]) subtree_counted[node.parent] = true;
    if (node.tensor && counted[i]) {
      parent.own_size += node.size;
      parent.has_own_counted = true;
    }
  }
  for (size_t i = 0; i < nodes_.size(); ++i) nodes_[i].keyed = subtree_counted[i];
  // get_max_layer_size over each subtree: an unsplit layer is a module without child modules or
  // of a no-split class; others combine their child modules (parameters never count there).
  for (size_t i = nodes_.size(); i-- > 1;) {
    const Node& node = nodes_[i];
    if (node.tensor) continue;
    Node& parent = nodes_[node.parent];
    if (!parent.has_child_modules || parent.no_split) continue;
    if (node.layer_max > parent.layer_max) {
      parent.layer_max = node.layer_max;
      parent.layer_count = node.layer_count;
    } else if (node.layer_max == parent.layer_max) {
      parent.layer_count += node.layer_count;
    }
  }
}

}  // namespace backplane::planner
