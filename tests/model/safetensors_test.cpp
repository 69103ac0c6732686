// model_from_safetensors on small files written here: valid ones, each way a header can be
// wrong, sharded indexes, and a config.json next to the weights.
#include <backplane/error.hpp>
#include <backplane/model/model.hpp>

#include "temp_folder.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// A safetensors file: 8-byte little-endian length, the header, `data_bytes` zero bytes.
// `declared` replaces the header length written, to lie about it.
void write_safetensors(const fs::path& path, const std::string& header, uint64_t data_bytes,
                       std::optional<uint64_t> declared = std::nullopt) {
  std::ofstream out(path, std::ios::binary);
  uint64_t length = declared.value_or(header.size());
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>((length >> (8 * i)) & 0xff));
  out << header;
  out << std::string(static_cast<size_t>(data_bytes), '\0');
}

std::string error_of(const fs::path& path) {
  try {
    backplane::model_from_safetensors(path);
  } catch (const backplane::InvalidArgument& e) {
    return e.what();
  }
  return "(no error)";
}

std::vector<std::string> tensor_names(const backplane::ModelDescription& d) {
  std::vector<std::string> names;
  for (const auto& named : backplane::named_modules(d.root)) {
    for (const auto& t : named.module->tensors) {
      names.push_back(named.name.empty() ? t.name : named.name + "." + t.name);
    }
  }
  return names;
}

// A Llama-shaped checkpoint: vocab 10, hidden 4, intermediate 6, heads 2 (head_dim 2), kv 1,
// 11 layers, so that natural order (layers 2 before 10) shows; F16 except the norms (F32).
struct Checkpoint {
  std::string header = "{";
  uint64_t offset = 0;

  void add(const std::string& name, const char* dtype, std::vector<int64_t> shape, int bytes) {
    uint64_t count = 1;
    for (int64_t d : shape) count *= static_cast<uint64_t>(d);
    const uint64_t size = count * static_cast<uint64_t>(bytes);
    if (header.size() > 1) header += ",";
    header += "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":[";
    for (size_t i = 0; i < shape.size(); ++i) header += (i ? "," : "") + std::to_string(shape[i]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + size) + "]}";
    offset += size;
  }
  std::string text() const { return header + "}"; }
};

Checkpoint llama_checkpoint(int layers = 11, bool lm_head = true) {
  Checkpoint c;
  // Written in a scrambled order: the file's order must not matter.
  if (lm_head) c.add("lm_head.weight", "F16", {10, 4}, 2);
  c.add("model.norm.weight", "F32", {4}, 4);
  for (int i = layers - 1; i >= 0; --i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    c.add(p + "post_attention_layernorm.weight", "F32", {4}, 4);
    c.add(p + "mlp.down_proj.weight", "F16", {4, 6}, 2);
    c.add(p + "mlp.up_proj.weight", "F16", {6, 4}, 2);
    c.add(p + "mlp.gate_proj.weight", "F16", {6, 4}, 2);
    c.add(p + "self_attn.o_proj.weight", "F16", {4, 4}, 2);
    c.add(p + "self_attn.v_proj.weight", "F16", {2, 4}, 2);
    c.add(p + "self_attn.k_proj.weight", "F16", {2, 4}, 2);
    c.add(p + "self_attn.q_proj.weight", "F16", {4, 4}, 2);
    c.add(p + "input_layernorm.weight", "F32", {4}, 4);
  }
  c.add("model.embed_tokens.weight", "F16", {10, 4}, 2);
  return c;
}

TEST(Safetensors, RebuildsTheTreeFromNames) {
  backplane::testing::TempFolder folder;
  const Checkpoint c = llama_checkpoint();
  write_safetensors(folder.path() / "model.safetensors", c.text(), c.offset);
  const backplane::ModelDescription d =
      backplane::model_from_safetensors(folder.path() / "model.safetensors");
  EXPECT_FALSE(d.from_config);
  EXPECT_EQ(d.architecture, "");
  // The numbered layers are the blocks kept whole; lm_head is saved, so nothing is tied.
  EXPECT_EQ(d.no_split_module_classes, std::vector<std::string>{"block of model.layers"});
  EXPECT_EQ(backplane::find_module(d.root, "model.layers.3")->class_name, "block of model.layers");
  EXPECT_TRUE(d.tied_parameters.empty());
  EXPECT_TRUE(d.tp_plan.empty());
  ASSERT_EQ(d.approximate_because.size(), 3u);
  EXPECT_NE(d.approximate_because[0].find("rebuilt from the tensor names"), std::string::npos);
  EXPECT_NE(d.approximate_because[1].find("the numbered blocks of model.layers are kept whole"),
            std::string::npos);
  // auto dtype: first floating tensor by name in the file is lm_head.weight, F16.
  EXPECT_EQ(d.dtype, backplane::DType::kFloat16);

  std::vector<std::string> expected = {"model.embed_tokens.weight"};
  for (int i = 0; i < 11; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    for (const char* t :
         {"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight",
          "self_attn.o_proj.weight", "mlp.gate_proj.weight", "mlp.up_proj.weight",
          "mlp.down_proj.weight", "input_layernorm.weight", "post_attention_layernorm.weight"}) {
      expected.push_back(p + t);
    }
  }
  expected.insert(expected.end(), {"model.norm.weight", "lm_head.weight"});
  EXPECT_EQ(tensor_names(d), expected);

  const backplane::Module* norm = backplane::find_module(d.root, "model.layers.10.input_layernorm");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->class_name, "");
  EXPECT_EQ(norm->tensors[0].dtype, backplane::DType::kFloat32);
  EXPECT_EQ(norm->tensors[0].shape, std::vector<int64_t>{4});
  EXPECT_FALSE(norm->tensors[0].buffer);
  const std::map<std::string, int64_t> hyperparameters = {
      {"vocab_size", 10}, {"hidden_size", 4}, {"num_hidden_layers", 11}, {"intermediate_size", 6}};
  EXPECT_EQ(d.hyperparameters, hyperparameters);
  // The same through the folder.
  EXPECT_EQ(tensor_names(backplane::model_from_safetensors(folder.path())), expected);
}

