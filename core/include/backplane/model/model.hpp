// A model as the planner sees it: the module tree transformers builds, with each module's own
// parameters and buffers (shapes and dtypes, never data). Built from a Hugging Face config.json
// or from safetensors headers; consumed by device_map planning and tensor-parallel plans.
#pragma once

#include <backplane/export.hpp>
#include <backplane/model/quantization.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace backplane {

// Element types, named as torch names them without the "torch." prefix.
enum class DType {
  kFloat32,
  kFloat16,
  kBFloat16,
  kFloat64,
  kFloat8E4M3,
  kFloat8E5M2,
  kFloat8E8M0,  // power-of-two scales (fp8 checkpoints' ue8m0 scale_fmt)
  kInt64,
  kInt32,
  kInt16,
  kInt8,
  kUInt8,
  kBool,
};

// "float32", "bfloat16", ...; also torch's aliases ("float", "half", "torch.bfloat16") and
// safetensors' codes ("F32", "BF16", "F8_E4M3", "I64", "BOOL"). Throws InvalidArgument naming
// the value and the accepted names.
BACKPLANE_API DType parse_dtype(std::string_view text);
BACKPLANE_API const char* to_string(DType dtype);  // "bfloat16"; "float8_e4m3fn" as torch says
// Bits per element (bool: 8, as torch stores it).
BACKPLANE_API int dtype_bits(DType dtype);
BACKPLANE_API bool is_floating_point(DType dtype);
BACKPLANE_API bool is_float8(DType dtype);

struct BACKPLANE_API TensorInfo {
  std::string name;  // local to its module: "weight", "bias", "inv_freq"
  std::vector<int64_t> shape;
  DType dtype = DType::kFloat32;
  bool buffer = false;     // a buffer, not a parameter
  bool persistent = true;  // false for non-persistent buffers (not in the state dict)
  // A quantizer's own tensor (packed weights, scales), created with its dtype: from_pretrained's
  // dtype does not change it.
  bool explicit_dtype = false;
  // Bits per element transformers' planner counts for a weight its quantizer quantizes while
  // loading (param_element_size: 4 for bitsandbytes 4-bit, 8 for 8-bit and fp8 on the fly),
  // whatever its dtype on the meta model; nullopt: its dtype's size.
  std::optional<int> quantized_bits;
  // Product of the shape (1 for a scalar). Throws InvalidArgument on a negative dimension or
  // when the product does not fit int64_t.
  int64_t numel() const;
  // numel() x dtype_bits / 8, with the same checks.
  int64_t nbytes() const;
};

struct Module {
  std::string name;                 // local name: "q_proj", "0", "layers"; "" for the root
  std::string class_name;           // "Linear", "LlamaDecoderLayer", "ModuleList", "LlamaRMSNorm"
  std::vector<TensorInfo> tensors;  // its own parameters and buffers, in registration order
  std::vector<Module> children;     // in definition order
};

// The layers use_kernels gives a Hub kernel (the kernels library's kernelize): module classes
// decorated with use_kernel_forward_from_hub, by their Hub layer name ("LlamaRMSNorm" ->
// "RMSNorm", "SiLUActivation" -> "SiLU"), and the classes whose forward calls kernelizable
// functions (use_kernelized_func: "LlamaAttention" -> {"rotary_pos_emb"}). Classes of the
// model only; a class that is in neither keeps its own forward.
struct KernelLayers {
  std::map<std::string, std::string> layers;
  std::map<std::string, std::vector<std::string>> functions;
};

