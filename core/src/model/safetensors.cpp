// model_from_safetensors: module trees from safetensors headers. The format rules are those of
// the safetensors crate (lib.rs: Metadata::validate, read_metadata), checked against the
// safetensors 0.8 package: an 8-byte little-endian header length N <= 100,000,000, a JSON
// object in bytes [8, 8 + N) (spaces around it allowed), tensors whose byte ranges, sorted,
// tile the data area exactly. Stricter than the crate: duplicate keys are refused (it keeps the
// last). Sharded checkpoints are read as transformers' utils/hub.py
// get_checkpoint_shard_files reads their index.
#include "checkpoint_renames.hpp"
#include "config_loader.hpp"
#include "json_input.hpp"

#include <backplane/error.hpp>
#include <backplane/model/model.hpp>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string_view>

namespace backplane {
namespace model_detail {
namespace {

using Json = nlohmann::json;

constexpr uint64_t kMaxHeaderBytes = 100000000;  // safetensors' MAX_HEADER_SIZE
constexpr uint64_t kMaxIndexBytes = 64u << 20;
constexpr uint64_t kMaxConfigBytes = 16u << 20;
constexpr long kMaxDepth = 64;  // dot-separated parts of a tensor name, at most

struct StoredTensor {
  std::string name;
  TensorInfo info;  // name: the full dotted name
  uint64_t begin = 0;
  uint64_t end = 0;
};

struct Shard {
  std::string file;  // as the index names it, or the file name
  std::vector<StoredTensor> tensors;
};

// safetensors' dtype codes. Codes the format has but backplane has no DType for are refused
// by name.
struct Code {
  std::string_view code;
  std::optional<DType> dtype;
};
const Code kCodes[] = {
    {"BOOL", DType::kBool},
    {"U8", DType::kUInt8},
    {"I8", DType::kInt8},
    {"I16", DType::kInt16},
    {"I32", DType::kInt32},
    {"I64", DType::kInt64},
    {"F16", DType::kFloat16},
    {"BF16", DType::kBFloat16},
    {"F32", DType::kFloat32},
    {"F64", DType::kFloat64},
    {"F8_E4M3", DType::kFloat8E4M3},
    {"F8_E5M2", DType::kFloat8E5M2},
    {"F8_E8M0", DType::kFloat8E8M0},
    {"U16", std::nullopt},
    {"U32", std::nullopt},
    {"U64", std::nullopt},
    {"F4", std::nullopt},
    {"F6_E2M3", std::nullopt},
    {"F6_E3M2", std::nullopt},
    {"C64", std::nullopt},
};

DType parse_code(const std::string& code, const std::string& where) {
  for (const Code& entry : kCodes) {
    if (entry.code != code) continue;
    if (entry.dtype) return *entry.dtype;
    throw InvalidArgument(where + " has dtype '" + code +
                          "', which backplane cannot describe; supported: BOOL, U8, I8, I16, I32, "
                          "I64, F16, BF16, F32, F64, F8_E4M3, F8_E5M2");
  }
  throw InvalidArgument(where + " has dtype " + quote_name(code) +
                        ", which is not a safetensors dtype; supported: BOOL, U8, I8, I16, I32, "
                        "I64, F16, BF16, F32, F64, F8_E4M3, F8_E5M2");
}

uint64_t offset(const Json& value, const std::string& where) {
  if (!value.is_number_unsigned()) {
    throw InvalidArgument(where + " has data_offsets " + value.dump() +
                          "; offsets are non-negative integers");
  }
  return value.get<uint64_t>();
}

// A dotted name the tree can hold: non-empty parts between the dots, at most kMaxDepth.
void check_name(const std::string& name, const std::string& what) {
  const bool empty_part = name.empty() || name.front() == '.' || name.back() == '.' ||
                          name.find("..") != std::string::npos;
  if (empty_part) {
    throw InvalidArgument(what + " has the tensor name " + quote_name(name) +
                          "; names are dot-separated parts, none of them empty");
  }
  if (std::count(name.begin(), name.end(), '.') >= kMaxDepth) {
    throw InvalidArgument(what + " has the tensor name " + quote_name(name.substr(0, 64) + "...") +
                          " of more than " + std::to_string(kMaxDepth) + " dot-separated parts");
  }
}

Shard read_shard(const std::filesystem::path& path, const std::string& file_label) {
  const std::string what = "safetensors file '" + path.string() + "'";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    throw InvalidArgument(
        what + (std::filesystem::exists(path, ec) ? " is not a regular file" : " does not exist"));
  }
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec) throw InvalidArgument(what + " cannot be read: " + ec.message());
  if (file_size < 8) {
    throw InvalidArgument(what + " is " + std::to_string(file_size) +
                          " bytes: too short for the 8-byte header length");
  }
  std::ifstream in(path, std::ios::binary);
  unsigned char length_bytes[8];
  if (!in.read(reinterpret_cast<char*>(length_bytes), 8)) {
    throw InvalidArgument(what + " cannot be read");
  }
  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = (header_length << 8) | length_bytes[i];
  if (header_length > kMaxHeaderBytes) {
    throw InvalidArgument(what + " declares a header of " + std::to_string(header_length) +
                          " bytes; at most " + std::to_string(kMaxHeaderBytes) + " are accepted");
  }
  if (header_length > file_size - 8) {
    throw InvalidArgument(what + " declares a header of " + std::to_string(header_length) +
                          " bytes, past the end of the file (" + std::to_string(file_size) +
                          " bytes)");
  }
  std::string header(static_cast<size_t>(header_length), '\0');
  if (!in.read(header.data(), static_cast<std::streamsize>(header_length))) {
    throw InvalidArgument(what + " cannot be read");
  }
  const Json json = parse_json(header, what + " (header)", kUniqueKeys);
  if (!json.is_object()) throw InvalidArgument(what + " has a header that is not a JSON object");

