// plan_device_map: from_pretrained()'s handling of a device_map value, end to end.
#include <backplane/device_map.hpp>
#include <backplane/error.hpp>
#include <backplane/runtime.hpp>

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "planner.hpp"

namespace backplane {
namespace {

MaxMemory whole_bytes(const planner::Budgets& budgets) {
  MaxMemory memory;
  for (const auto& [device, bytes] : budgets) {
    memory.set(device, bytes > 0 ? static_cast<uint64_t>(std::floor(bytes)) : 0);
  }
  return memory;
}

DevicePlacement& placement_for(DevicePlan& plan, const DeviceMapTarget& target) {
  for (DevicePlacement& p : plan.placed) {
    if (p.device.str() == target.str()) return p;
  }
  plan.placed.push_back(DevicePlacement{target, 0, {}});
  return plan.placed.back();
}

// A strategy: balance (or not), place, clean.
void plan_strategy(const planner::ModelTree& tree, const PlanStrategy& strategy,
                   const std::optional<MaxMemory>& max_memory, const PlanHardware& hardware,
                   DevicePlan& plan) {
  const planner::Budgets budgets =
      strategy.kind == DeviceMapKind::kSequential
          ? planner::get_max_memory(max_memory, hardware, tree.rules())
          : planner::get_balanced_memory(tree, max_memory, hardware,
                                         strategy.kind == DeviceMapKind::kBalancedLow0);
  const planner::Placement placement = planner::infer_auto_device_map(tree, budgets);
  const std::vector<std::pair<int, int>> cleaned =
      planner::clean_device_map(tree, placement.assigned);

  plan.max_memory = whole_bytes(budgets);
  std::vector<uint64_t> bytes(placement.devices.size(), 0);
  std::vector<bool> used(placement.devices.size(), false);
  for (const auto& [id, device] : placement.assigned) {
    bytes[device] += tree.node(id).size;
    used[device] = true;
  }
  std::vector<std::vector<std::string>> modules(placement.devices.size());
  for (const auto& [id, device] : cleaned) {
    plan.device_map.emplace_back(tree.node(id).name, placement.devices[device].target());
    modules[device].push_back(tree.node(id).name);
  }
  for (size_t d = 0; d < placement.devices.size(); ++d) {
    if (!used[d]) continue;
    plan.placed.push_back(
        DevicePlacement{placement.devices[d].target(), bytes[d], std::move(modules[d])});
  }
}

// A device, an index or an explicit map: placed as given. Like Accelerate's check_device_map,
// every parameter and persistent buffer must fall under a key.
void plan_given(const planner::ModelTree& tree, const PlanStrategy& strategy,
                const std::optional<MaxMemory>& max_memory, const PlanHardware& hardware,
                DevicePlan& plan) {
  plan.max_memory = whole_bytes(planner::get_max_memory(max_memory, hardware, tree.rules()));
  plan.device_map = strategy.modules;
  std::unordered_map<std::string, size_t> keys;
  for (size_t i = 0; i < strategy.modules.size(); ++i) keys.emplace(strategy.modules[i].first, i);
  for (const auto& [name, target] : strategy.modules)
    placement_for(plan, target).modules.push_back(name);

  const std::vector<planner::Node>& nodes = tree.nodes();
  std::vector<int> key_of(nodes.size(), -1);  // the deepest key at or above each node
  std::string uncovered;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto it = keys.find(nodes[i].name);
    if (it != keys.end()) {
      key_of[i] = static_cast<int>(it->second);
    } else if (nodes[i].parent >= 0) {
      key_of[i] = key_of[nodes[i].parent];
    }
    if (!nodes[i].tensor) continue;
    if (key_of[i] >= 0) {
      placement_for(plan, strategy.modules[key_of[i]].second).bytes += nodes[i].size;
      continue;
    }
    const bool in_state_dict = !nodes[i].buffer || nodes[i].persistent;
    if (in_state_dict) uncovered += (uncovered.empty() ? "" : ", ") + nodes[i].name;
  }
  if (!uncovered.empty()) {
    throw InvalidArgument(
        "The device_map provided does not give any device for the following parameters: " +
        uncovered);
  }
}

const char* const kAcceleratorOrder[] = {"npu", "mlu", "sdaa", "musa",
                                         "xpu", "hpu", "cuda", "rocm"};

uint64_t free_memory(const Runtime& runtime, const DeviceInfo& info) {
  if (const std::optional<MemoryInfo> memory = runtime.memory_info(info.device)) {
    return memory->free_bytes;
  }
  return info.memory_total;
}

}  // namespace

PlanHardware plan_hardware(const Runtime& runtime) {
  PlanHardware hardware;
  auto usable = [&](const std::string& type) {
    const BackendInfo* backend = runtime.backend(type);
    return backend != nullptr && backend->available && backend->automatic_placement &&
           backend->replaced_by.empty() && !runtime.devices(type).empty();
  };
  std::vector<std::string> order(std::begin(kAcceleratorOrder), std::end(kAcceleratorOrder));
  // Other accelerator types a plugin declares for automatic placement, in load order; mps last.
  for (const BackendInfo& b : runtime.backends()) {
    if (b.accelerator && b.type != "mps" &&
        std::find(order.begin(), order.end(), b.type) == order.end()) {
      order.push_back(b.type);
    }
  }
  order.push_back("mps");
  for (const std::string& type : order) {
    if (!usable(type)) continue;
    hardware.accelerator_type = type;
    for (const DeviceInfo& info : runtime.devices(type)) {
      hardware.accelerators.push_back(
          PlanAccelerator{info.device.index().value_or(0), free_memory(runtime, info)});
      hardware.unified_memory =
          hardware.unified_memory || (type == "cuda" && info.has(kCapUnifiedMemory));
    }
    break;
  }
  const std::vector<DeviceInfo> cpus = runtime.devices("cpu");
  if (!cpus.empty()) hardware.cpu_available = free_memory(runtime, cpus.front());
  return hardware;
}

DevicePlan plan_device_map(const ModelDescription& model, const PlanStrategy& strategy,
                           const std::optional<MaxMemory>& max_memory, std::optional<DType> dtype,
                           const PlanHardware& hardware, PlanRules rules) {
  const planner::ModelTree tree(model, dtype, rules);
  DevicePlan plan;
  plan.model_size = tree.model_size();
  plan.accelerator_type = hardware.accelerator_type;
  if (strategy.is_strategy()) {
    plan_strategy(tree, strategy, max_memory, hardware, plan);
  } else {
    if (strategy.modules.empty()) {
      throw InvalidArgument("device_map " + strategy.str() + " names no module");
    }
    plan_given(tree, strategy, max_memory, hardware, plan);
  }
  return plan;
}

DevicePlan plan_device_map(const ModelDescription& model, const PlanStrategy& strategy,
                           const std::optional<MaxMemory>& max_memory, std::optional<DType> dtype,
                           const Runtime& runtime, PlanRules rules) {
  return plan_device_map(model, strategy, max_memory, dtype, plan_hardware(runtime), rules);
}

}  // namespace backplane
