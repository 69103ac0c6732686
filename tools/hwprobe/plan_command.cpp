// hwprobe plan: where from_pretrained(device_map=...) would put each module of a model on this
// (or a simulated) machine (core/include/backplane/model/device_map.hpp), or with --tp-size the
// tensor-parallel plan (tensor_parallel.hpp).
#include <backplane/model/device_map.hpp>
#include <backplane/model/model.hpp>
#include <backplane/model/model_source.hpp>
#include <backplane/model/quantization.hpp>
#include <backplane/model/tensor_parallel.hpp>
#include <backplane/rules/selection.hpp>

#include <algorithm>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "text_report.hpp"

namespace po = boost::program_options;

namespace hwprobe {

namespace {

using OrderedJson = nlohmann::ordered_json;

OrderedJson target_json(const backplane::DeviceMapTarget& target) {
  if (target.kind == backplane::DeviceMapTarget::Kind::kIndex) return target.index;
  return target.str();
}

// What use_kernels would give a Hub kernel in this model: one entry per Hub layer name and
// class, with how many of its modules there are.
struct KernelizedClass {
  std::string layer;
  std::string class_name;
  bool function = false;  // a function the class's forward calls (rotary_pos_emb)
  size_t modules = 0;
};

std::vector<KernelizedClass> kernelized_classes(const backplane::ModelDescription& model) {
  std::vector<KernelizedClass> out;
  if (!model.kernel_layers) return out;
  std::map<std::string, size_t> count;
  for (const backplane::NamedModule& m : backplane::named_modules(model.root)) {
    ++count[m.module->class_name];
  }
  for (const auto& [class_name, layer] : model.kernel_layers->layers) {
    out.push_back({layer, class_name, false, count[class_name]});
  }
  for (const auto& [class_name, layers] : model.kernel_layers->functions) {
    for (const std::string& layer : layers)
      out.push_back({layer, class_name, true, count[class_name]});
  }
  return out;
}

OrderedJson kernel_layers_json(const backplane::ModelDescription& model) {
  if (!model.kernel_layers) return nullptr;
  OrderedJson out = OrderedJson::array();
  for (const KernelizedClass& k : kernelized_classes(model)) {
    out.push_back({{"layer", k.layer},
                   {k.function ? "called_in" : "class", k.class_name},
                   {"modules", k.modules}});
  }
  return out;
}

void print_kernel_layers(const backplane::ModelDescription& model) {
  if (!model.kernel_layers) {
    std::cout << "\nuse_kernels layers: not known (the tree was not built by transformers)\n";
    return;
  }
  std::string text;
  for (const KernelizedClass& k : kernelized_classes(model)) {
    text += (text.empty() ? "" : ", ") + k.layer + " (" + (k.function ? "in " : "") + k.class_name +
            " x" + std::to_string(k.modules) + ")";
  }
  std::cout << "\nuse_kernels layers: " << (text.empty() ? "none" : text) << "\n";
}

// Where the model came from, whether its tree is transformers' own, and if not, why.
void add_model_facts(OrderedJson& out, const backplane::ModelDescription& model,
                     const backplane::ModelSource& source) {
  OrderedJson from = {{"kind", backplane::to_string(source.kind)}, {"path", source.path.string()}};
  if (source.hub_id) {
    from["hub_id"] = source.hub_id->repo_id;
    from["revision"] = source.hub_id->revision;
    from["commit"] = source.commit;
  }
  out["model"] = from;
  out["architecture"] = model.architecture;
  out["model_type"] = model.model_type;
  out["exact"] = model.approximate_because.empty();
  out["approximate_because"] = model.approximate_because;
  if (!model.unchecked.empty()) out["unchecked_validators"] = model.unchecked;
  if (!model.warnings.empty()) out["warnings"] = model.warnings;
  out["kernel_layers"] = kernel_layers_json(model);
}

// One line naming the snapshot a Hub id resolved to, so the user sees which files were read.
void print_source(const backplane::ModelSource& source) {
  if (!source.hub_id) return;
  std::cout << source.hub_id->repo_id << " at " << source.hub_id->revision << ": snapshot "
            << source.commit << " (" << backplane::to_string(source.kind) << ")\n";
}

// The model named by MODEL or by one of the --config/--weights/--tree aliases (the caller
// checked that exactly one was given).
backplane::ModelSource chosen_source(const std::vector<std::string>& words,
                                     const std::string& config, const std::string& weights,
                                     const std::string& tree) {
  using backplane::ModelFileKind;
  using backplane::ModelSource;
  if (!config.empty()) return ModelSource{ModelFileKind::kConfig, config, std::nullopt, ""};
  if (!weights.empty()) return ModelSource{ModelFileKind::kWeights, weights, std::nullopt, ""};
  if (!tree.empty()) return ModelSource{ModelFileKind::kTree, tree, std::nullopt, ""};
  return backplane::locate_model(words.front());
}

OrderedJson plan_json(const backplane::DevicePlan& plan) {
  OrderedJson device_map = OrderedJson::object();
  for (const auto& [name, target] : plan.device_map) device_map[name] = target_json(target);
  OrderedJson max_memory = OrderedJson::object();
  for (const auto& [device, bytes] : plan.max_memory.entries()) max_memory[device.str()] = bytes;
  OrderedJson placed = OrderedJson::array();
  for (const backplane::DevicePlacement& p : plan.placed) {
    placed.push_back({{"device", target_json(p.device)},
                      {"label", p.label},
                      {"bytes", p.bytes},
                      {"modules", p.modules}});
  }
  OrderedJson quantization = nullptr;
  if (plan.quantized) {
    const backplane::DevicePlan::Quantized& q = *plan.quantized;
    quantization = {{"method", q.method},
                    {"pre_quantized", q.pre_quantized},
                    {"dequantized", q.dequantized},
                    {"replaced_modules", q.replaced},
                    {"replaced_with", q.replaced_with},
                    {"modules_to_not_convert", q.not_converted},
                    {"max_memory_factor", q.max_memory_factor},
                    {"unquantized_size", q.unquantized_size}};
  }
  return {{"device_map", device_map},
          {"max_memory", max_memory},
          {"model_size", plan.model_size},
          {"quantization", quantization},
          {"load_warnings", plan.warnings},
          {"accelerator_type", plan.accelerator_type.empty() ? OrderedJson(nullptr)
                                                             : OrderedJson(plan.accelerator_type)},
          {"placed", placed},
          {"notes", plan.notes}};
}

// "model.layers.0", ..., "model.layers.9" -> "model.layers.0-9"; other names as they are. The
// key "" is the whole model when it is the only one, and what no other key names otherwise.
std::string compact(const std::vector<std::string>& names, bool only_key = true) {
  std::string out;
  size_t i = 0;
  auto split = [](const std::string& name, std::string& prefix, long& number) {
    const size_t dot = name.rfind('.');
    const std::string last = dot == std::string::npos ? name : name.substr(dot + 1);
    if (last.empty() || last.find_first_not_of("0123456789") != std::string::npos ||
        last.size() > 9) {
      return false;
    }
    prefix = dot == std::string::npos ? "" : name.substr(0, dot + 1);
    number = std::stol(last);
    return true;
  };
  while (i < names.size()) {
    std::string prefix;
    long first = 0;
    size_t j = i + 1;
    if (split(names[i], prefix, first)) {
      long last = first;
      std::string next_prefix;
      long next = 0;
      while (j < names.size() && split(names[j], next_prefix, next) && next_prefix == prefix &&
             next == last + 1) {
        last = next;
        ++j;
      }
      out += (out.empty() ? "" : ", ") + prefix + std::to_string(first) +
             (last > first ? "-" + std::to_string(last) : "");
    } else {
      const std::string root = only_key ? "(whole model)" : "(the rest of the model)";
      out += (out.empty() ? "" : ", ") + (names[i].empty() ? root : names[i]);
    }
    i = j;
  }
  return out;
}

// "model.layers.0.mlp.up_proj" ... "model.layers.79.mlp.up_proj" ->
// "model.layers.0-79.mlp.up_proj": names that differ only in their first numeric component, grouped
// in first-seen order.
std::string compact_by_layer(const std::vector<std::string>& names) {
  std::vector<std::pair<std::string, std::vector<std::string>>> groups;  // pattern -> numbers
  for (const std::string& name : names) {
    std::string pattern = name, number;
    size_t start = 0;
    while (start < name.size()) {
      const size_t end = std::min(name.find('.', start), name.size());
      const std::string part = name.substr(start, end - start);
      if (!part.empty() && part.size() <= 9 &&
          part.find_first_not_of("0123456789") == std::string::npos) {
        pattern = name.substr(0, start) + "{}" + name.substr(end);
        number = part;
        break;
      }
      start = end + 1;
    }
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& g) { return g.first == pattern; });
    if (it == groups.end()) it = groups.insert(groups.end(), {pattern, {}});
    it->second.push_back(number);
  }
  std::string out;
  for (const auto& [pattern, numbers] : groups) {
    const size_t hole = pattern.find("{}");
    if (hole == std::string::npos) {
      out += (out.empty() ? "" : ", ") + pattern;
      continue;
    }
    std::vector<std::string> indices;
    for (const std::string& n : numbers) indices.push_back("x." + n);
    std::string ranges = compact(indices);  // "x.0-79" or "x.0-3, x.7"
    std::string cleaned;
    for (size_t at = 0; at < ranges.size(); ++at) {
      if (ranges.compare(at, 2, "x.") == 0) {
        ++at;
        continue;
      }
      cleaned += ranges[at];
    }
    const bool several = cleaned.find(',') != std::string::npos;
    out += (out.empty() ? "" : ", ") + pattern.substr(0, hole) + (several ? "{" : "") + cleaned +
           (several ? "}" : "") + pattern.substr(hole + 2);
  }
  return out;
}

