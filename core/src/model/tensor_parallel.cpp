// plan_tensor_parallel: transformers 5.24's tensor parallelism on a model description. The
// shard rules follow distributed/tensor_parallel.py: ColwiseParallel shards each parameter on
// dim ndim-2 (weight: out_features, bias: its only dim), RowwiseParallel shards the weight on
// its last dim and keeps the bias whole, EmbeddingParallel(shard_dim) shards on that dim, the
// other styles keep parameters whole. DTensor's Shard splits as torch.chunk does.
#include <backplane/error.hpp>
#include <backplane/internal/text.hpp>
#include <backplane/model/tensor_parallel.hpp>

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <optional>
#include <string_view>

namespace backplane {

using internal::shape_text;
namespace {

// Far beyond any tensor-parallel group; keeps the per-rank tables small.
constexpr int kMaxTpSize = 4096;

enum class Split { kOutput, kInput, kDim0, kDim1, kNone };

struct Style {
  std::string_view name;
  Split weight;  // how non-bias parameters split
  Split bias;    // how a parameter named "bias" splits
};

// ALL_PARALLEL_STYLES of distributed/tensor_parallel.py that act on dense parameters.
constexpr Style kStyles[] = {
    {"colwise", Split::kOutput, Split::kOutput},
    {"colwise_gather_output", Split::kOutput, Split::kOutput},
    {"colwise_rep", Split::kOutput, Split::kOutput},
    {"rowwise", Split::kInput, Split::kNone},
    {"rowwise_split_input", Split::kInput, Split::kNone},
    {"rowwise_rep", Split::kInput, Split::kNone},
    {"embedding_rowwise", Split::kDim0, Split::kDim0},
    {"embedding_colwise", Split::kDim1, Split::kDim1},
    {"replicated_with_grad_allreduce", Split::kNone, Split::kNone},
    {"replicate", Split::kNone, Split::kNone},
    {"all_reduce", Split::kNone, Split::kNone},
    {"sequence_parallel", Split::kNone, Split::kNone},
    {"local_params", Split::kNone, Split::kNone},
};

const Style& find_style(const std::string& name, const std::string& rule) {
  for (const Style& style : kStyles) {
    if (style.name == name) return style;
  }
  std::string known;
  for (const Style& style : kStyles) {
    if (!known.empty()) known += ", ";
    known += style.name;
  }
  throw InvalidArgument("tp_plan rule '" + rule + "' uses the style '" + name +
                        "', which backplane does not know; known: " + known);
}

// parallel_utils.replace_layer_number_by_wildcard: re.sub(r"\.\d+(\.|$)", ".*\1", name).
std::string wildcard_layer_numbers(const std::string& name) {
  std::string out;
  size_t i = 0;
  while (i < name.size()) {
    if (name[i] == '.') {
      size_t j = i + 1;
      while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j]))) ++j;
      if (j > i + 1 && (j == name.size() || name[j] == '.')) {
        out += ".*";
        if (j < name.size()) out += '.';
        i = j == name.size() ? j : j + 1;  // the matched '.' is consumed, as re.sub does
        continue;
      }
    }
    out += name[i++];
  }
  return out;
}

// Torch's normalisation of a placement dim, or nullopt when it does not exist.
std::optional<int> split_dim(Split split, const TensorInfo& tensor) {
  const int ndim = static_cast<int>(tensor.shape.size());
  int dim = 0;
  switch (split) {
    case Split::kNone:
      return std::nullopt;
    case Split::kOutput:
      dim = ndim - 2;  // Shard(meta.ndim - 2)
      break;
    case Split::kInput:
      dim = -1;
      break;
    case Split::kDim0:
      dim = 0;
      break;
    case Split::kDim1:
      dim = 1;
      break;
  }
  if (dim < 0) dim += ndim;
  if (dim < 0 || dim >= ndim) return -2;  // cannot be split: reported by the caller
  return dim;
}

int64_t checked_add(int64_t a, int64_t b) {
  if (b > std::numeric_limits<int64_t>::max() - a) {
    throw InvalidArgument(
        "The model's parameter bytes per rank do not fit a signed 64-bit integer");
  }
  return a + b;
}

struct Divisor {
  const char* hyperparameter;
  const char* rule_part;  // a split rule whose pattern contains this splits that dimension
  bool always;            // heads: must divide even with uneven shards allowed
  const char* why;
};

constexpr Divisor kDivisors[] = {
    {"num_attention_heads", "self_attn.", true, "each rank must hold whole attention heads"},
    {"num_key_value_heads", "self_attn.", true, "each rank must hold whole key/value heads"},
    {"intermediate_size", "mlp.", false, "the MLP projections are split on it"},
    {"vocab_size", "embed_tokens", false, "the embedding is split on the vocabulary"},
    {"vocab_size", "lm_head", false, "lm_head is split on the vocabulary"},
};

void check_divisors(const ModelDescription& description, int tp_size,
                    const TensorParallelOptions& options) {
  for (const Divisor& divisor : kDivisors) {
    const auto value = description.hyperparameters.find(divisor.hyperparameter);
    if (value == description.hyperparameters.end() || value->second % tp_size == 0) continue;
    if (!divisor.always && options.allow_uneven_shards) continue;
    for (const auto& [pattern, style] : description.tp_plan) {
      const Style& known = find_style(style, pattern);
      if (known.weight == Split::kNone) continue;
      if (pattern.find(divisor.rule_part) == std::string::npos) continue;
      throw InvalidArgument(
          std::string(divisor.hyperparameter) + " (" + std::to_string(value->second) +
          ") is not divisible by tp_size " + std::to_string(tp_size) + ": " + divisor.why +
          (divisor.always ? ""
                          : " (allow_uneven_shards splits it unevenly, as transformers does)"));
    }
  }
}

}  // namespace

