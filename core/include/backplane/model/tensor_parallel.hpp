// Tensor parallelism as transformers 5.24 applies it (DistributedConfig(tp_size=N), the
// model's tp_plan): which module is sharded in which style, and what each rank then holds.
// Sources: distributed/tensor_parallel.py (the styles and how each shards its parameters),
// distributed/mixin.py (model.tp_plan, _expand_parallel_plan), distributed/parallel_utils.py
// (rule matching), models/*/configuration_*.py (base_model_tp_plan) and modeling_*.py (_tp_plan).
#pragma once

#include <backplane/export.hpp>
#include <backplane/model/model.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace backplane {

struct TensorShard {
  std::string name;            // local to its module: "weight", "bias"
  std::vector<int64_t> shape;  // the whole tensor
  DType dtype = DType::kFloat32;
  int shard_dim = -1;  // the dimension split across ranks; -1: every rank holds it whole
  // The tensor's local shape on each rank (tp_size entries). A split dimension of size n gives
  // each rank ceil(n / tp_size), the last ranks what is left (torch.chunk, as DTensor's Shard).
  std::vector<std::vector<int64_t>> rank_shapes;
};

struct TensorParallelModule {
  std::string name;        // fully qualified: "model.layers.0.self_attn.q_proj"
  std::string class_name;  // "Linear"
  // The style transformers applies, by its name: "colwise" (Linear weight and bias split on
  // the output features), "rowwise" (weight split on the input features, bias whole),
  // "embedding_rowwise" (embedding split on the vocabulary), "colwise_gather_output" (as
  // colwise, the output gathered: lm_head), "replicated_with_grad_allreduce" (whole; Qwen3's
  // q_norm / k_norm). "" when no rule names the module: its parameters are whole on every rank.
  std::string style;
  std::string rule;  // the tp_plan pattern that matched ("model.layers.*.mlp.up_proj"), or ""
  std::vector<TensorShard> parameters;  // its own parameters, as in the ModelDescription
};

struct TensorParallelOptions {
  // transformers splits a dimension that tp_size does not divide unevenly (torch.chunk). By
  // default plan_tensor_parallel refuses that for intermediate_size, vocab_size and any other
  // split dimension, so that every rank holds the same; true accepts it. Attention heads must
  // divide either way: a rank must hold whole heads for attention to run.
  bool allow_uneven_shards = false;
};

struct TensorParallelPlan {
  int tp_size = 1;
  // Every module that owns parameters or that a rule names, in named_modules() order.
  std::vector<TensorParallelModule> modules;
  // Parameter bytes each rank holds (tp_size entries): split parameters count their local
  // shard, the others count whole on every rank. A parameter shared by tied modules counts
  // once. Buffers are not counted.
  std::vector<int64_t> rank_parameter_bytes;
  // The part of each rank's bytes that is held whole (the same on every rank).
  int64_t replicated_parameter_bytes = 0;
};

// The plan for `tp_size` ranks with the model's tp_plan (ModelDescription::tp_plan). With
// tp_size 1 no rule applies, as transformers applies none: every style is "". Rules match as
// transformers matches them: the module name with each `.<digits>` segment written `.*`, looked
// up exactly; a rule may also name a parameter.
// Throws InvalidArgument, naming the number and the tp size: tp_size < 1 or > 4096;
// num_attention_heads or num_key_value_heads not divisible by tp_size (when attention is split);
// intermediate_size or vocab_size (when their modules are split), or any other split
// dimension, not divisible by tp_size unless options.allow_uneven_shards; tp_size > 1 for a
// description without a tp_plan (one rebuilt from weights alone); a style backplane does not
// know.
BACKPLANE_API TensorParallelPlan plan_tensor_parallel(const ModelDescription& description,
                                                      int tp_size,
                                                      const TensorParallelOptions& options = {});

}  // namespace backplane
