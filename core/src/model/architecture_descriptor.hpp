// Architectures as data: one descriptor per architecture in core/src/model/architectures/
// (format "backplane-architecture", written by tests/python/architecture_descriptors.py from
// transformers itself and compiled in), evaluated over a config.json into the module tree
// transformers builds for it.
#pragma once

#include <backplane/model/model.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace backplane::model_detail {

// config_rules.json: what PreTrainedConfig and from_pretrained do with every config (written
// from transformers by tests/python/config_checks.py), parsed once.
const nlohmann::json& config_rules();

struct EmbeddedDescriptor {
  const char* model_type;
  const char* architecture;  // the causal-LM class
  const char* text;          // the descriptor file
};

const EmbeddedDescriptor* descriptor_for_model_type(std::string_view model_type);
const EmbeddedDescriptor* descriptor_for_class(std::string_view architecture);
// Every described architecture class, in model_type order.
std::vector<std::string> described_architectures();
// Up to `count` described model_types and classes nearest to `name` (edit distance).
std::vector<std::string> nearest_described(std::string_view name, size_t count);

// The module tree of `config` as the descriptor describes it; `dtype` replaces the config's
// dtype when given. Throws InvalidArgument naming `what` and the field for a config the
// architecture's config class refuses by type, or one the shapes cannot be made of.
ModelDescription build_from_descriptor(const EmbeddedDescriptor& descriptor,
                                       const nlohmann::json& config, const std::string& what,
                                       std::optional<DType> dtype);

}  // namespace backplane::model_detail