TensorParallelPlan plan_tensor_parallel(const ModelDescription& description, int tp_size,
                                        const TensorParallelOptions& options) {
  if (tp_size < 1 || tp_size > kMaxTpSize) {
    throw InvalidArgument("tp_size must be from 1 to " + std::to_string(kMaxTpSize) + ", got " +
                          std::to_string(tp_size));
  }
  if (description.quantization) {
    // Its shards would be sized as full-precision tensors: a wrong plan, so none.
    throw InvalidArgument(std::string("tensor-parallel plans of a model quantized with ") +
                          to_string(description.quantization->method) +
                          " are not described here; plan it with a device_map instead");
  }
  std::map<std::string, std::string> rules;  // pattern -> style
  if (tp_size > 1) {
    if (description.tp_plan.empty()) {
      throw InvalidArgument(
          "tp_size " + std::to_string(tp_size) + " was requested, but " +
          (description.architecture.empty() ? std::string("this model")
                                            : description.architecture) +
          " has no tp_plan" +
          (description.from_config ? "" : " (a model rebuilt from weights alone has none)"));
    }
    for (const auto& [pattern, style] : description.tp_plan) {
      find_style(style, pattern);
      rules[pattern] = style;
    }
    check_divisors(description, tp_size, options);
  }
  const auto rule_for =
      [&](const std::string& name) -> const std::pair<const std::string, std::string>* {
    const auto it = rules.find(wildcard_layer_numbers(name));
    return it == rules.end() ? nullptr : &*it;
  };

  TensorParallelPlan plan;
  plan.tp_size = tp_size;
  plan.rank_parameter_bytes.assign(static_cast<size_t>(tp_size), 0);
  for (const NamedModule& named : named_modules(description.root)) {
    TensorParallelModule module;
    module.name = named.name;
    module.class_name = named.module->class_name;
    const auto* module_rule = rule_for(named.name);
    if (module_rule != nullptr) {
      module.rule = module_rule->first;
      module.style = module_rule->second;
    }
    for (const TensorInfo& tensor : named.module->tensors) {
      if (tensor.buffer) continue;
      const std::string qualified =
          named.name.empty() ? tensor.name : named.name + "." + tensor.name;
      // _get_parameter_plan: a rule naming the parameter, else its module's.
      const auto* rule = rule_for(qualified);
      if (rule == nullptr) rule = module_rule;
      TensorShard shard;
      shard.name = tensor.name;
      shard.shape = tensor.shape;
      shard.dtype = tensor.dtype;
      std::optional<int> dim;
      if (rule != nullptr) {
        const Style& style = find_style(rule->second, rule->first);
        dim = split_dim(tensor.name == "bias" ? style.bias : style.weight, tensor);
        if (dim && *dim < 0) {
          throw InvalidArgument("tp_plan rule '" + rule->first + "' (" + rule->second +
                                ") cannot split parameter '" + qualified + "' of shape " +
                                shape_text(tensor.shape));
        }
      }
      if (!dim) {
        const int64_t bytes = tensor.nbytes();
        plan.replicated_parameter_bytes = checked_add(plan.replicated_parameter_bytes, bytes);
        for (int64_t& total : plan.rank_parameter_bytes) total = checked_add(total, bytes);
        shard.rank_shapes.assign(static_cast<size_t>(tp_size), tensor.shape);
      } else {
        shard.shard_dim = *dim;
        const int64_t size = tensor.shape[static_cast<size_t>(*dim)];
        if (size % tp_size != 0 && !options.allow_uneven_shards) {
          throw InvalidArgument("Parameter '" + qualified + "' of shape " +
                                shape_text(tensor.shape) + " is split on dim " +
                                std::to_string(*dim) + " of size " + std::to_string(size) +
                                ", which is not divisible by tp_size " + std::to_string(tp_size) +
                                " (allow_uneven_shards splits it unevenly, as transformers does)");
        }
        tensor.nbytes();  // overflow checks on the whole tensor
        const int64_t chunk = size / tp_size + (size % tp_size != 0 ? 1 : 0);  // ceil
        for (int rank = 0; rank < tp_size; ++rank) {
          std::vector<int64_t> local = tensor.shape;
          const int64_t start = chunk > std::numeric_limits<int64_t>::max() / tp_size
                                    ? (rank == 0 ? 0 : size)
                                    : chunk * rank;
          local[static_cast<size_t>(*dim)] = std::max<int64_t>(0, std::min(chunk, size - start));
          TensorInfo piece = tensor;
          piece.shape = local;
          plan.rank_parameter_bytes[static_cast<size_t>(rank)] =
              checked_add(plan.rank_parameter_bytes[static_cast<size_t>(rank)], piece.nbytes());
          shard.rank_shapes.push_back(std::move(local));
        }
      }
      module.parameters.push_back(std::move(shard));
    }
    if (!module.parameters.empty() || !module.style.empty()) {
      plan.modules.push_back(std::move(module));
    }
  }
  return plan;
}

}  // namespace backplane