TEST(Safetensors, UnknownNamesSortNaturallyAfterTheKnownLayoutAndTheHeadLast) {
  backplane::testing::TempFolder folder;
  Checkpoint c;
  c.add("zeta.b10.bias", "F32", {1}, 4);
  c.add("zeta.b9.weight", "F32", {1}, 4);
  c.add("zeta.b10.weight", "F32", {1}, 4);
  c.add("alpha.x", "I64", {}, 8);
  c.add("lm_head.weight", "BF16", {2, 2}, 2);
  write_safetensors(folder.path() / "w.safetensors", c.text(), c.offset);
  const auto d = backplane::model_from_safetensors(folder.path() / "w.safetensors");
  EXPECT_EQ(tensor_names(d),
            (std::vector<std::string>{"alpha.x", "zeta.b9.weight", "zeta.b10.weight",
                                      "zeta.b10.bias", "lm_head.weight"}));
  EXPECT_EQ(d.dtype, backplane::DType::kBFloat16);
  EXPECT_TRUE(d.hyperparameters.empty());
}

// GPT-2 as safetensors saves it (no lm_head: tied), without a config.json: embeddings first,
// the numbered blocks whole, the head added and tied to wte, as transformers would build it.
TEST(Safetensors, AnUndescribedDecoderGetsItsEmbeddingsFirstBlocksWholeAndItsTiedHead) {
  backplane::testing::TempFolder folder;
  Checkpoint c;
  for (int i = 0; i < 2; ++i) {
    const std::string p = "transformer.h." + std::to_string(i) + ".";
    c.add(p + "attn.c_attn.weight", "F32", {8, 24}, 4);
    c.add(p + "ln_1.weight", "F32", {8}, 4);
  }
  c.add("transformer.ln_f.weight", "F32", {8}, 4);
  c.add("transformer.wpe.weight", "F32", {16, 8}, 4);
  c.add("transformer.wte.weight", "F32", {50, 8}, 4);
  write_safetensors(folder.path() / "model.safetensors", c.text(), c.offset);
  const auto d = backplane::model_from_safetensors(folder.path() / "model.safetensors");
  std::vector<std::string> order;
  for (const backplane::NamedModule& m : backplane::named_modules(d.root)) order.push_back(m.name);
  EXPECT_EQ(order, (std::vector<std::string>{
                       "", "transformer", "transformer.wte", "transformer.wpe", "transformer.h",
                       "transformer.h.0", "transformer.h.0.attn", "transformer.h.0.attn.c_attn",
                       "transformer.h.0.ln_1", "transformer.h.1", "transformer.h.1.attn",
                       "transformer.h.1.attn.c_attn", "transformer.h.1.ln_1", "transformer.ln_f",
                       "lm_head"}));
  EXPECT_EQ(d.no_split_module_classes, std::vector<std::string>{"block of transformer.h"});
  EXPECT_EQ(d.tied_parameters,
            (std::vector<std::vector<std::string>>{{"lm_head.weight", "transformer.wte.weight"}}));
  EXPECT_NE(d.approximate_because.at(2).find("lm_head.weight is tied to transformer.wte.weight "
                                             "(the weights hold no lm_head.weight)"),
            std::string::npos);
  // tie_word_embeddings false in a config.json of an undescribed architecture: no head added.
  std::ofstream(folder.path() / "config.json")
      << R"({"model_type": "an_architecture_to_come", "tie_word_embeddings": false})";
  EXPECT_TRUE(backplane::model_from_safetensors(folder.path() / "model.safetensors")
                  .tied_parameters.empty());
}

