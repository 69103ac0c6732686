// The config.json reader behind model_from_config, shared with model_from_safetensors.
#pragma once

#include <backplane/model/model.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace backplane::model_detail {

// Whether the config names one of the supported architectures (model_type, else
// architectures[0]) unquantized; false for anything else, a config that is not an object too.
bool names_supported_architecture(const nlohmann::json& config);

// The dtype the config sets (dtype, else torch_dtype), if any. Throws as model_from_config.
std::optional<DType> config_dtype(const nlohmann::json& config, const std::string& what);

// model_from_config over a parsed config; `dtype` replaces the config's dtype when given
// (from_pretrained(dtype="auto") found it in the weights). `what` names the file in errors.
ModelDescription build_from_config(const nlohmann::json& config, const std::string& what,
                                   std::optional<DType> dtype);

}  // namespace backplane::model_detail