// What the quantizer did to the model: its swap, what it kept, its budget factor, the size it
// saves.
void print_quantization(const backplane::DevicePlan::Quantized& q, uint64_t model_size) {
  std::cout << "quantization: " << q.method
            << (q.pre_quantized ? " (pre-quantized checkpoint)" : " (on load)");
  if (q.dequantized) {
    std::cout << ", dequantized: loaded in full precision\n";
    return;
  }
  std::cout << ", " << q.replaced << " modules -> " << q.replaced_with << "\n";
  std::vector<std::string> kept = q.not_converted;
  std::cout << "  kept in full precision: "
            << (kept.empty() ? std::string("nothing") : compact_by_layer(kept)) << "\n";
  if (q.max_memory_factor != 1.0) {
    std::cout << "  budgets: x" << q.max_memory_factor << " (the quantizer's adjust_max_memory)\n";
  }
  std::cout << "  size: " << format_bytes(model_size) << ", unquantized "
            << format_bytes(q.unquantized_size) << "\n";
}

void print_plan(const backplane::ModelDescription& model, const backplane::DevicePlan& plan,
                const std::string& device_map, const std::optional<backplane::DType>& dtype) {
  std::cout << (model.architecture.empty() ? std::string("model") : model.architecture) << ", "
            << format_bytes(plan.model_size) << " ("
            << backplane::to_string(dtype.value_or(model.dtype))
            << (plan.quantized && !plan.quantized->dequantized ? ", " + plan.quantized->method : "")
            << "), device_map=" << device_map << "\n";
  std::string budgets;
  for (const auto& [device, bytes] : plan.max_memory.entries()) {
    budgets += (budgets.empty() ? "" : ", ") + device.str() + "=" + format_bytes(bytes);
  }
  std::cout << "max_memory: " << (budgets.empty() ? "(none)" : budgets) << "\n";
  if (plan.quantized) print_quantization(*plan.quantized, plan.model_size);
  std::cout << "\n";
  size_t width = 6;
  for (const backplane::DevicePlacement& p : plan.placed) width = std::max(width, p.label.size());
  const bool only_key = plan.device_map.size() == 1;
  std::cout << "DEVICE" << std::string(width - 6 + 2, ' ') << "BYTES       MODULES\n";
  uint64_t offloaded = 0;
  std::string offload_text;
  for (const backplane::DevicePlacement& p : plan.placed) {
    const std::string& label = p.label;
    const std::string bytes = format_bytes(p.bytes);
    std::cout << label << std::string(width - label.size() + 2, ' ') << bytes
              << std::string(bytes.size() < 12 ? 12 - bytes.size() : 1, ' ')
              << compact(p.modules, only_key) << "\n";
    const bool offload = p.device.kind == backplane::DeviceMapTarget::Kind::kDisk ||
                         (p.device.kind == backplane::DeviceMapTarget::Kind::kDevice &&
                          p.device.device.type() == "cpu" && !plan.accelerator_type.empty());
    if (offload) {
      offloaded += p.bytes;
      offload_text += (offload_text.empty() ? "" : ", ") + format_bytes(p.bytes) + " to " + label;
    }
  }
  std::cout << "\noffloaded: " << (offloaded == 0 ? std::string("nothing") : offload_text) << "\n";
  for (const std::string& note : plan.notes) std::cout << "\nnote: " << note << "\n";
  print_kernel_layers(model);
  for (const std::string& warning : plan.warnings) {
    std::cerr << "hwprobe: warning (from_pretrained's): " << warning << "\n";
  }
}