struct Broken {
  const char* name;
  std::string header;
  uint64_t data_bytes;
  std::optional<uint64_t> declared;
  std::string message;
};

void PrintTo(const Broken& row, std::ostream* out) {
  *out << row.name;
}

class BrokenFile : public ::testing::TestWithParam<Broken> {};

TEST_P(BrokenFile, IsRefusedWithTheReason) {
  backplane::testing::TempFolder folder;
  const fs::path path = folder.path() / "model.safetensors";
  write_safetensors(path, GetParam().header, GetParam().data_bytes, GetParam().declared);
  const std::string message = error_of(path);
  EXPECT_NE(message.find(GetParam().message), std::string::npos) << message;
  EXPECT_NE(message.find("model.safetensors"), std::string::npos) << message;
}

const std::string kOne = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";

INSTANTIATE_TEST_SUITE_P(
    Table, BrokenFile,
    ::testing::Values(
        Broken{"HeaderPastTheEnd", "{" + kOne + "}", 8, uint64_t{5000},
               "declares a header of 5000 bytes, past the end of the file"},
        Broken{"HeaderOverTheBound", "{}", 0, uint64_t{100000001},
               "declares a header of 100000001 bytes; at most 100000000 are accepted"},
        Broken{"NotAnObject", "[1]", 0, std::nullopt, "has a header that is not a JSON object"},
        Broken{"InvalidJson", "{\"a\":", 0, std::nullopt, "is not valid JSON"},
        Broken{"Overlap",
               R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
               12, std::nullopt,
               "starts at byte 4 of the data area, where 8 was expected (overlapping"},
        Broken{"Gap",
               R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
               R"("b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})",
               24, std::nullopt, "leaving a gap"},
        Broken{"PastTheData", "{" + kOne + "}", 4, std::nullopt,
               "the tensors cover 8 bytes of a data area of 4 (offsets past the end"},
        Broken{"DataLeftOver", "{" + kOne + "}", 12, std::nullopt,
               "the tensors cover 8 bytes of a data area of 12"},
        Broken{"EndBeforeBegin", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8,
               std::nullopt, "end before they begin"},
        Broken{"SizeDisagreesWithShape",
               R"({"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,8]}})", 8, std::nullopt,
               "of 8 bytes, but shape [3] of BF16 takes 6"},
        Broken{"DuplicateKey", "{" + kOne + "," + kOne + "}", 8, std::nullopt,
               "has the key 'a' twice"},
        Broken{"NonUtf8Name",
               "{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
               std::nullopt, "UTF-8"},
        Broken{"LoneSurrogate", R"({"a\udc00":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
               8, std::nullopt, "surrogate"},
        Broken{"OverflowingShape",
               R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8,
               std::nullopt, "more elements than fit in a signed 64-bit integer"},
        Broken{"OverflowingBytes",
               R"({"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,8]}})", 8,
               std::nullopt, "more bytes than fit in a signed 64-bit integer"},
        Broken{"NegativeDimension", R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8,
               std::nullopt, "dimensions are non-negative integers"},
        Broken{"NegativeOffset", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]}})", 8,
               std::nullopt, "offsets are non-negative integers"},
        Broken{"ThreeOffsets", R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}})", 8,
               std::nullopt, "expected [begin, end]"},
        Broken{"UnsupportedDtype", R"({"a":{"dtype":"U16","shape":[4],"data_offsets":[0,8]}})", 8,
               std::nullopt, "has dtype 'U16', which backplane cannot describe"},
        Broken{"UnknownDtype", R"({"a":{"dtype":"float32","shape":[2],"data_offsets":[0,8]}})", 8,
               std::nullopt, "has dtype 'float32', which is not a safetensors dtype"},
        Broken{"MissingField", R"({"a":{"dtype":"F32","data_offsets":[0,8]}})", 8, std::nullopt,
               "needs dtype, shape and data_offsets"},
        Broken{"BadMetadata", R"({"__metadata__":{"format":1}})", 0, std::nullopt,
               "__metadata__ that is not an object of strings"},
        Broken{"EmptyNamePart", R"({"a..b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8,
               std::nullopt, "names are dot-separated parts, none of them empty"},
        Broken{"TensorAndModule",
               R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
               R"("a.b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
               8, std::nullopt, "both as a tensor and as a module"},
        Broken{"DeepNesting",
               "{\"__metadata__\":" + std::string(70, '[') + std::string(70, ']') + "}", 0,
               std::nullopt, "deeper than 64 levels"}),
    [](const ::testing::TestParamInfo<Broken>& row) { return row.param.name; });

