// The checkpoint-to-model renames of transformers 5's weight conversion, per model_type: data
// (checkpoint_renames.json, written by tests/python/checkpoint_renames.py from the pinned
// transformers, compiled in), for the weights path of model_from_safetensors.
#pragma once

#include <string>
#include <vector>

namespace backplane::model_detail {

struct CheckpointRenames {
  bool known = false;  // the model_type is in the data
  bool fuses = false;  // transformers also fuses some tensors as it loads them (MoE experts)
  // `name` as the model names it after from_pretrained's renames; `renamed` says whether any
  // rule changed it.
  std::string apply(const std::string& name, bool& renamed) const;

  struct Rule;
  std::vector<const Rule*> rules;
};

// The renames of one model_type; for one not in the data, known is false and the rules are
// the legacy renames transformers applies to every model.
const CheckpointRenames& checkpoint_renames(const std::string& model_type);

}  // namespace backplane::model_detail