OrderedJson tp_json(const backplane::TensorParallelPlan& tp) {
  OrderedJson styles = OrderedJson::object();
  for (const backplane::TensorParallelModule& m : tp.modules) {
    if (!m.style.empty()) styles[m.name] = m.style;
  }
  return {{"tp_size", tp.tp_size},
          {"tp_plan", styles},
          {"per_rank_bytes", tp.rank_parameter_bytes},
          {"replicated_bytes", tp.replicated_parameter_bytes}};
}

// What one rank of a launched run holds: its device and the local shape of every parameter.
OrderedJson this_rank_json(const backplane::TensorParallelPlan& tp,
                           const backplane::Selection& rank) {
  const auto r = static_cast<size_t>(rank.rank);
  OrderedJson shards = OrderedJson::object();
  for (const backplane::TensorParallelModule& m : tp.modules) {
    for (const backplane::TensorShard& p : m.parameters) {
      shards[m.name + "." + p.name] = p.rank_shapes.at(r);
    }
  }
  return {{"rank", rank.rank},
          {"local_rank", rank.local_rank},
          {"world_size", rank.world_size},
          {"device", rank.device.str()},
          {"collective_backend",
           rank.collective_backend ? OrderedJson(*rank.collective_backend) : OrderedJson(nullptr)},
          {"bytes", tp.rank_parameter_bytes.at(r)},
          {"shards", shards}};
}

