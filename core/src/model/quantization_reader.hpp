// config.json's quantization_config, for the methods planned here (quantization.cpp); used by
// config_loader.cpp.
#pragma once

#include <backplane/model/model.hpp>

#include <nlohmann/json.hpp>

#include <optional>
#include <string>

namespace backplane::model_detail {

// The BitsAndBytesConfig or FineGrainedFP8Config a checkpoint's quantization_config makes, for
// `method` as get_hf_quantizer chose it ("bitsandbytes_4bit", "fp8"); nullopt for a method not
// planned here. Refuses what the config's post_init refuses, in its words; `what` names the file.
std::optional<QuantizationConfig> read_quantization_config(const nlohmann::json& quantization,
                                                           const std::string& method,
                                                           const std::string& what);

// CompressedTensorsConfig from a checkpoint's quantization_config (compressed_tensors_config.cpp).
QuantizationConfig read_compressed_tensors(const nlohmann::json& quantization,
                                           const std::string& what);

// core/src/model/quantization_rules.json (tests/python/quantization_rules.py): transformers'
// nn.Linear and nn.Embedding classes, compressed-tensors' preset schemes.
const nlohmann::ordered_json& quantization_rules();

}  // namespace backplane::model_detail
