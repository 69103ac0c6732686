// Rotary embeddings as transformers 5.24 configures them: the rope parameters a config gives
// (rope_parameters / rope_scaling, partial_rotary_factor), what validate_rope refuses, and the
// length of the inv_freq buffer each rope type makes. Sources: modeling_rope_utils.py
// (RotaryEmbeddingConfigMixin, ROPE_INIT_FUNCTIONS).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace backplane::model_detail {

// The length of a rotary embedding's inv_freq for a head of `head_dim`, as the rope
// parameters in `config` (rope_parameters / rope_scaling, partial_rotary_factor) make it; for
// the default rope type the whole head, or int(head_dim * partial_rotary_factor) of it when
// `default_rotates_partial`. Throws InvalidArgument naming `what` for parameters the rotary
// embedding cannot be built from (an unknown rope type, a missing required key).
int64_t rope_inv_freq_length(const nlohmann::json& config, const std::string& what,
                             int64_t head_dim, bool default_rotates_partial);

// validate_rope over one entry of rope parameters (`config` as above): the rope type's
// required keys, partial_rotary_factor in [0, 1], and an even rotary dimension when the
// config has a `head_dim` (a fully rotated odd head over 4 is refused, in transformers' words).
void validate_rope(const nlohmann::json& config, const std::string& what,
                   std::optional<int64_t> head_dim, const std::string& layer_type);

}  // namespace backplane::model_detail