void print_tp(const backplane::ModelDescription& model, const backplane::TensorParallelPlan& tp) {
  std::cout << (model.architecture.empty() ? std::string("model") : model.architecture)
            << ", tensor parallel over " << tp.tp_size << " ranks\n\n";
  // Styles with the modules that take them, layers compacted.
  std::map<std::string, std::vector<std::string>> by_style;
  for (const backplane::TensorParallelModule& m : tp.modules) {
    by_style[m.style.empty() ? "(whole on every rank)" : m.style].push_back(m.name);
  }
  for (const auto& [style, names] : by_style) {
    std::cout << style << ": " << compact_by_layer(names) << "\n";
  }
  std::cout << "\nRANK  BYTES\n";
  for (size_t r = 0; r < tp.rank_parameter_bytes.size(); ++r) {
    std::cout << r << std::string(r < 10 ? 5 : 4, ' ')
              << format_bytes(static_cast<uint64_t>(tp.rank_parameter_bytes[r])) << "\n";
  }
  std::cout << "replicated on every rank: "
            << format_bytes(static_cast<uint64_t>(tp.replicated_parameter_bytes)) << "\n";
}

void retype_parameters(backplane::Module& module, backplane::DType dtype) {
  for (backplane::TensorInfo& t : module.tensors) {
    if (!t.buffer && backplane::is_floating_point(t.dtype)) t.dtype = dtype;
  }
  for (backplane::Module& child : module.children) retype_parameters(child, dtype);
}

std::optional<backplane::DType> parse_plan_dtype(const std::string& text) {
  if (text.empty()) return std::nullopt;
  if (text != "bfloat16" && text != "float16" && text != "float32") {
    throw backplane::InvalidArgument("--dtype " + text + ": expected bfloat16, float16 or float32");
  }
  return backplane::parse_dtype(text);
}

}  // namespace