TEST(Safetensors, NamesNestAtMost64Deep) {
  backplane::testing::TempFolder folder;
  std::string deep = "m";
  for (int i = 0; i < 63; ++i) deep += ".m";  // 64 parts
  Checkpoint c;
  c.add(deep, "F32", {1}, 4);
  write_safetensors(folder.path() / "ok.safetensors", c.text(), c.offset);
  EXPECT_EQ(tensor_names(backplane::model_from_safetensors(folder.path() / "ok.safetensors")),
            std::vector<std::string>{deep});
  Checkpoint deeper;
  deeper.add(deep + ".m", "F32", {1}, 4);
  write_safetensors(folder.path() / "deep.safetensors", deeper.text(), deeper.offset);
  EXPECT_NE(
      error_of(folder.path() / "deep.safetensors").find("of more than 64 dot-separated parts"),
      std::string::npos);
}

TEST(Safetensors, ManyModulesSideBySide) {
  // 20000 children of one module, in natural order (a linear search per name would take
  // minutes on files like this).
  backplane::testing::TempFolder folder;
  Checkpoint c;
  for (int i = 0; i < 20000; ++i) c.add("x." + std::to_string(i) + ".w", "U8", {1}, 1);
  write_safetensors(folder.path() / "wide.safetensors", c.text(), c.offset);
  const auto d = backplane::model_from_safetensors(folder.path() / "wide.safetensors");
  const backplane::Module* x = backplane::find_module(d.root, "x");
  ASSERT_NE(x, nullptr);
  ASSERT_EQ(x->children.size(), 20000u);
  EXPECT_EQ(x->children[9].name, "9");
  EXPECT_EQ(x->children[10].name, "10");
  EXPECT_EQ(x->children.back().name, "19999");
  EXPECT_EQ(d.dtype, backplane::DType::kUInt8);  // no floating tensor: the first one's
}

TEST(Safetensors, TooShortAndMissingFiles) {
  backplane::testing::TempFolder folder;
  std::ofstream(folder.path() / "short.safetensors") << "abc";
  EXPECT_NE(error_of(folder.path() / "short.safetensors").find("too short for the 8-byte"),
            std::string::npos);
  EXPECT_NE(error_of(folder.path() / "none.safetensors").find("does not exist"), std::string::npos);
  EXPECT_NE(error_of(folder.path()).find("holds neither model.safetensors.index.json nor"),
            std::string::npos);
}

TEST(Safetensors, MetadataIsAcceptedAndHeaderPaddingIgnored) {
  backplane::testing::TempFolder folder;
  // save_file pads the header with spaces to 8 bytes; the crate accepts leading ones too.
  write_safetensors(folder.path() / "m.safetensors",
                    " {\"__metadata__\":{\"format\":\"pt\"}," + kOne + "}   ", 8);
  EXPECT_EQ(tensor_names(backplane::model_from_safetensors(folder.path() / "m.safetensors")),
            std::vector<std::string>{"a"});
}