struct ModelDescription {
  std::string architecture;  // "LlamaForCausalLM"
  std::string model_type;    // "llama"
  Module root;
  DType dtype = DType::kFloat32;  // config's torch_dtype / dtype, or the weights' dtype
  // Classes whose modules are never split across devices (the decoder layer).
  std::vector<std::string> no_split_module_classes;
  // Groups of fully qualified parameter names that share storage
  // ({"lm_head.weight", "model.embed_tokens.weight"} with tie_word_embeddings), each sorted.
  // As torch's named_parameters() does, the tree lists a shared parameter once: under the
  // module that registered it first (model.embed_tokens); lm_head then has no tensors.
  std::vector<std::vector<std::string>> tied_parameters;
  // transformers' all_tied_weights_keys: each tied name (the target) -> the name it shares
  // storage with (the source). from_pretrained's sizes skip the targets. Empty when not known
  // (then the first name of each group in definition order is the one counted).
  std::map<std::string, std::string> tied_weights_keys;
  // Hyperparameters the rules read (num_attention_heads, num_key_value_heads, head_dim,
  // hidden_size, intermediate_size, vocab_size, num_hidden_layers).
  std::map<std::string, int64_t> hyperparameters;
  // The model's tensor-parallel rules as transformers' model.tp_plan lists them, in its order:
  // module name patterns ("model.layers.*.self_attn.q_proj") to style ("colwise"). Empty when
  // not known (a tree rebuilt from weights alone). See tensor_parallel.hpp.
  std::vector<std::pair<std::string, std::string>> tp_plan;
  // False when the tree was rebuilt from weights: definition order and non-persistent buffers
  // are then reconstructed, not known (see model_from_safetensors).
  bool from_config = true;
  // Why the tree is not exactly transformers' (one sentence each); empty when it is: a config of
  // an architecture described here, or a tree file of transformers' own build.
  std::vector<std::string> approximate_because;
  // Config validators of transformers' config class that this description did not apply
  // ("transformers' Phi3Config.validate_rope"): the tree is exact for a config they accept,
  // but one they refuse is described all the same. Empty for most architectures.
  std::vector<std::string> unchecked;
  // transformers' warnings for this config, for the caller to show (one sentence each): a
  // quantization_config whose quant_method transformers does not know (it then loads the
  // model unquantized, as described here).
  std::vector<std::string> warnings;
  // nullopt when not known: a tree rebuilt from weights, a tree file written before
  // export-module-tree recorded them.
  std::optional<KernelLayers> kernel_layers;
  // The model class's _keep_in_fp32_modules: name patterns quantizers leave unquantized.
  std::vector<std::string> keep_in_fp32_modules;
  // The quantizer from_pretrained loads this model with: a quantized checkpoint's
  // quantization_config, or one the caller sets (hwprobe plan --quantize). plan_device_map then
  // plans the quantized model (quantization.hpp). The tree itself stays the full-precision one.
  std::optional<QuantizationConfig> quantization;
};

// from_pretrained(quantization_config=config) on `model` (hwprobe plan --quantize): sets its
// quantization. A checkpoint that has its own keeps it, as transformers' merge does: the same
// config class adds transformers' warning to `warnings` (fp8 takes the arguments' dequantize and
// modules_to_not_convert, without one); another class is refused with its ValueError.
BACKPLANE_API void quantize_on_load(ModelDescription& model, const QuantizationConfig& config,
                                    std::vector<std::string>& warnings);

// A module and its fully qualified name ("model.layers.0.mlp"; "" for the root), in the order
// torch's named_modules() yields them: each module before its children, depth first. The
// pointers point into `root` and live as long as it does, unchanged.
struct NamedModule {
  std::string name;
  const Module* module = nullptr;
};
BACKPLANE_API std::vector<NamedModule> named_modules(const Module& root);
// The module with that fully qualified name ("" is the root), or nullptr.
BACKPLANE_API const Module* find_module(const Module& root, std::string_view qualified_name);

// The architectures model_from_config knows: one class per architecture descriptor
// (core/src/model/architectures/: Llama, GPT-2, Mixtral, DeepSeek-V3, gpt-oss, ...; written by
// tests/python/architecture_descriptors.py from transformers 5.24, its config classes' checks
// included, and compared with it by the differential test).
BACKPLANE_API std::vector<std::string> supported_architectures();

// The model AutoModelForCausalLM builds from this config.json in transformers 5.24: the same
// module names, definition order, class names, parameter and buffer shapes and dtypes as its
// named_modules(), named_parameters() and named_buffers() report.
// - Architecture: `model_type` chooses, as AutoModelForCausalLM does; `architectures[0]`, when
//   present, must be the matching class. Without model_type, architectures[0] chooses. An
//   architecture no descriptor has is refused naming the nearest described ones and
//   tools/export-module-tree (its tree file plans any architecture: model_from_tree).
// - Keys are typed as the architecture's config class types them (an int field given 0.5 or
//   null is refused, naming the key and the architecture), aliases of the class's
//   attribute_map are followed, missing keys take the class's defaults, and fields the class
//   fills in (head_dim from hidden_size // num_attention_heads, layer_types from a period) are
//   filled in alike; legacy layer type names ("attention", "mamba") are renamed as
//   PreTrainedConfig does.
// - What transformers refuses is refused, in its words and naming the validator: the config
//   class's own validators (LlamaConfig.validate_architecture: "The hidden size (100) is not a
//   multiple of the number of attention heads (3)."), PreTrainedConfig.validate_layer_type,
//   validate_rope (an odd fully rotated head over 4, a rope type missing its required keys),
//   and nn.Embedding's padding_idx outside the vocabulary. A validator the descriptor could not
//   write down is listed in `unchecked` instead. What transformers builds is described even
//   where it looks wrong (Mistral with 32 query heads over 5 key/value heads).
// - dtype: `dtype`, else `torch_dtype`; it must be float16, bfloat16, float32 or float64 (what
//   torch can build a model in). Without one the parameters are float32, as from_config builds
//   them (from_pretrained would read the weights' dtype: model_from_safetensors does).
// - Refused with InvalidArgument, naming the key and what is accepted: a file over 16 MiB or
//   nested deeper than 64; invalid JSON; an unknown architecture (naming the nearest described
//   ones); a shape axis below 0 or over 2^40, a repeat over 2^16 or over 2^20 modules in all
//   (naming the tensor and the expression that sizes it); an unknown hidden_act; a
//   quantization_config of a method transformers knows (it would swap the Linear layers for
//   the quantizer's own; model_from_safetensors describes such weights), and in transformers'
//   words one it refuses (load_in_4bit with load_in_8bit, no quant_method). One whose
//   quant_method transformers does not know is described unquantized, as from_pretrained
//   loads it, with its warning (naming the methods it knows) in `warnings`.
BACKPLANE_API ModelDescription model_from_config(const std::filesystem::path& config_json);
BACKPLANE_API ModelDescription model_from_config_json(std::string_view text);