  Shard shard;
  shard.file = file_label;
  for (const auto& [name, entry] : json.items()) {
    if (name == "__metadata__") {
      if (entry.is_null()) continue;
      bool strings = entry.is_object();
      for (const auto& [key, value] : entry.items()) strings = strings && value.is_string();
      if (!strings) {
        throw InvalidArgument(what + " has __metadata__ that is not an object of strings");
      }
      continue;
    }
    check_name(name, what);
    const std::string where = what + ": tensor " + quote_name(name);
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") ||
        !entry.contains("data_offsets")) {
      throw InvalidArgument(where + " needs dtype, shape and data_offsets");
    }
    StoredTensor tensor;
    tensor.name = name;
    tensor.info.name = name;
    if (!entry["dtype"].is_string())
      throw InvalidArgument(where + " has a dtype that is not a string");
    tensor.info.dtype = parse_code(entry["dtype"].get<std::string>(), where);
    const Json& shape = entry["shape"];
    if (!shape.is_array()) throw InvalidArgument(where + " has a shape that is not a list");
    for (const Json& dim : shape) {
      if (!dim.is_number_unsigned() ||
          dim.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        throw InvalidArgument(where + " has the shape " + shape.dump() +
                              "; dimensions are non-negative integers");
      }
      tensor.info.shape.push_back(dim.get<int64_t>());
    }
    const Json& offsets = entry["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2) {
      throw InvalidArgument(where + " has data_offsets " + offsets.dump() +
                            "; expected [begin, end]");
    }
    tensor.begin = offset(offsets[0], where);
    tensor.end = offset(offsets[1], where);
    int64_t bytes = 0;
    try {
      bytes = tensor.info.nbytes();
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(what + ": " + e.what());
    }
    if (tensor.end < tensor.begin) {
      throw InvalidArgument(where + " has data_offsets [" + std::to_string(tensor.begin) + ", " +
                            std::to_string(tensor.end) + "] that end before they begin");
    }
    if (tensor.end - tensor.begin != static_cast<uint64_t>(bytes)) {
      throw InvalidArgument(where + " has data_offsets [" + std::to_string(tensor.begin) + ", " +
                            std::to_string(tensor.end) + "] of " +
                            std::to_string(tensor.end - tensor.begin) + " bytes, but shape " +
                            shape.dump() + " of " + entry["dtype"].get<std::string>() + " takes " +
                            std::to_string(bytes));
    }
    shard.tensors.push_back(std::move(tensor));
  }
  // The byte ranges, sorted, must tile the data area: no gap, no overlap, nothing after.
  std::vector<const StoredTensor*> by_offset;
  for (const StoredTensor& tensor : shard.tensors) by_offset.push_back(&tensor);
  std::sort(by_offset.begin(), by_offset.end(), [](const StoredTensor* a, const StoredTensor* b) {
    return std::make_pair(a->begin, a->end) < std::make_pair(b->begin, b->end);
  });
  uint64_t position = 0;
  for (const StoredTensor* tensor : by_offset) {
    if (tensor->begin != position) {
      throw InvalidArgument(
          what + ": tensor " + quote_name(tensor->name) + " starts at byte " +
          std::to_string(tensor->begin) + " of the data area, where " + std::to_string(position) +
          " was expected (" +
          (tensor->begin < position ? "overlapping the tensor before it" : "leaving a gap") + ")");
    }
    position = tensor->end;
  }
  const uint64_t data_size = file_size - 8 - header_length;
  if (position != data_size) {
    throw InvalidArgument(what + ": the tensors cover " + std::to_string(position) +
                          " bytes of a data area of " + std::to_string(data_size) +
                          (position > data_size ? " (offsets past the end of the file)" : ""));
  }
  return shard;
}

