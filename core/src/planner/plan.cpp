// plan_device_map: from_pretrained()'s handling of a device_map value, end to end.
#include <backplane/error.hpp>
#include <backplane/model/device_map.hpp>
#include <backplane/runtime/runtime.hpp>

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

// "cuda:0" for an index of the accelerator type; other targets as they print.
std::string label_of(const DeviceMapTarget& target, const std::string& accelerator_type) {
  if (target.kind == DeviceMapTarget::Kind::kIndex && !accelerator_type.empty()) {
    return accelerator_type + ":" + std::to_string(target.index);
  }
  return target.str();
}

DevicePlacement& placement_for(DevicePlan& plan, const DeviceMapTarget& target) {
  for (DevicePlacement& p : plan.placed) {
    if (p.device.str() == target.str()) return p;
  }
  plan.placed.push_back(DevicePlacement{target, label_of(target, plan.accelerator_type), 0, {}});
  return plan.placed.back();
}

// A strategy: balance (or not), place, clean.
// `factor`: the quantizer's adjust_max_memory, on every budget after balancing.
void plan_strategy(const planner::ModelTree& tree, const PlanStrategy& strategy,
                   const std::optional<MaxMemory>& max_memory, const PlanHardware& hardware,
                   double factor, DevicePlan& plan) {
  planner::Budgets budgets =
      strategy.kind == DeviceMapKind::kSequential
          ? planner::get_max_memory(max_memory, hardware, tree.rules())
          : planner::get_balanced_memory(tree, max_memory, hardware,
                                         strategy.kind == DeviceMapKind::kBalancedLow0);
  if (factor != 1.0) {
    for (auto& entry : budgets) entry.second *= factor;
  }
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
    const DeviceMapTarget target = placement.devices[d].target();
    plan.placed.push_back(DevicePlacement{target, label_of(target, plan.accelerator_type), bytes[d],
                                          std::move(modules[d])});
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
  std::vector<bool> key_used(strategy.modules.size(), false);
  std::vector<std::string> uncovered;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto it = keys.find(nodes[i].name);
    if (it != keys.end()) {
      key_of[i] = static_cast<int>(it->second);
      key_used[it->second] = true;
    } else if (nodes[i].parent >= 0) {
      key_of[i] = key_of[nodes[i].parent];
    }
    if (!nodes[i].tensor) continue;
    if (key_of[i] >= 0) {
      placement_for(plan, strategy.modules[key_of[i]].second).bytes += nodes[i].size;
      continue;
    }
    const bool in_state_dict = !nodes[i].buffer || nodes[i].persistent;
    if (in_state_dict) uncovered.push_back(nodes[i].name);
  }
  if (!uncovered.empty()) {
    // Accelerate lists every one; a whole model's names help nobody, so the first few and a count.
    constexpr size_t kNamed = 5;
    std::string named;
    for (size_t i = 0; i < std::min(kNamed, uncovered.size()); ++i) {
      named += (named.empty() ? "" : ", ") + uncovered[i];
    }
    throw InvalidArgument(
        "The device_map provided does not give any device for the following parameters: " + named +
        (uncovered.size() > kNamed ? " (and " + std::to_string(uncovered.size() - kNamed) +
                                         " more; " + std::to_string(uncovered.size()) + " in all)"
                                   : std::string()) +
        "; give their modules a device, or \"\" for everything the map does not name");
  }
  // transformers takes keys that name nothing and ignores them; the plan says so.
  for (size_t k = 0; k < strategy.modules.size(); ++k) {
    if (key_used[k]) continue;
    plan.notes.push_back("device_map entry '" + strategy.modules[k].first +
                         "' names no module or parameter of the model; transformers ignores it");
  }
}

