// compressed-tensors on the meta model, as CompressedTensorsHfQuantizer.preprocess_model leaves it
// (compressed-tensors 0.20.1: apply_quantization_config's matching and initialize_qparams, then
// compress_model's per-format tensors; docs/quantized-placement-rules.md, section 3.5).
#include <backplane/error.hpp>

#include <algorithm>
#include <regex>

#include "quantization_reader.hpp"
#include "quantized_modules.hpp"

namespace backplane::quantization {
namespace {

using Shape = std::vector<int64_t>;

bool listed(const char* key, const std::string& class_name) {
  for (const auto& c : model_detail::quantization_rules().at(key)) {
    if (c.get<std::string>() == class_name) return true;
  }
  return false;
}

bool quantizable(const std::string& class_name) {
  return listed("linear_classes", class_name) || listed("embedding_classes", class_name);
}

enum class Match { kNone, kName, kRegex, kClass };

// match.py: "re:" patterns re.match the name (anchored at its start only); other targets equal
// the name, or a class of the module's MRO.
Match match(const std::string& target, const std::string& name, const std::string& class_name) {
  if (target.rfind("re:", 0) == 0) {
    std::regex re;
    try {
      re = std::regex(target.substr(3), std::regex::ECMAScript);
    } catch (const std::regex_error&) {
      throw InvalidArgument("compressed-tensors target '" + target +
                            "' is not a regular expression this planner can read");
    }
    return std::regex_search(name, re, std::regex_constants::match_continuous) ? Match::kRegex
                                                                               : Match::kNone;
  }
  if (target == name) return Match::kName;
  const bool in_mro = target == class_name || target == "Module" ||
                      (target == "Linear" && listed("linear_classes", class_name)) ||
                      (target == "Embedding" && listed("embedding_classes", class_name));
  return in_mro ? Match::kClass : Match::kNone;
}

// Each target string and the group it belongs to: a target two groups list belongs to the later.
using TargetOwners = std::vector<std::pair<std::string, const CompressedScheme*>>;

TargetOwners target_owners(const CompressedTensors& ct) {
  TargetOwners owners;
  for (const CompressedScheme& scheme : ct.groups) {
    for (const std::string& target : scheme.targets) {
      auto it = std::find_if(owners.begin(), owners.end(),
                             [&](const auto& o) { return o.first == target; });
      if (it == owners.end()) {
        owners.emplace_back(target, &scheme);
      } else {
        it->second = &scheme;
      }
    }
  }
  return owners;
}

// The scheme of a module: exact names first, then regexes, then classes, each alphabetically.
const CompressedScheme* scheme_for(const CompressedTensors& ct, const TargetOwners& owners,
                                   const std::string& name, const std::string& class_name) {
  for (const std::string& ignored : ct.ignore) {
    if (match(ignored, name, class_name) != Match::kNone) return nullptr;
  }
  const CompressedScheme* best = nullptr;
  std::pair<int, std::string> best_key{4, ""};
  for (const auto& [target, scheme] : owners) {
    const Match m = match(target, name, class_name);
    if (m == Match::kNone) continue;
    const std::pair<int, std::string> key{static_cast<int>(m), target};
    if (key < best_key) {
      best_key = key;
      best = scheme;
    }
  }
  return best;
}

DType dtype_named(const std::string& name) {
  return parse_dtype(name);
}

// initialize_qparams for one of input (observed (in,)), weight ((out, in)), output ((out,)).
void add_qparams(const char* base, const CompressedArgs& a, const Shape& observed, DType scale,
                 bool force_zero_point, std::vector<TensorInfo>& out) {
  if (a.dynamic) return;
  const std::string b = base;
  if (a.strategy == "tensor_group")
    out.push_back(own_dtype_tensor(b + "_global_scale", {1}, DType::kFloat32));
  if (a.dynamic_local) return;
  Shape shape;
  if (a.strategy == "tensor") {
    shape = {1};
  } else if (a.strategy == "channel") {
    if (observed.size() < 2) {
      throw InvalidArgument(
          "compressed-tensors: Channel quant requires at least 2 observed dimensions");
    }
    shape = {observed[0], 1};
  } else if (a.strategy == "group" || a.strategy == "tensor_group") {
    shape = observed;
    shape.back() = ceil_div(observed.back(), a.group_size);
  } else if (a.strategy == "block") {
    shape = {ceil_div(observed[0], a.block[0]), ceil_div(observed[1], a.block[1])};
  } else {
    throw InvalidArgument("compressed-tensors: a static " + a.strategy +
                          " scale is not planned here");
  }
  out.push_back(own_dtype_tensor(b + "_scale", shape, scale));
  if (force_zero_point || !a.symmetric)
    out.push_back(own_dtype_tensor(b + "_zero_point", shape, dtype_named(a.zp_dtype)));
}

// format.py's inference, for a scheme without its own format.
std::string inferred_format(const CompressedScheme& s) {
  if (!s.weights) return "dense";
  const CompressedArgs& w = *s.weights;
  const bool g32 = w.group_size == 32;
  if (w.is_float && w.num_bits == 4 && g32) return "mxfp4-pack-quantized";
  if (w.is_float && w.num_bits == 6 && g32) return "mxfp6-pack-quantized";
  if (w.is_float && w.num_bits == 8 && g32 && w.scale_dtype == std::string("uint8")) {
    return "mxfp8-quantized";
  }
  if (w.is_float && w.num_bits == 4 && w.group_size == 16) return "nvfp4-pack-quantized";
  if (!w.is_float && s.input_activations) return "int-quantized";
  if (!w.is_float && w.num_bits >= 1 && w.num_bits <= 8) return "pack-quantized";
  if (w.is_float && s.input_activations) return "float-quantized";
  return "naive-quantized";
}

TensorInfo* find(std::vector<TensorInfo>& tensors, const std::string& name) {
  for (TensorInfo& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

void check_groups(const CompressedArgs& w, int64_t in, int64_t group) {
  if (in % group != 0) {
    throw InvalidArgument(
        "compressed-tensors: tensor column shape must be divisble by the given "
        "group_size " +
        std::to_string(group) + " but got " + std::to_string(in));
  }
  (void)w;
}

// compress_model on meta: the weight and its scale as the format stores them.
void compress(const std::string& format, const CompressedArgs& w, int64_t out, int64_t in,
              std::vector<TensorInfo>& tensors) {
  auto erase = [&](const std::string& name) {
    tensors.erase(std::remove_if(tensors.begin(), tensors.end(),
                                 [&](const TensorInfo& t) { return t.name == name; }),
                  tensors.end());
  };
  TensorInfo* weight = find(tensors, "weight");
  TensorInfo* scale = find(tensors, "weight_scale");
  auto scale_as = [&](const char* fallback) {
    if (scale != nullptr) scale->dtype = dtype_named(w.scale_dtype.value_or(fallback));
  };
  auto even = [&]() {
    if (in % 2 != 0) {
      throw InvalidArgument(
          "compressed-tensors: tensor must have an even number of columns for nvfp4 compression");
    }
  };
  if (format == "dense") return;
  if (format == "pack-quantized") {
    erase("weight");
    tensors.push_back(
        own_dtype_tensor("weight_packed", {out, ceil_div(in * w.num_bits, 32)}, DType::kInt32));
    tensors.push_back(own_dtype_tensor("weight_shape", {2}, DType::kInt64));
  } else if (format == "naive-quantized" || format == "int-quantized" ||
             format == "float-quantized") {
    if (w.strategy == "group" || w.strategy == "tensor_group") check_groups(w, in, w.group_size);
    if (w.is_float && w.num_bits != 8) {
      throw InvalidArgument("compressed-tensors: Only num_bits in (8) are supported");
    }
    weight->dtype = w.is_float         ? DType::kFloat8E4M3
                    : w.num_bits <= 8  ? DType::kInt8
                    : w.num_bits <= 16 ? DType::kInt16
                                       : DType::kInt32;
    weight->explicit_dtype = true;
  } else if (format == "nvfp4-pack-quantized" || format == "mxfp4-pack-quantized") {
    even();
    erase("weight");
    tensors.push_back(own_dtype_tensor("weight_packed", {out, in / 2}, DType::kUInt8));
    scale = find(tensors, "weight_scale");
    scale_as(format == "nvfp4-pack-quantized" ? "float8_e4m3fn" : "uint8");
  } else if (format == "mxfp6-pack-quantized") {
    check_groups(w, in, 32);
    if (in % 4 != 0) {
      throw InvalidArgument(
          "compressed-tensors: tensor must have a multiple of 4 columns for fp6 packing");
    }
    erase("weight");
    tensors.push_back(own_dtype_tensor("weight_packed", {out, 3 * in / 4}, DType::kUInt8));
    scale = find(tensors, "weight_scale");
    if (scale != nullptr) scale->dtype = DType::kUInt8;
  } else if (format == "mxfp8-quantized") {
    check_groups(w, in, 32);
    weight->dtype = DType::kFloat8E4M3;
    weight->explicit_dtype = true;
    if (scale != nullptr) scale->dtype = DType::kUInt8;
  }
}

struct Applier {
  const ModelDescription& model;
  const CompressedTensors& ct;
  DType scale;
  TargetOwners owners = target_owners(ct);
  int64_t quantized = 0;

  bool tied(const std::string& name) const {
    for (const auto& group : model.tied_parameters) {
      if (group.size() > 1 && std::find(group.begin(), group.end(), name) != group.end())
        return true;
    }
    return model.tied_weights_keys.count(name) > 0;
  }

  void visit(Module& module, const std::string& name) {
    if (quantizable(module.class_name)) apply(module, name);
    for (Module& child : module.children)
      visit(child, name.empty() ? child.name : name + "." + child.name);
  }

  void apply(Module& module, const std::string& name) {
    const CompressedScheme* scheme = scheme_for(ct, owners, name, module.class_name);
    if (scheme == nullptr) return;
    const TensorInfo* weight = nullptr;
    for (const TensorInfo& t : module.tensors) {
      if (t.name == "weight" && t.shape.size() == 2) weight = &t;
    }
    const std::string weight_name = name + ".weight";
    if (weight == nullptr || tied(weight_name)) {
      // A tied module (lm_head sharing the embeddings): its weight would be untied by the
      // compressor, which this planner does not model.
      throw InvalidArgument("compressed-tensors: " + name + " (scheme " + scheme->name +
                            ") shares its weight with another module; quantizing a tied weight is "
                            "not planned here (checkpoints list it in `ignore`)");
    }
    const int64_t out = weight->shape[0];
    const int64_t in = weight->shape[1];
    std::vector<TensorInfo> added;
    if (scheme->input_activations) {
      add_qparams("input", *scheme->input_activations, {in}, scale, ct.force_zero_point, added);
    }
    if (scheme->weights) {
      add_qparams("weight", *scheme->weights, {out, in}, scale, ct.force_zero_point, added);
    }
    if (scheme->output_activations) {
      add_qparams("output", *scheme->output_activations, {out}, scale, ct.force_zero_point, added);
    }
    module.tensors.insert(module.tensors.end(), added.begin(), added.end());
    if (ct.compressed && scheme->weights) {
      compress(scheme->format.value_or(inferred_format(*scheme)), *scheme->weights, out, in,
               module.tensors);
    }
    ++quantized;
  }
};

}  // namespace

int64_t apply_compressed_tensors(ModelDescription& model, const CompressedTensors& ct,
                                 DType dtype) {
  if (model.model_type == "llama4" || model.model_type == "llama4_text") {
    // transformers splits Llama 4's fused experts into per-expert Linear layers for it.
    throw InvalidArgument(
        "compressed-tensors on Llama 4 (its experts split into per-expert Linear "
        "layers by transformers) is not planned here");
  }
  // initialize_qparams: scales in the weight's dtype where it is a float of 16 bits or more.
  const bool wide = dtype == DType::kFloat16 || dtype == DType::kBFloat16 ||
                    dtype == DType::kFloat32 || dtype == DType::kFloat64;
  Applier applier{model, ct, wide ? dtype : DType::kFloat16};
  applier.visit(model.root, "");
  return applier.quantized;
}

}  // namespace backplane::quantization