// A shard file named by an index: a relative path that stays in the index's folder.
std::filesystem::path shard_path(const std::filesystem::path& folder, const std::string& file,
                                 const std::string& what) {
  const std::filesystem::path relative(file);
  bool escapes = file.empty() || relative.is_absolute() || relative.has_root_name();
  for (const auto& part : relative) escapes = escapes || part == "..";
  if (escapes) {
    throw InvalidArgument(what + " names the shard " + quote_name(file) +
                          "; shards are relative paths inside the index's folder");
  }
  return folder / relative;
}

std::vector<Shard> read_index(const std::filesystem::path& path, Json& metadata) {
  const std::string what = "safetensors index '" + path.string() + "'";
  const Json index =
      parse_json(internal::read_bounded_file(path, kMaxIndexBytes, what), what, kUniqueKeys);
  if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object()) {
    throw InvalidArgument(what + " has no \"weight_map\" object");
  }
  if (index.contains("metadata") && index["metadata"].is_object()) metadata = index["metadata"];
  std::map<std::string, std::set<std::string>> listed;  // shard file -> tensor names
  const Json& weight_map = index["weight_map"];
  for (const auto& [name, file] : weight_map.items()) {
    if (!file.is_string()) {
      throw InvalidArgument(what + " maps " + quote_name(name) + " to " + file.dump() +
                            "; expected a file name");
    }
    check_name(name, what);
    listed[file.get<std::string>()].insert(name);
  }
  std::vector<Shard> shards;
  for (const auto& [file, names] : listed) {  // sorted, as transformers sorts them
    Shard shard = read_shard(shard_path(path.parent_path(), file, what), file);
    std::set<std::string> stored;
    for (const StoredTensor& tensor : shard.tensors) stored.insert(tensor.name);
    for (const std::string& name : names) {
      if (stored.count(name) == 0) {
        throw InvalidArgument(what + " puts " + quote_name(name) + " in " + quote_name(file) +
                              ", which does not hold it");
      }
    }
    for (const std::string& name : stored) {
      if (names.count(name) > 0) continue;
      const auto elsewhere = weight_map.find(name);
      throw InvalidArgument(
          what +
          (elsewhere == weight_map.end()
               ? " does not list " + quote_name(name) + ", which " + quote_name(file) + " holds"
               : " puts " + quote_name(name) + " in " + quote_name(elsewhere->get<std::string>()) +
                     ", but " + quote_name(file) + " holds it too"));
    }
    shards.push_back(std::move(shard));
  }
  return shards;
}

// from_pretrained(dtype="auto") without a config dtype: the index's metadata dtype, else
// get_state_dict_dtype over the first shard (keys in name order): its first floating-point
// tensor that is not float8, else its first tensor, else float32.
DType weights_dtype(const std::vector<Shard>& shards, const Json& metadata,
                    const std::string& what) {
  if (metadata.is_object() && metadata.contains("dtype")) {
    Json config = Json::object();
    config["dtype"] = metadata["dtype"];
    if (const std::optional<DType> dtype = config_dtype(config, what + " metadata")) return *dtype;
  }
  if (shards.empty() || shards.front().tensors.empty()) return DType::kFloat32;
  std::vector<const StoredTensor*> sorted;
  for (const StoredTensor& tensor : shards.front().tensors) sorted.push_back(&tensor);
  std::sort(sorted.begin(), sorted.end(),
            [](const StoredTensor* a, const StoredTensor* b) { return a->name < b->name; });
  for (const StoredTensor* tensor : sorted) {
    const DType dtype = tensor->info.dtype;
    if (is_floating_point(dtype) && !is_float8(dtype)) {
      return dtype;
    }
  }
  return sorted.front()->info.dtype;
}