// An accelerator index, or a device of the accelerator type, that the hardware lacks.
void check_accelerator_targets(const PlanStrategy& strategy, const PlanHardware& hardware) {
  if (strategy.is_strategy()) return;
  if (hardware.accelerator_type.empty()) {
    for (const auto& [module, target] : strategy.modules) {
      if (target.kind != DeviceMapTarget::Kind::kIndex) continue;
      throw InvalidArgument(
          "device_map names accelerator " + std::to_string(target.index) +
          (strategy.kind == DeviceMapKind::kExplicit ? " for '" + module + "'" : std::string()) +
          ", but there is no accelerator that automatic placement covers; "
          "name the device instead (e.g. 'cpu')");
    }
    return;
  }
  std::string present;
  for (const PlanAccelerator& a : hardware.accelerators) {
    present +=
        (present.empty() ? "" : ", ") + hardware.accelerator_type + ":" + std::to_string(a.index);
  }
  for (const auto& [module, target] : strategy.modules) {
    int index = -1;
    if (target.kind == DeviceMapTarget::Kind::kIndex) {
      index = target.index;
    } else if (target.kind == DeviceMapTarget::Kind::kDevice &&
               target.device.type() == hardware.accelerator_type) {
      index = target.device.index().value_or(0);
    } else {
      continue;
    }
    const bool found = std::any_of(hardware.accelerators.begin(), hardware.accelerators.end(),
                                   [&](const PlanAccelerator& a) { return a.index == index; });
    if (found) continue;
    const std::string where = strategy.kind == DeviceMapKind::kExplicit
                                  ? "device_map entry '" + module + "'"
                                  : "device_map='" + strategy.str() + "'";
    throw InvalidArgument(where + ": '" + hardware.accelerator_type + ":" + std::to_string(index) +
                          "' does not exist; " + hardware.accelerator_type + " has " + present);
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
      hardware.accelerators.push_back(PlanAccelerator{
          info.device.index().value_or(0), free_memory(runtime, info), info.compute_capability});
      hardware.unified_memory =
          hardware.unified_memory || (type == "cuda" && info.has(kCapUnifiedMemory));
    }
    break;
  }
  const std::vector<DeviceInfo> cpus = runtime.devices("cpu");
  if (!cpus.empty()) hardware.cpu_available = free_memory(runtime, cpus.front());
  return hardware;
}

namespace {

// Planning proper, for a model without a quantizer (or one already swapped).
DevicePlan plan_swapped(const ModelDescription& model, const PlanStrategy& strategy,
                        const PlanHardware& hardware, const PlanOptions& options,
                        double max_memory_factor) {
  const planner::ModelTree tree(model, options.dtype, options.rules);
  DevicePlan plan;
  plan.model_size = tree.model_size();
  plan.accelerator_type = hardware.accelerator_type;
  if (strategy.is_strategy()) {
    plan_strategy(tree, strategy, options.max_memory, hardware, max_memory_factor, plan);
  } else {
    if (strategy.modules.empty()) {
      throw InvalidArgument("device_map " + strategy.str() + " names no module");
    }
    plan_given(tree, strategy, options.max_memory, hardware, plan);
  }
  if (tree.uncounted_tied_bytes() > 0) {
    plan.notes.push_back(
        "transformers counts a tied weight of " + std::to_string(tree.uncounted_tied_bytes()) +
        " bytes nowhere (its tied name comes first in the model, and compute_module_sizes skips "
        "tied names), so its budgets are that much short; this plan does as from_pretrained "
        "does");
  }
  if (tree.upcast()) {
    const std::string name = to_string(*options.dtype);
    plan.notes.push_back(
        "load_checkpoint_and_dispatch(dtype=" + name + ") converts the weights to " + name +
        " as it loads them, but Accelerate's infer_auto_device_map counts each at the smaller of " +
        name +
        " and the model's own dtype, so the map it computes overfills its devices; this "
        "plan sizes the weights as they are loaded, and its map can differ from Accelerate's");
  }
  return plan;
}

}  // namespace

DevicePlan plan_device_map(const ModelDescription& model, const PlanStrategy& strategy,
                           const PlanHardware& hardware, const PlanOptions& options) {
  check_accelerator_targets(strategy, hardware);
  if (model.quantization) {
    const planner::QuantizedLoad load =
        planner::prepare_quantized_load(model, strategy, hardware, options);
    PlanOptions swapped_options = options;
    swapped_options.dtype.reset();  // the swapped model is built in it already
    DevicePlan plan = plan_swapped(load.model, strategy, hardware, swapped_options,
                                   load.summary.max_memory_factor);
    if (strategy.is_strategy()) planner::check_quantized_map(load.config, plan.device_map, true);
    plan.quantized = load.summary;
    plan.quantized->unquantized_size =
        planner::ModelTree(model, options.dtype, options.rules).model_size();
    plan.warnings.insert(plan.warnings.end(), load.warnings.begin(), load.warnings.end());
    plan.notes.insert(plan.notes.end(), load.notes.begin(), load.notes.end());
    return plan;
  }
  return plan_swapped(model, strategy, hardware, options, 1.0);
}

DevicePlan plan_device_map(const ModelDescription& model, const PlanStrategy& strategy,
                           const Runtime& runtime, const PlanOptions& options) {
  if (!strategy.is_strategy()) {
    // The devices a map names must be here, as from_pretrained finds when it moves the weights
    // there; selection refuses the same values with the same words.
    try {
      select_inference_device(runtime, strategy);
    } catch (const NotFound& e) {
      throw InvalidArgument(e.what());
    } catch (const Unavailable& e) {
      throw InvalidArgument(e.what());
    }
  }
  return plan_device_map(model, strategy, plan_hardware(runtime), options);
}

}  // namespace backplane
