// get_balanced_memory: caps every accelerator but the last near model_size / n so that "auto"
// and "balanced" spread the model instead of filling accelerator 0 first.
#include <backplane/error.hpp>

#include <algorithm>
#include <unordered_map>

#include "planner.hpp"

namespace backplane::planner {
namespace {

// The headroom added to model_size / n. transformers: the largest no-split block or the largest
// module's own tensors. Accelerate: the first no-split block of each class (in module_sizes key
// order) or the mean size of the leaf modules.
uint64_t buffer_size(const ModelTree& tree) {
  const std::vector<Node>& nodes = tree.nodes();
  uint64_t block = 0;
  if (tree.rules() == PlanRules::kFromPretrained) {
    uint64_t leaf = 0;
    for (size_t i = 1; i < nodes.size(); ++i) {
      const Node& n = nodes[i];
      if (n.tensor) continue;
      if (n.no_split) block = std::max(block, n.size);
      if (n.has_own_counted) leaf = std::max(leaf, n.own_size);
    }
    return static_cast<uint64_t>(1.25 * static_cast<double>(std::max(block, leaf)));
  }
  // First keyed module of each no-split class: smallest first_key; on a tie (a chain of
  // ancestors over the same first tensor) the ancestor, which has the smaller id.
  std::unordered_map<std::string, int> first_of_class;
  uint64_t leaves_sum = 0;
  uint64_t leaves = 0;
  for (size_t i = 1; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    if (n.tensor || !n.keyed) continue;
    if (n.no_split) {
      auto [it, inserted] = first_of_class.emplace(n.module->class_name, static_cast<int>(i));
      if (!inserted && n.first_key < nodes[it->second].first_key) it->second = static_cast<int>(i);
    }
    // A leaf once the tensors are gone from module_sizes: no child module has a key.
    bool keyed_child = false;
    for (int c = n.split_begin; c < n.split_end && !keyed_child; ++c) {
      const Node& child = nodes[tree.split_children()[c]];
      keyed_child = !child.tensor && child.keyed;
    }
    if (!keyed_child) {
      leaves_sum += n.size;
      ++leaves;
    }
  }
  for (const auto& entry : first_of_class) block = std::max(block, nodes[entry.second].size);
  const auto mean = static_cast<uint64_t>(static_cast<double>(leaves_sum) /
                                          static_cast<double>(std::max<uint64_t>(leaves, 1)));
  return static_cast<uint64_t>(1.25 * static_cast<double>(std::max(block, mean)));
}

}  // namespace

Budgets get_balanced_memory(const ModelTree& tree, const std::optional<MaxMemory>& given,
                            const PlanHardware& hardware, bool low_zero) {
  const PlanRules rules = tree.rules();
  Budgets budgets = get_max_memory(given, hardware, rules);
  // transformers counts every key but cpu and disk; Accelerate counts the integers, and mps on a
  // machine whose accelerator is mps (it resolves keys with torch.device, and a "disk" key makes
  // that raise: we count it out instead).
  int64_t n = 0;
  for (const auto& [device, bytes] : budgets) {
    if (bytes <= 0) continue;
    const bool accelerator = device.kind == MemoryDevice::Kind::kAccelerator;
    const bool mps = device.kind == MemoryDevice::Kind::kMps;
    if (rules == PlanRules::kFromPretrained
            ? accelerator || mps
            : accelerator || (mps && hardware.accelerator_type == "mps")) {
      ++n;
    }
  }
  if (n == 0) return budgets;
  if (n == 1) {
    low_zero = false;
    // The user left memory to us: 90% of the one accelerator, 10% for activations.
    if (!given) {
      for (auto& [device, bytes] : budgets) {
        if (device.kind == MemoryDevice::Kind::kAccelerator) {
          bytes *= 0.9;
          break;
        }
      }
    }
  }
  const uint64_t model_size = tree.model_size();
  const uint64_t per_gpu =
      model_size / static_cast<uint64_t>(low_zero ? n - 1 : n) + buffer_size(tree);

  std::vector<int> gpus;
  for (const auto& [device, bytes] : budgets) {
    if (device.kind == MemoryDevice::Kind::kAccelerator && bytes > 0) gpus.push_back(device.index);
  }
  // The last accelerator keeps its whole budget, in case the buffer was not enough.
  for (size_t i = 0; i + 1 < gpus.size(); ++i) {
    double& budget = budgets[MemoryDevice::accelerator(gpus[i])];
    if (!(low_zero && gpus[i] == 0)) budget = std::min(static_cast<double>(per_gpu), budget);
  }
  if (low_zero) {
    auto at = [&](int index) -> double& {
      const auto it = budgets.find(MemoryDevice::accelerator(index));
      if (it == budgets.end()) {
        throw InvalidArgument("balanced_low_0 needs accelerators 0 to " + std::to_string(n - 1) +
                              " in max_memory (Accelerate reads them by index); " +
                              std::to_string(index) + " is missing");
      }
      return it->second;
    };
    double others = 0;
    for (int64_t i = 1; i < n; ++i) others += at(static_cast<int>(i));
    const double min_zero = std::max(0.0, static_cast<double>(model_size) - others);
    double& zero = at(0);
    zero = std::min(min_zero, zero);
  }
  return budgets;
}

}  // namespace backplane::planner