int run_plan(const std::vector<std::string>& args) {
  CommonOptions common;
  std::string config;
  std::string weights;
  std::string tree;
  bool exact = false;
  std::string device_map;
  std::string max_memory;
  std::string dtype_text;
  std::string rules_text = "from_pretrained";
  std::string quantize_text;
  int tp_size = 0;
  po::options_description description("Options");
  description.add_options()("config", po::value(&config)->value_name("FILE"),
                            "the model's config.json, of a described architecture (Llama, "
                            "Mixtral, GPT-2, DeepSeek-V3, ...; an unknown one names the nearest)")(
      "weights", po::value(&weights)->value_name("FILE"),
      "a .safetensors file or a sharded checkpoint's model.safetensors.index.json")(
      "tree", po::value(&tree)->value_name("FILE"),
      "a module tree file of tools/export-module-tree: any architecture transformers builds")(
      "exact", po::bool_switch(&exact),
      "refuse a plan whose module tree is reconstructed (weights of an undescribed "
      "architecture) instead of warning")(
      "device-map", po::value(&device_map)->value_name("VALUE"),
      "auto, balanced, balanced_low_0, sequential, a device string (cuda:3), an accelerator "
      "index, or a JSON object {module: device}")(
      "max-memory", po::value(&max_memory)->value_name("LIST"),
      "budgets per device: 0=10GiB,1=10GiB,cpu=64GiB,disk=1000GB (Accelerate's units, "
      "no TB); default: free memory of each accelerator and available RAM")(
      "dtype", po::value(&dtype_text)->value_name("DTYPE"),
      "bfloat16 | float16 | float32: from_pretrained(dtype=...); default: the config's")(
      "tp-size", po::value(&tp_size)->value_name("N"),
      "print the tensor-parallel plan over N ranks instead (exclusive with --device-map)")(
      "rules", po::value(&rules_text)->value_name("WHICH"),
      "from_pretrained (default) | accelerate: load_checkpoint_and_dispatch's variant")(
      "quantize", po::value(&quantize_text)->value_name("METHOD"),
      "bnb-4bit | bnb-8bit | fp8: from_pretrained(quantization_config=...) with that "
      "method's defaults (a quantized checkpoint's own config wins, as in transformers)");
  add_common_options(description, common);
  const char* usage =
      "hwprobe plan MODEL (--device-map VALUE | --tp-size N)\n"
      "       [--max-memory LIST] [--dtype DTYPE] [--quantize METHOD] [--exact] [--json]\n"
      "       [--sim NAME|FILE]";
  po::variables_map vm;
  if (!parse_command_or_help(args, description, "model", usage, vm)) return kExitOk;
  const std::vector<std::string> words = positional_words(vm, "model");
  if (int{!words.empty()} + int{!config.empty()} + int{!weights.empty()} + int{!tree.empty()} !=
          1 ||
      words.size() > 1) {
    std::cerr << "hwprobe plan: give one MODEL (a folder, config.json, .safetensors file, index, "
                 "module tree file or Hub id org/name[@revision]), or one of --config FILE, "
                 "--weights FILE, --tree FILE\nUsage: "
              << usage << "\n";
    return kExitUsage;
  }
  if (device_map.empty() && !vm.count("tp-size")) {
    std::cerr << "hwprobe plan: give --device-map VALUE (or --tp-size N)\nUsage: " << usage << "\n";
    return kExitUsage;
  }
  if (vm.count("tp-size") && tp_size < 1) {
    throw backplane::InvalidArgument("--tp-size " + std::to_string(tp_size) +
                                     ": expected a positive number of ranks");
  }
  if (tp_size > 1 && !device_map.empty()) {
    // transformers' own words (distributed/mixin.py).
    throw backplane::InvalidArgument("Tensor parallelism and `device_map` are mutually exclusive.");
  }
  if (rules_text != "from_pretrained" && rules_text != "accelerate") {
    throw backplane::InvalidArgument("--rules " + rules_text +
                                     ": expected from_pretrained or accelerate");
  }
  const std::optional<backplane::DType> dtype = parse_plan_dtype(dtype_text);
  std::optional<backplane::QuantizationConfig> quantize;
  if (vm.count("quantize")) quantize = backplane::parse_quantize_option(quantize_text);
  std::optional<backplane::MaxMemory> memory;
  if (vm.count("max-memory")) {
    memory = backplane::MaxMemory::parse(max_memory, "--max-memory");
    for (const std::string& w : memory->warnings("--max-memory")) {
      std::cerr << "hwprobe: warning: " << w << "\n";
    }
  }

  const backplane::ModelSource source = chosen_source(words, config, weights, tree);
  backplane::ModelDescription model = backplane::model_from_source(source);
  if (!model.approximate_because.empty()) {
    std::string why;
    for (const std::string& reason : model.approximate_because) why += "\n  - " + reason;
    if (exact) {
      throw backplane::InvalidArgument(
          "--exact: the plan would be approximate:" + why +
          "\nwrite the module tree with tools/export-module-tree and plan with --tree FILE");
    }
    std::cerr << "hwprobe: warning: this plan is approximate, transformers' own may differ:" << why
              << "\n  (tools/export-module-tree MODEL -o tree.json, then --tree tree.json, is "
                 "exact)\n";
  }
  if (quantize) {
    std::vector<std::string> merge_warnings;
    backplane::quantize_on_load(model, *quantize, merge_warnings);
    for (const std::string& w : merge_warnings) {
      std::cerr << "hwprobe: warning (from_pretrained's): " << w << "\n";
    }
  }
  for (const std::string& warning : model.warnings) {
    std::cerr << "hwprobe: warning: " << warning << "\n";
  }
  for (const std::string& validator : model.unchecked) {
    std::cerr << "hwprobe: warning: " << validator
              << " is not applied to this config here: a config it refuses is planned "
                 "all the same\n";
  }
  if (device_map.empty()) {
    // from_pretrained(dtype=...) builds the parameters in that dtype.
    if (dtype) {
      retype_parameters(model.root, *dtype);
      model.dtype = *dtype;
    }
    const backplane::TensorParallelPlan tp = backplane::plan_tensor_parallel(model, tp_size);
    // Under a launcher (torchrun, MPI, Slurm) this process is one rank: its device comes from the
    // training rules, its shards from the plan.
    const backplane::Runtime runtime = open_runtime(common);
    const backplane::Selection rank =
        backplane::select_training_device(runtime, backplane::TrainingOptions{});
    OrderedJson rank_json = nullptr;
    if (!rank.launcher.empty()) {
      if (rank.rank >= tp.tp_size) {
        throw backplane::InvalidArgument("rank " + std::to_string(rank.rank) +
                                         " is outside --tp-size " + std::to_string(tp.tp_size) +
                                         "; launch at most that many processes");
      }
      rank_json = this_rank_json(tp, rank);
    }
    if (common.json) {
      OrderedJson out = tp_json(tp);
      out["this_rank"] = rank_json;
      add_model_facts(out, model, source);
      std::cout << out.dump(2) << "\n";
    } else {
      print_source(source);
      print_tp(model, tp);
      if (!rank_json.is_null()) {
        std::cout << "\nthis process: rank " << rank.rank << " of " << rank.world_size << " on "
                  << rank.device.str() << " (" << rank.collective_backend.value_or("no collective")
                  << "), holding "
                  << format_bytes(static_cast<uint64_t>(
                         tp.rank_parameter_bytes[static_cast<size_t>(rank.rank)]))
                  << "\n";
      }
      print_kernel_layers(model);
    }
    return kExitOk;
  }

  const backplane::Runtime runtime = open_runtime(common);
  const backplane::PlanStrategy strategy =
      backplane::parse_device_map(device_map, runtime.device_types());
  backplane::PlanOptions options;
  options.max_memory = memory;
  options.dtype = dtype;
  options.rules = rules_text == "accelerate" ? backplane::PlanRules::kAccelerate
                                             : backplane::PlanRules::kFromPretrained;
  const backplane::DevicePlan plan = backplane::plan_device_map(model, strategy, runtime, options);
  if (common.json) {
    OrderedJson out = plan_json(plan);
    add_model_facts(out, model, source);
    std::cout << out.dump(2) << "\n";
  } else {
    print_source(source);
    print_plan(model, plan, strategy.str(), dtype);
  }
  return kExitOk;
}

}  // namespace hwprobe