// Rebuilding a tree from names: the known decoder layout first, then natural order.
constexpr std::string_view kLayout[] = {
    "model",
    "embed_tokens",
    "layers",
    "self_attn",
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "q_norm",
    "k_norm",
    "mlp",
    "gate_proj",
    "up_proj",
    "down_proj",
    "act_fn",
    "input_layernorm",
    "post_attention_layernorm",
    "norm",
    "rotary_emb",
};

// Names of embeddings and encoders in the families transformers has, in the order it defines
// them: token embeddings (GPT-2's wte, BERT's embeddings, GPT-NeoX's embed_in, T5's shared),
// then position embeddings (wpe), then encoders. kNoEmbedding for the other names.
constexpr size_t kNoEmbedding = 100;
size_t embedding_rank(const std::string& name) {
  static const char* const kTokens[] = {"shared",          "embeddings",     "embed_tokens", "wte",
                                        "word_embeddings", "tok_embeddings", "embed_in"};
  static const char* const kPositions[] = {"wpe", "embed_positions", "position_embeddings",
                                           "token_type_embeddings"};
  for (const char* known : kTokens) {
    if (name == known) return 0;
  }
  for (const char* known : kPositions) {
    if (name == known) return 1;
  }
  if (name.rfind("embed_", 0) == 0 && name != "embed_out") return 2;
  return name == "encoder" ? 3 : kNoEmbedding;
}

bool is_embedding_name(const std::string& name) {
  return embedding_rank(name) != kNoEmbedding;
}

bool is_head_name(const std::string& name) {
  return name == "lm_head" || name == "embed_out" || name == "score";
}

// Unknown embeddings first, then the known decoder names in their order, the other unknown
// names, and the output heads last.
size_t layout_rank(const std::string& name) {
  const size_t known = 4;  // after the four embedding ranks
  if (is_head_name(name)) return known + std::size(kLayout) + 1;
  for (size_t i = 0; i < std::size(kLayout); ++i) {
    if (kLayout[i] == name) return known + i;
  }
  return is_embedding_name(name) ? embedding_rank(name) : known + std::size(kLayout);
}