// A model described by its safetensors weights: a single `.safetensors` file, a sharded
// checkpoint's `*.index.json` (its weight_map names each tensor's shard), or a folder holding
// model.safetensors.index.json or else model.safetensors. Only the 8-byte header length and
// the JSON header of each file are read, never tensor data.
//
// Each file is checked as the safetensors format requires: header length <= 100,000,000
// bytes and inside the file; a JSON object (nesting <= 64; names valid UTF-8 of at most 64
// non-empty dot-separated parts; duplicate keys refused, which the safetensors crate lets
// pass); each tensor has a known dtype, a shape of non-negative integers whose product fits
// int64, and data_offsets [begin, end) with end - begin = numel x dtype size; the tensors,
// sorted by offset, cover the data area exactly, without gap or overlap. A sharded index must
// list every tensor of its shards and only those, and name shards by relative paths inside
// its folder.
//
// If a config.json of a supported architecture sits in the same folder, it gives the tree
// (model_from_config) and the weights are checked against it: each tensor must be a
// parameter or persistent buffer of that tree with the same shape, and each of those must be
// in the weights (a tied lm_head.weight may be absent or present). Parameter dtypes are the
// config's dtype; without one, the weights' dtype as from_pretrained(dtype="auto") picks it:
// the index's metadata "dtype", else the first floating-point (not float8) tensor in name
// order of the first shard in name order. from_config stays true.
//
// Otherwise (no config.json, one of another architecture, or a quantized one) the tree is
// rebuilt from the dotted tensor names, from_config is false, and approximate_because says what
// could not be known (hwprobe plan prints it and `--exact` refuses such a plan; a tree file of
// tools/export-module-tree gives the exact one). What is inferred:
// - definition order: children sort embeddings first (token embeddings: shared, embeddings,
//   embed_tokens, wte, word_embeddings, tok_embeddings, embed_in; then positions: wpe,
//   embed_positions, position_embeddings, token_type_embeddings; then other embed_*; then
//   encoder), then the known decoder layout names (model, layers,
//   self_attn, q_proj, k_proj, v_proj, o_proj, q_norm, k_norm, mlp, gate_proj, up_proj,
//   down_proj, act_fn, input_layernorm, post_attention_layernorm, norm, rotary_emb), then the
//   other names in natural order (digit runs compare as numbers: layers 2 before 10), the output
//   heads (lm_head, embed_out, score) last; tensors put weight, then bias, then the others;
// - the numbered children of the outermost container that has them (model.layers.N,
//   transformer.h.N, encoder.block.N) are the repeated blocks: each gets the class
//   "block of <container>", which is in no_split_module_classes;
// - a tied head: without lm_head.weight in the weights, and beside an embedding of 2 dims, an
//   lm_head tied to the token embedding (the embedding weight with the most rows), as
//   tie_word_embeddings saves it; a config.json's
//   tie_word_embeddings true ties a saved lm_head.weight too, false never adds one;
// - class names are the guessed block classes or empty; tp_plan is empty; architecture and
//   model_type are "";
// - non-persistent buffers (rotary inv_freq) and modules without saved tensors are absent;
//   tensors keep the files' dtypes;
// - dtype is the weights' dtype as from_pretrained(dtype="auto") picks it (see above);
// - hyperparameters: vocab_size and hidden_size from model.embed_tokens.weight,
//   num_hidden_layers from model.layers.N, intermediate_size from layer 0's mlp.gate_proj,
//   and head_dim, num_attention_heads, num_key_value_heads when layer 0 has q_norm/k_norm
//   (Qwen3-style), each only when those tensors are there.
BACKPLANE_API ModelDescription model_from_safetensors(const std::filesystem::path& path);

// A model as tools/export-module-tree wrote it from transformers' own build on the meta device
// (a JSON file, format "backplane-module-tree", version 1): its modules and classes in
// definition order, parameters and buffers (shape, dtype, persistence), no-split classes, tied
// weights, tp plan and hyperparameters, exactly; from_config is true. For any architecture the
// user's transformers can build. Throws InvalidArgument naming the file and the field for a
// malformed file, another format or version, a tensor outside every listed module, a module
// listed before its parent.
BACKPLANE_API ModelDescription model_from_tree(const std::filesystem::path& file);
BACKPLANE_API ModelDescription model_from_tree_json(std::string_view text,
                                                    std::string_view source = "module tree");

}  // namespace backplane