// Two shards and their index.
void write_sharded(const fs::path& folder, const std::string& weight_map) {
  Checkpoint first;
  first.add("model.embed_tokens.weight", "BF16", {10, 4}, 2);
  first.add("model.norm.weight", "BF16", {4}, 2);
  write_safetensors(folder / "model-00001-of-00002.safetensors", first.text(), first.offset);
  Checkpoint second;
  second.add("lm_head.weight", "BF16", {10, 4}, 2);
  write_safetensors(folder / "model-00002-of-00002.safetensors", second.text(), second.offset);
  std::ofstream(folder / "model.safetensors.index.json")
      << R"({"metadata": {"total_size": 168}, "weight_map": )" << weight_map << "}";
}

const char* kWeightMap = R"({"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
  "model.norm.weight": "model-00001-of-00002.safetensors",
  "lm_head.weight": "model-00002-of-00002.safetensors"})";

TEST(Safetensors, ShardedIndex) {
  backplane::testing::TempFolder folder;
  write_sharded(folder.path(), kWeightMap);
  const auto d = backplane::model_from_safetensors(folder.path() / "model.safetensors.index.json");
  EXPECT_EQ(tensor_names(d), (std::vector<std::string>{"model.embed_tokens.weight",
                                                       "model.norm.weight", "lm_head.weight"}));
  EXPECT_EQ(d.dtype, backplane::DType::kBFloat16);
  EXPECT_EQ(tensor_names(backplane::model_from_safetensors(folder.path())), tensor_names(d));
}

struct BrokenIndex {
  const char* name;
  std::string weight_map;
  std::string message;
};

void PrintTo(const BrokenIndex& row, std::ostream* out) {
  *out << row.name;
}

class BrokenShardedIndex : public ::testing::TestWithParam<BrokenIndex> {};

TEST_P(BrokenShardedIndex, IsRefusedWithTheReason) {
  backplane::testing::TempFolder folder;
  write_sharded(folder.path(), GetParam().weight_map);
  const std::string message = error_of(folder.path() / "model.safetensors.index.json");
  EXPECT_NE(message.find(GetParam().message), std::string::npos) << message;
}

INSTANTIATE_TEST_SUITE_P(
    Table, BrokenShardedIndex,
    ::testing::Values(
        BrokenIndex{"NoWeightMap", "[]", "has no \"weight_map\" object"},
        BrokenIndex{"EscapingPath", R"({"lm_head.weight": "../model.safetensors"})",
                    "names the shard '../model.safetensors'; shards are relative paths inside"},
        BrokenIndex{"AbsolutePath", R"({"lm_head.weight": "/etc/passwd"})",
                    "names the shard '/etc/passwd'"},
        BrokenIndex{"MissingShard", R"({"lm_head.weight": "model-00003-of-00002.safetensors"})",
                    "model-00003-of-00002.safetensors' does not exist"},
        BrokenIndex{"Unlisted",
                    R"({"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                        "lm_head.weight": "model-00002-of-00002.safetensors"})",
                    "does not list 'model.norm.weight', which 'model-00001-of-00002.safetensors' "
                    "holds"},
        BrokenIndex{"WrongShard",
                    R"({"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                        "model.norm.weight": "model-00002-of-00002.safetensors",
                        "lm_head.weight": "model-00002-of-00002.safetensors"})",
                    "puts 'model.norm.weight' in 'model-00002-of-00002.safetensors', but "
                    "'model-00001-of-00002.safetensors' holds it too"},
        BrokenIndex{"Ghost",
                    R"({"model.embed_tokens.weight": "model-00001-of-00002.safetensors",
                        "model.norm.weight": "model-00001-of-00002.safetensors",
                        "lm_head.weight": "model-00002-of-00002.safetensors",
                        "ghost.weight": "model-00002-of-00002.safetensors"})",
                    "puts 'ghost.weight' in 'model-00002-of-00002.safetensors', which does not "
                    "hold it"},
        BrokenIndex{"NotAFileName", R"({"lm_head.weight": 2})", "expected a file name"}),
    [](const ::testing::TestParamInfo<BrokenIndex>& row) { return row.param.name; });

// config.json next to the weights gives the tree; the weights are checked against it.
constexpr const char* kConfig = R"({"model_type": "llama", "vocab_size": 10, "hidden_size": 4,
  "intermediate_size": 6, "num_hidden_layers": 2, "num_attention_heads": 2,
  "num_key_value_heads": 1)";

void write_with_config(const fs::path& folder, const Checkpoint& c, const std::string& extra) {
  write_safetensors(folder / "model.safetensors", c.text(), c.offset);
  std::ofstream(folder / "config.json") << kConfig << extra << "}";
}