// Natural order: runs of digits compare by value, everything else bytewise.
bool natural_less(const std::string& a, const std::string& b) {
  size_t i = 0;
  size_t j = 0;
  while (i < a.size() && j < b.size()) {
    const bool da = std::isdigit(static_cast<unsigned char>(a[i])) != 0;
    const bool db = std::isdigit(static_cast<unsigned char>(b[j])) != 0;
    if (da && db) {
      size_t ei = i;
      size_t ej = j;
      while (ei < a.size() && std::isdigit(static_cast<unsigned char>(a[ei]))) ++ei;
      while (ej < b.size() && std::isdigit(static_cast<unsigned char>(b[ej]))) ++ej;
      std::string_view na(a.data() + i, ei - i);
      std::string_view nb(b.data() + j, ej - j);
      while (na.size() > 1 && na.front() == '0') na.remove_prefix(1);
      while (nb.size() > 1 && nb.front() == '0') nb.remove_prefix(1);
      if (na.size() != nb.size()) return na.size() < nb.size();
      if (na != nb) return na < nb;
      if (ei - i != ej - j) return ei - i < ej - j;  // "01" after "1"
      i = ei;
      j = ej;
      continue;
    }
    if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j;
}

void sort_tree(Module& module) {
  std::stable_sort(module.children.begin(), module.children.end(),
                   [](const Module& a, const Module& b) {
                     const size_t ra = layout_rank(a.name);
                     const size_t rb = layout_rank(b.name);
                     if (ra != rb) return ra < rb;
                     return natural_less(a.name, b.name);
                   });
  const auto tensor_rank = [](const std::string& name) {
    return name == "weight" ? 0 : name == "bias" ? 1 : 2;
  };
  std::stable_sort(module.tensors.begin(), module.tensors.end(),
                   [&](const TensorInfo& a, const TensorInfo& b) {
                     if (tensor_rank(a.name) != tensor_rank(b.name)) {
                       return tensor_rank(a.name) < tensor_rank(b.name);
                     }
                     return natural_less(a.name, b.name);
                   });
  for (Module& child : module.children) sort_tree(child);
}

// The tree as names build it; children found by name in log time, however many there are.
struct Node {
  std::map<std::string, std::unique_ptr<Node>> children;
  std::vector<TensorInfo> tensors;
  std::set<std::string> tensor_names;
};

Module to_module(std::string name, Node& node) {
  Module module;
  module.name = std::move(name);
  module.tensors = std::move(node.tensors);
  for (auto& [child_name, child] : node.children) {
    module.children.push_back(to_module(child_name, *child));
  }
  return module;
}

// Numbered children of a container (model.layers.0, transformer.h.7) are the repeated blocks
// every architecture keeps whole (its _no_split_modules): each gets the class "block of
// <container>", which is no-split.
void guess_blocks(ModelDescription& description) {
  std::vector<std::string> containers;
  std::function<void(Module&, const std::string&)> visit = [&](Module& module,
                                                               const std::string& name) {
    const bool numbered =
        !module.children.empty() &&
        std::all_of(module.children.begin(), module.children.end(), [](const Module& child) {
          return !child.name.empty() &&
                 child.name.find_first_not_of("0123456789") == std::string::npos;
        });
    // The outermost numbered container holds the blocks; one inside a block (unfused experts)
    // is inside a no-split module already.
    if (numbered) {
      const std::string block = "block of " + (name.empty() ? std::string("the model") : name);
      for (Module& child : module.children) child.class_name = block;
      description.no_split_module_classes.push_back(block);
      containers.push_back(name);
      return;
    }
    for (Module& child : module.children) {
      visit(child, name.empty() ? child.name : name + "." + child.name);
    }
  };
  visit(description.root, "");
  if (!containers.empty()) {
    std::string list;
    for (const std::string& c : containers) list += (list.empty() ? "" : ", ") + c;
    description.approximate_because.push_back("no-split classes guessed: the numbered blocks of " +
                                              list + " are kept whole");
  }
}

// The token embedding: of the 2-dim embedding weights, the one with the most rows (the
// vocabulary; position embeddings have fewer), the first in definition order on a tie; "" when
// there is none.
std::string token_embedding(const Module& root) {
  std::string best;
  int64_t rows = -1;
  for (const NamedModule& named : named_modules(root)) {
    const size_t dot = named.name.rfind('.');
    const std::string local = dot == std::string::npos ? named.name : named.name.substr(dot + 1);
    if (!is_embedding_name(local) || local == "encoder" || local == "embeddings") continue;
    for (const TensorInfo& t : named.module->tensors) {
      if (t.name == "weight" && t.shape.size() == 2 && t.shape[0] > rows) {
        rows = t.shape[0];
        best = named.name + ".weight";
      }
    }
  }
  return best;
}

// A causal LM whose checkpoint has no lm_head.weight ties it to its embedding, as
// tie_word_embeddings does (safetensors saves a tied weight once): the head is added, tied.
// With tie_word_embeddings true and a saved lm_head.weight, that copy is the same tensor.
void guess_tied_head(ModelDescription& description, std::optional<bool> tie_word_embeddings) {
  if (tie_word_embeddings == false) return;
  const std::string embedding = token_embedding(description.root);
  if (embedding.empty()) return;
  Module* head = nullptr;
  for (Module& child : description.root.children) {
    if (child.name == "lm_head") head = &child;
  }
  if (head != nullptr && !tie_word_embeddings) return;  // saved untied: its own weight
  if (head == nullptr) {
    description.root.children.push_back(Module{"lm_head", "", {}, {}});
    head = &description.root.children.back();
  }
  head->tensors.erase(std::remove_if(head->tensors.begin(), head->tensors.end(),
                                     [](const TensorInfo& t) { return t.name == "weight"; }),
                      head->tensors.end());
  description.tied_parameters.push_back({embedding, "lm_head.weight"});
  std::sort(description.tied_parameters.back().begin(), description.tied_parameters.back().end());
  description.approximate_because.push_back(
      "tied weights guessed: lm_head.weight is tied to " + embedding +
      (tie_word_embeddings ? " (config.json: tie_word_embeddings)"
                           : " (the weights hold no lm_head.weight)"));
}

// What a config.json of an architecture not described here still tells.
struct ConfigHints {
  std::optional<bool> tie_word_embeddings;
  std::string model_type;
};

ModelDescription from_weights(const std::vector<Shard>& shards, DType dtype,
                              const std::string& what, const ConfigHints& hints) {
  const CheckpointRenames& renames = checkpoint_renames(hints.model_type);
  bool renamed = false;
  ModelDescription description;
  description.from_config = false;
  description.dtype = dtype;
  const auto conflict = [&](const std::string& name) {
    return InvalidArgument("The weights in " + what + " name " + quote_name(name) +
                           " both as a tensor and as a module holding other tensors");
  };
  Node root;
  for (const Shard& shard : shards) {
    for (const StoredTensor& saved : shard.tensors) {
      // The name from_pretrained gives the tensor (transformers' checkpoint renames).
      StoredTensor stored = saved;
      stored.name = renames.apply(saved.name, renamed);
      Node* node = &root;
      size_t start = 0;
      size_t dot = 0;
      while ((dot = stored.name.find('.', start)) != std::string::npos) {
        const std::string part = stored.name.substr(start, dot - start);
        if (node->tensor_names.count(part) > 0) throw conflict(stored.name.substr(0, dot));
        std::unique_ptr<Node>& next = node->children[part];
        if (!next) next = std::make_unique<Node>();
        node = next.get();
        start = dot + 1;
      }
      TensorInfo info = stored.info;
      info.name = stored.name.substr(start);
      if (node->children.count(info.name) > 0) throw conflict(stored.name);
      if (!node->tensor_names.insert(info.name).second) {
        throw InvalidArgument("The weights in " + what + " hold " + quote_name(stored.name) +
                              " twice");
      }
      node->tensors.push_back(std::move(info));
    }
  }
  description.root = to_module("", root);
  sort_tree(description.root);
  description.approximate_because.push_back(
      "the module tree is rebuilt from the tensor names (no config.json of an architecture "
      "backplane describes): definition order is reconstructed, class names are unknown");
  if (renamed) {
    description.approximate_because.push_back(
        "checkpoint names renamed as transformers loads a " + hints.model_type +
        " checkpoint (its weight conversion, e.g. embed_out to lm_head)");
  }
  if (renames.fuses) {
    description.approximate_because.push_back(
        "transformers fuses some of these tensors as it loads a " + hints.model_type +
        " checkpoint (MoE experts): inside the blocks the names differ from the model's, the "
        "blocks' sizes do not");
  }
  guess_blocks(description);
  guess_tied_head(description, hints.tie_word_embeddings);
  description.approximate_because.push_back(
      "non-persistent buffers (RoPE's inv_freq) and modules without saved tensors are not in "
      "the weights; from_pretrained also places them");

  // What the standard decoder layout tells about the sizes.
  const auto shape_of = [&](const char* name) -> const std::vector<int64_t>* {
    const std::string full = name;
    const size_t dot = full.rfind('.');
    const Module* module = find_module(description.root, full.substr(0, dot));
    if (module == nullptr) return nullptr;
    for (const TensorInfo& tensor : module->tensors) {
      if (tensor.name == full.substr(dot + 1)) return &tensor.shape;
    }
    return nullptr;
  };
  auto& hp = description.hyperparameters;
  if (const auto* embed = shape_of("model.embed_tokens.weight"); embed && embed->size() == 2) {
    hp["vocab_size"] = (*embed)[0];
    hp["hidden_size"] = (*embed)[1];
  }
  if (const Module* layers = find_module(description.root, "model.layers")) {
    hp["num_hidden_layers"] = static_cast<int64_t>(layers->children.size());
  }
  if (const auto* gate = shape_of("model.layers.0.mlp.gate_proj.weight");
      gate && gate->size() == 2) {
    hp["intermediate_size"] = (*gate)[0];
  }
  const auto* q_norm = shape_of("model.layers.0.self_attn.q_norm.weight");
  const auto* q = shape_of("model.layers.0.self_attn.q_proj.weight");
  const auto* k = shape_of("model.layers.0.self_attn.k_proj.weight");
  if (q_norm && q && k && q_norm->size() == 1 && q->size() == 2 && k->size() == 2 &&
      (*q_norm)[0] > 0 && (*q)[0] % (*q_norm)[0] == 0 && (*k)[0] % (*q_norm)[0] == 0) {
    hp["head_dim"] = (*q_norm)[0];
    hp["num_attention_heads"] = (*q)[0] / (*q_norm)[0];
    hp["num_key_value_heads"] = (*k)[0] / (*q_norm)[0];
  }
  return description;
}

// Tensors transformers fuses as it loads them (MoE experts.N.w1 and w3 into
// experts.gate_up_proj): the stored ones under a module must hold as many elements as the
// module's fused tensors, which then count as seen.
void check_fused(const ModelDescription& description,
                 const std::map<std::string, const TensorInfo*>& expected,
                 std::set<std::string>& seen, const std::map<std::string, int64_t>& unfused,
                 const std::string& what) {
  std::map<std::string, int64_t> fused;  // module -> elements of its tensors not yet seen
  for (const auto& [name, tensor] : expected) {
    if (seen.count(name) > 0) continue;
    const size_t dot = name.rfind('.');
    fused[dot == std::string::npos ? "" : name.substr(0, dot)] += tensor->numel();
  }
  std::map<std::string, int64_t> stored;  // module -> elements the weights hold under it
  for (const auto& [name, elements] : unfused) {
    std::string owner;
    for (const auto& [module, _] : fused) {
      if (!module.empty() && name.rfind(module + ".", 0) == 0 && module.size() > owner.size()) {
        owner = module;
      }
    }
    if (owner.empty()) {
      throw InvalidArgument("The weights hold " + quote_name(name) + " (as transformers renames " +
                            "it), which " + description.architecture + " as " + what +
                            " describes it does not have");
    }
    stored[owner] += elements;
  }
  for (const auto& [module, elements] : stored) {
    if (elements != fused.at(module)) {
      throw InvalidArgument("The weights hold " + std::to_string(elements) + " elements under " +
                            quote_name(module) + ", which " + description.architecture + " as " +
                            what + " fuses into " + std::to_string(fused.at(module)));
    }
    for (const auto& [name, tensor] : expected) {
      if (name.rfind(module + ".", 0) == 0 &&
          name.find('.', module.size() + 1) == std::string::npos) {
        seen.insert(name);
      }
    }
  }
}

// The config's tree, checked against the weights.
void check_against_config(const ModelDescription& description, const std::vector<Shard>& shards,
                          const std::string& what) {
  std::map<std::string, const TensorInfo*> expected;  // the state dict of the tree
  for (const NamedModule& named : named_modules(description.root)) {
    for (const TensorInfo& tensor : named.module->tensors) {
      if (tensor.buffer && !tensor.persistent) continue;
      expected[named.name.empty() ? tensor.name : named.name + "." + tensor.name] = &tensor;
    }
  }
  std::map<std::string, std::string> tied;  // a name the tree lists once -> the listed one
  for (const auto& group : description.tied_parameters) {
    for (const std::string& name : group) {
      if (expected.count(name) > 0) {
        for (const std::string& alias : group) {
          if (alias != name) tied[alias] = name;
        }
      }
    }
  }
  // Checkpoints keep the names (and unfused experts) transformers renames and fuses as it
  // loads them: a stored name is first renamed as from_pretrained renames it.
  const CheckpointRenames& renames = checkpoint_renames(description.model_type);
  std::map<std::string, int64_t> unfused;  // renamed name -> elements, where nothing matched
  std::set<std::string> seen;
  for (const Shard& shard : shards) {
    for (const StoredTensor& stored : shard.tensors) {
      bool renamed = false;
      const std::string as_loaded = renames.apply(stored.name, renamed);
      std::string name = as_loaded;
      const bool alias = expected.count(name) == 0 && tied.count(name) > 0;
      if (alias) name = tied[name];
      const auto found = expected.find(name);
      if (found == expected.end() && renames.fuses) {
        unfused[name] = stored.info.numel();
        continue;
      }
      if (found == expected.end()) {
        throw InvalidArgument("The weights hold " + quote_name(stored.name) + ", which " +
                              description.architecture + " as " + what +
                              " describes it does not have");
      }
      if (found->second->shape != stored.info.shape) {
        const auto text = [](const std::vector<int64_t>& shape) { return Json(shape).dump(); };
        throw InvalidArgument("The weights hold " + quote_name(stored.name) + " of shape " +
                              text(stored.info.shape) + ", but " + what + " gives it shape " +
                              text(found->second->shape));
      }
      // A tied head stored too does not stand for its source; the source of a tie does stand
      // for the name the tree lists it under (RoBERTa's tree lists lm_head.decoder.weight,
      // save_pretrained keeps roberta.embeddings.word_embeddings.weight).
      const bool source =
          std::any_of(description.tied_weights_keys.begin(), description.tied_weights_keys.end(),
                      [&](const auto& tie) { return tie.second == as_loaded; });
      if (!alias || source) seen.insert(name);
    }
  }
  check_fused(description, expected, seen, unfused, what);
  for (const auto& [name, tensor] : expected) {
    if (seen.count(name) == 0) {
      throw InvalidArgument("The weights lack " + quote_name(name) + ", which " +
                            description.architecture + " as " + what + " describes it has");
    }
  }
}

}  // namespace
}  // namespace model_detail

