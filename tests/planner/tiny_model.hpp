// A 4-layer Llama-like tree small enough to place by hand. float32, so bytes = 4 x elements:
//   model.embed_tokens        Embedding     weight [25, 4]          400 B
//   model.layers.N            LlamaDecoderLayer (no split)          600 B each:
//     self_attn.{q,k,v,o}_proj  Linear      weight [5, 4]     4 x  80 B
//     mlp.{gate,up,down}_proj   Linear      weight [5, 4]     3 x  80 B
//     mlp.act_fn                SiLU        (no tensors)             0 B
//     {input,post_attention}_layernorm RMSNorm weight [5]     2 x  20 B
//   model.norm                LlamaRMSNorm  weight [5]               20 B
//   model.rotary_emb          buffers inv_freq, original_inv_freq [2] 16 B (non-persistent)
//   lm_head                   Linear        weight [25, 4]         400 B, or none when tied
// Total 3236 B untied, 2836 B tied (the tree lists the shared weight once, under embed_tokens).
#pragma once

#include <backplane/model/model.hpp>

#include <string>

namespace planner_test {

inline backplane::TensorInfo tensor(std::string name, std::vector<int64_t> shape,
                                    backplane::DType dtype = backplane::DType::kFloat32) {
  backplane::TensorInfo t;
  t.name = std::move(name);
  t.shape = std::move(shape);
  t.dtype = dtype;
  return t;
}

inline backplane::Module module(std::string name, std::string class_name,
                                std::vector<backplane::TensorInfo> tensors = {},
                                std::vector<backplane::Module> children = {}) {
  backplane::Module m;
  m.name = std::move(name);
  m.class_name = std::move(class_name);
  m.tensors = std::move(tensors);
  m.children = std::move(children);
  return m;
}

inline backplane::Module linear(std::string name, int64_t out, int64_t in) {
  return module(std::move(name), "Linear", {tensor("weight", {out, in})});
}

inline backplane::Module layer(int i) {
  return module(std::to_string(i), "LlamaDecoderLayer", {},
                {module("self_attn", "LlamaAttention", {},
                        {linear("q_proj", 5, 4), linear("k_proj", 5, 4), linear("v_proj", 5, 4),
                         linear("o_proj", 5, 4)}),
                 module("mlp", "LlamaMLP", {},
                        {linear("gate_proj", 5, 4), linear("up_proj", 5, 4),
                         linear("down_proj", 5, 4), module("act_fn", "SiLUActivation")}),
                 module("input_layernorm", "LlamaRMSNorm", {tensor("weight", {5})}),
                 module("post_attention_layernorm", "LlamaRMSNorm", {tensor("weight", {5})})});
}

inline backplane::ModelDescription tiny_llama(bool tied = false, int layers = 4) {
  backplane::ModelDescription model;
  model.architecture = "LlamaForCausalLM";
  model.model_type = "llama";
  model.no_split_module_classes = {"LlamaDecoderLayer"};
  std::vector<backplane::Module> blocks;
  for (int i = 0; i < layers; ++i) blocks.push_back(layer(i));
  backplane::TensorInfo inv_freq = tensor("inv_freq", {2});
  inv_freq.buffer = true;
  inv_freq.persistent = false;
  backplane::TensorInfo original = inv_freq;
  original.name = "original_inv_freq";
  backplane::Module lm_head = tied ? module("lm_head", "Linear") : linear("lm_head", 25, 4);
  model.root = module("", "LlamaForCausalLM", {},
                      {module("model", "LlamaModel", {},
                              {module("embed_tokens", "Embedding", {tensor("weight", {25, 4})}),
                               module("layers", "ModuleList", {}, std::move(blocks)),
                               module("norm", "LlamaRMSNorm", {tensor("weight", {5})}),
                               module("rotary_emb", "LlamaRotaryEmbedding", {inv_freq, original})}),
                       std::move(lm_head)});
  if (tied) model.tied_parameters = {{"lm_head.weight", "model.embed_tokens.weight"}};
  return model;
}

}  // namespace planner_test