TEST(Safetensors, ConfigGivesTheTree) {
  backplane::testing::TempFolder folder;
  write_with_config(folder.path(), llama_checkpoint(2), "");
  const auto d = backplane::model_from_safetensors(folder.path() / "model.safetensors");
  const auto from_config = backplane::model_from_config_json(std::string(kConfig) + "}");
  EXPECT_TRUE(d.from_config);
  EXPECT_EQ(d.architecture, "LlamaForCausalLM");
  // No dtype in the config: the weights' (the first floating tensor by name: lm_head, F16).
  EXPECT_EQ(d.dtype, backplane::DType::kFloat16);
  EXPECT_EQ(from_config.dtype, backplane::DType::kFloat32);
  // Same tree as the config alone, inv_freq included, parameters in the weights' dtype.
  EXPECT_EQ(tensor_names(d), tensor_names(from_config));
  const auto* norm = backplane::find_module(d.root, "model.norm");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->class_name, "LlamaRMSNorm");
  EXPECT_EQ(norm->tensors[0].dtype, backplane::DType::kFloat16);
  EXPECT_EQ(backplane::find_module(d.root, "model.rotary_emb")->tensors[0].dtype,
            backplane::DType::kFloat32);
}

TEST(Safetensors, ConfigDtypeWins) {
  backplane::testing::TempFolder folder;
  write_with_config(folder.path(), llama_checkpoint(2), R"(, "torch_dtype": "bfloat16")");
  EXPECT_EQ(backplane::model_from_safetensors(folder.path()).dtype, backplane::DType::kBFloat16);
}

TEST(Safetensors, TiedHeadMayBeAbsentOrPresent) {
  backplane::testing::TempFolder folder;
  write_with_config(folder.path(), llama_checkpoint(2, false), R"(, "tie_word_embeddings": true)");
  EXPECT_TRUE(backplane::model_from_safetensors(folder.path()).from_config);
  write_with_config(folder.path(), llama_checkpoint(2, true), R"(, "tie_word_embeddings": true)");
  EXPECT_TRUE(backplane::model_from_safetensors(folder.path()).from_config);
  // Untied, it must be there.
  write_with_config(folder.path(), llama_checkpoint(2, false), "");
  EXPECT_NE(error_of(folder.path())
                .find("The weights lack 'lm_head.weight', which "
                      "LlamaForCausalLM as config.json"),
            std::string::npos)
      << error_of(folder.path());
}

TEST(Safetensors, WeightsThatDoNotFitTheConfigAreRefused) {
  backplane::testing::TempFolder folder;
  write_with_config(folder.path(), llama_checkpoint(3), "");
  EXPECT_NE(error_of(folder.path())
                .find("The weights hold 'model.layers.2.input_layernorm.weight', "
                      "which LlamaForCausalLM as config.json"),
            std::string::npos)
      << error_of(folder.path());
  write_with_config(folder.path(), llama_checkpoint(2), R"(, "intermediate_size": 8)");
  EXPECT_NE(error_of(folder.path())
                .find("'model.layers.0.mlp.down_proj.weight' of shape [4,6], but config.json"),
            std::string::npos)
      << error_of(folder.path());
  // A config of another described architecture contradicts the weights: the first tensor
  // that differs is named.
  write_safetensors(folder.path() / "model.safetensors", llama_checkpoint(2).text(),
                    llama_checkpoint(2).offset);
  std::ofstream(folder.path() / "config.json")
      << R"({"model_type": "gpt2", "n_layer": 2, "n_embd": 4, "n_head": 2, "vocab_size": 10})";
  EXPECT_NE(error_of(folder.path())
                .find("The weights hold 'model.embed_tokens.weight', which GPT2LMHeadModel as "
                      "config.json"),
            std::string::npos)
      << error_of(folder.path());
  // One no descriptor has is set aside: the tree comes from the weights.
  std::ofstream(folder.path() / "config.json") << R"({"model_type": "an_architecture_to_come"})";
  EXPECT_FALSE(backplane::model_from_safetensors(folder.path()).from_config);
  // A quantized one of a method the planner sizes is described from its config, with its
  // quantizer, as from_pretrained builds it (its files hold packed tensors, not checked); one of
  // another method is set aside too: its weights say more than the config's modules.
  std::ofstream(folder.path() / "config.json")
      << std::string(kConfig) + R"(, "quantization_config": {"quant_method": "fp8"}})";
  const backplane::ModelDescription fp8 = backplane::model_from_safetensors(folder.path());
  EXPECT_TRUE(fp8.from_config);
  ASSERT_TRUE(fp8.quantization.has_value());
  EXPECT_EQ(fp8.quantization->method, backplane::QuantMethod::kFp8);
  EXPECT_TRUE(fp8.quantization->pre_quantized);
  std::ofstream(folder.path() / "config.json")
      << std::string(kConfig) + R"(, "quantization_config": {"quant_method": "hqq"}})";
  EXPECT_FALSE(backplane::model_from_safetensors(folder.path()).from_config);
  // A broken config of a supported one is not.
  std::ofstream(folder.path() / "config.json") << R"({"model_type": "llama", "hidden_size": -1})";
  EXPECT_NE(error_of(folder.path())
                .find("The hidden size (-1) is not a multiple of the number of "
                      "attention heads (32)."),
            std::string::npos)
      << error_of(folder.path());
}