ModelDescription model_from_safetensors(const std::filesystem::path& path) {
  using namespace model_detail;
  std::filesystem::path target = path;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    if (std::filesystem::exists(path / "model.safetensors.index.json", ec)) {
      target = path / "model.safetensors.index.json";
    } else if (std::filesystem::exists(path / "model.safetensors", ec)) {
      target = path / "model.safetensors";
    } else {
      throw InvalidArgument("Folder '" + path.string() +
                            "' holds neither model.safetensors.index.json nor model.safetensors");
    }
  }
  Json metadata;
  std::vector<Shard> shards;
  const std::string file_name = target.filename().string();
  if (file_name.size() >= 5 && file_name.compare(file_name.size() - 5, 5, ".json") == 0) {
    shards = read_index(target, metadata);
  } else {
    shards.push_back(read_shard(target, file_name));
  }
  const std::filesystem::path config_path = target.parent_path() / "config.json";
  if (std::filesystem::is_regular_file(config_path, ec)) {
    const std::string what = "config.json '" + config_path.string() + "'";
    const Json config = parse_json(internal::read_bounded_file(config_path, kMaxConfigBytes, what),
                                   what, kLastKeyWins);
    if (names_supported_architecture(config)) {
      std::optional<DType> dtype = config_dtype(config, what);
      if (!dtype) {
        dtype = weights_dtype(shards, metadata, "'" + target.string() + "'");
        if (*dtype != DType::kFloat32 && *dtype != DType::kFloat16 && *dtype != DType::kBFloat16 &&
            *dtype != DType::kFloat64) {
          throw InvalidArgument(std::string("The weights' dtype ") + to_string(*dtype) +
                                " (what from_pretrained would pick, as " + what +
                                " sets none) is not one a model can be built in");
        }
      }
      ModelDescription description = build_from_config(config, what, dtype);
      // A quantized checkpoint's files hold the quantizer's packed tensors, not the dense
      // modules; transformers sizes it from the swapped meta model, never from the files.
      if (!description.quantization) check_against_config(description, shards, what);
      return description;
    }
  }
  // A config.json of an architecture not described here still tells whether weights are tied
  // and which checkpoint renames apply.
  ConfigHints hints;
  if (std::filesystem::is_regular_file(config_path, ec)) {
    const std::string what = "config.json '" + config_path.string() + "'";
    const Json config = parse_json(internal::read_bounded_file(config_path, kMaxConfigBytes, what),
                                   what, kLastKeyWins);
    if (config.is_object() && config.contains("tie_word_embeddings") &&
        config["tie_word_embeddings"].is_boolean()) {
      hints.tie_word_embeddings = config["tie_word_embeddings"].get<bool>();
    }
    if (config.is_object() && config.contains("model_type") && config["model_type"].is_string()) {
      hints.model_type = config["model_type"].get<std::string>();
    }
  }
  const std::string what = "'" + target.string() + "'";
  return from_weights(shards, weights_dtype(shards, metadata, what), what, hints);
}

}  // namespace backplane
