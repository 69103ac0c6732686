#include "rope.hpp"

#include "descriptor_expression.hpp"

#include <backplane/error.hpp>

#include <algorithm>
#include <cmath>
#include <string_view>
#include <vector>

namespace backplane::model_detail {
namespace {

using Json = nlohmann::json;

struct RopeParameters {
  Json parameters = Json::object();
  std::string rope_type = "default";
  double partial = 1.0;
  std::string partial_text = "1.0";  // as Python prints the factor the config gives
};

[[noreturn]] void fail(const std::string& what, const std::string& message) {
  throw InvalidArgument(what + ": " + message);
}

double number(const std::string& what, const std::string& key, const Json& value) {
  if (!value.is_number()) fail(what, "`" + key + "` must be a number, got " + value.dump());
  return value.get<double>();
}

// convert_rope_params_to_dict and standardize_rope_params: `rope_scaling or rope_parameters`,
// the top-level partial_rotary_factor folded in, the legacy `type` key read as rope_type; then
// the checks every rope type's validator makes.
RopeParameters standardized(const Json& config, const std::string& what) {
  RopeParameters out;
  const auto field = [&](const char* key) -> const Json* {
    const auto it = config.find(key);
    return it == config.end() || it->is_null() ? nullptr : &*it;
  };
  const Json* scaling = field("rope_scaling");
  const Json* explicit_parameters = field("rope_parameters");
  // An empty rope_scaling does not count.
  if (scaling != nullptr && !(scaling->is_object() && scaling->empty())) {
    if (!scaling->is_object()) fail(what, "`rope_scaling` must be an object");
    out.parameters = *scaling;
  } else if (explicit_parameters != nullptr) {
    if (!explicit_parameters->is_object()) fail(what, "`rope_parameters` must be an object");
    out.parameters = *explicit_parameters;
  }
  if (!out.parameters.contains("partial_rotary_factor")) {
    if (const Json* factor = field("partial_rotary_factor")) {
      out.parameters["partial_rotary_factor"] = *factor;
    }
  }
  const Json& parameters = out.parameters;
  if (const auto it = parameters.find("rope_type"); it != parameters.end()) {
    if (!it->is_string()) fail(what, "`rope_type` must be a string, got " + it->dump());
    out.rope_type = it->get<std::string>();
  } else if (const auto legacy = parameters.find("type"); legacy != parameters.end()) {
    if (!legacy->is_string()) fail(what, "rope `type` must be a string, got " + legacy->dump());
    out.rope_type = legacy->get<std::string>();
  }
  struct RopeType {
    std::string_view name;
    std::vector<const char*> required;  // beyond what standardization fills in
  };
  static const RopeType kRopeTypes[] = {
      {"default", {}},
      {"linear", {"factor"}},
      {"dynamic", {"factor"}},
      {"yarn", {"factor"}},
      {"longrope", {"short_factor", "long_factor"}},
      {"llama3", {"factor", "low_freq_factor", "high_freq_factor"}},
      {"proportional", {}},
  };
  const auto known = std::find_if(std::begin(kRopeTypes), std::end(kRopeTypes),
                                  [&](const RopeType& type) { return type.name == out.rope_type; });
  if (known == std::end(kRopeTypes)) {
    fail(what, "rope_type '" + out.rope_type +
                   "' is not supported; accepted: default, linear, dynamic, yarn, longrope, "
                   "llama3, proportional");
  }
  for (const char* key : known->required) {
    if (!parameters.contains(key)) {
      fail(what, "rope parameters of rope_type '" + out.rope_type + "' lack the required key '" +
                     key + "'");
    }
  }
  if (const auto it = parameters.find("partial_rotary_factor"); it != parameters.end()) {
    if (it->is_boolean()) {
      out.partial = it->get<bool>() ? 1.0 : 0.0;
    } else {
      out.partial = number(what, "partial_rotary_factor", *it);
    }
    out.partial_text = python_repr(*it);
    if (!(out.partial >= 0.0 && out.partial <= 1.0)) {
      fail(what, "`partial_rotary_factor` = " + it->dump() + " is out of range; accepted: 0 to 1");
    }
  }
  return out;
}

// Python's int(x) on a float: truncation toward zero.
int64_t truncate(double x) {
  return static_cast<int64_t>(std::trunc(x));
}

// Torch broadcasting of two 1-D lengths, as the yarn and longrope formulas combine them.
int64_t broadcast(const std::string& what, const std::string& rope_type, int64_t a, int64_t b) {
  if (a == b || b == 1) return a;
  if (a == 1) return b;
  fail(what, "rope_type '" + rope_type + "' combines inverse frequencies of sizes " +
                 std::to_string(a) + " and " + std::to_string(b) +
                 ", which torch cannot broadcast (check head_dim and partial_rotary_factor)");
}

}  // namespace

void validate_rope(const Json& config, const std::string& what, std::optional<int64_t> head_dim,
                   const std::string& layer_type) {
  const RopeParameters rope = standardized(config, what);
  // A fully rotated odd head cannot be split in halves (head_dim <= 4 allowed).
  if (head_dim && *head_dim > 4 && *head_dim % 2 == 1 &&
      truncate(static_cast<double>(*head_dim) * rope.partial) == *head_dim) {
    fail(what,
         "RoPE requires an even rotary dimension, but got `head_dim`=" + std::to_string(*head_dim) +
             " with `partial_rotary_factor`=" + rope.partial_text + " for `" + layer_type + "`.");
  }
}

int64_t rope_inv_freq_length(const Json& config, const std::string& what, int64_t head_dim,
                             bool default_rotates_partial) {
  const RopeParameters rope = standardized(config, what);
  const std::string& rope_type = rope.rope_type;
  const int64_t dim = truncate(static_cast<double>(head_dim) * rope.partial);
  const int64_t halves = std::max<int64_t>(0, (dim + 1) / 2);  // torch.arange(0, dim, 2)
  if (rope_type == "default") return default_rotates_partial ? halves : (head_dim + 1) / 2;
  if (rope_type == "linear" || rope_type == "llama3") return halves;
  if (rope_type == "dynamic") {
    if (dim == 2) {
      fail(what, "rope_type 'dynamic' divides by (rotary dimension - 2), which is 0 here");
    }
    return halves;
  }
  if (rope_type == "yarn") {
    return broadcast(what, rope_type, halves, std::max<int64_t>(0, dim / 2));
  }
  if (rope_type == "longrope") {
    const Json& short_factor = rope.parameters.at("short_factor");
    if (!short_factor.is_array()) fail(what, "`short_factor` must be a list of numbers");
    for (const Json& entry : short_factor) number(what, "short_factor", entry);
    return broadcast(what, rope_type, static_cast<int64_t>(short_factor.size()), halves);
  }
  // proportional: rotated angles, then zeros up to head_dim // 2
  const auto rotated =
      static_cast<int64_t>(std::floor(rope.partial * static_cast<double>(head_dim) / 2));
  return std::max(rotated, head_dim / 2);
}

}  // namespace backplane::model_detail