// A Mixtral checkpoint as save_pretrained writes it: experts one by one under
// block_sparse_moe (transformers renames them to mlp and fuses w1/w3 into gate_up_proj and w2
// into down_proj as it loads). The weights are checked against the config through those
// renames: per expert module, the stored elements must be the fused tensors' elements.
Checkpoint mixtral_checkpoint(int64_t expert_width) {
  Checkpoint c;
  c.add("model.embed_tokens.weight", "F32", {10, 4}, 4);
  const std::string p = "model.layers.0.";
  c.add(p + "self_attn.q_proj.weight", "F32", {4, 4}, 4);
  c.add(p + "self_attn.k_proj.weight", "F32", {2, 4}, 4);
  c.add(p + "self_attn.v_proj.weight", "F32", {2, 4}, 4);
  c.add(p + "self_attn.o_proj.weight", "F32", {4, 4}, 4);
  c.add(p + "block_sparse_moe.gate.weight", "F32", {2, 4}, 4);
  for (int e = 0; e < 2; ++e) {
    const std::string expert = p + "block_sparse_moe.experts." + std::to_string(e) + ".";
    c.add(expert + "w1.weight", "F32", {expert_width, 4}, 4);
    c.add(expert + "w3.weight", "F32", {expert_width, 4}, 4);
    c.add(expert + "w2.weight", "F32", {4, expert_width}, 4);
  }
  c.add(p + "input_layernorm.weight", "F32", {4}, 4);
  c.add(p + "post_attention_layernorm.weight", "F32", {4}, 4);
  c.add("model.norm.weight", "F32", {4}, 4);
  c.add("lm_head.weight", "F32", {10, 4}, 4);
  return c;
}

TEST(Safetensors, UnfusedExpertsAreCheckedAgainstTheFusedTree) {
  backplane::testing::TempFolder folder;
  const char* config = R"({"model_type": "mixtral", "vocab_size": 10, "hidden_size": 4,
    "intermediate_size": 6, "num_hidden_layers": 1, "num_attention_heads": 2,
    "num_key_value_heads": 1, "num_local_experts": 2})";
  std::ofstream(folder.path() / "config.json") << config;
  const Checkpoint fits = mixtral_checkpoint(6);
  write_safetensors(folder.path() / "model.safetensors", fits.text(), fits.offset);
  const auto d = backplane::model_from_safetensors(folder.path());
  EXPECT_TRUE(d.from_config);
  EXPECT_TRUE(d.approximate_because.empty());
  const auto* experts = backplane::find_module(d.root, "model.layers.0.mlp.experts");
  ASSERT_NE(experts, nullptr);
  EXPECT_EQ(experts->tensors.at(0).name, "gate_up_proj");
  EXPECT_EQ(experts->tensors.at(0).shape, (std::vector<int64_t>{2, 12, 4}));
  // Experts 8 wide where the config says 6: the module and both counts are named.
  const Checkpoint wider = mixtral_checkpoint(8);
  write_safetensors(folder.path() / "model.safetensors", wider.text(), wider.offset);
  EXPECT_NE(error_of(folder.path())
                .find("The weights hold 192 elements under 'model.layers.0.mlp.experts', which "
                      "MixtralForCausalLM as config.json"),
            std::string::npos)
      << error_of(folder.path());
  EXPECT_NE(error_of(folder.path()).find("fuses into 144"), std::string::npos);
}

}  // namespace
