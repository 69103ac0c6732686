// Hostile files for the core's parsers and the sim plugin's: oversized and deeply nested JSON,
// duplicate keys, safetensors headers with lengths, offsets, names and shapes that lie. Each is
// refused with an error naming what was wrong, and the same parser then still reads a good file
// (nothing else is affected).
#include <backplane/model/model.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <string>

#include "hostile_case.hpp"
#include "loader/temp_folder.hpp"
#include "manifest.hpp"
#include "topology.hpp"

namespace backplane::hostile {
namespace {

using backplane::testing::TempFolder;

std::filesystem::path write(const std::filesystem::path& file, const std::string& bytes) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out << bytes;
  return file;
}

// A file of `bytes` bytes that takes no disk space (sparse): for the size bounds.
std::filesystem::path sparse(const std::filesystem::path& file, uintmax_t bytes) {
  write(file, "{");
  std::filesystem::resize_file(file, bytes);
  return file;
}

std::string nested(int depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

const std::string kManifest =
    R"({"file_format_version": "1.0.0", "plugin": {"name": "cpu", "library_path": "libx.so",
        "abi_version": "1.4", "device_types": ["cpu"]}})";
const std::string kTopology =
    R"({"name": "t", "devices": [{"type": "cuda", "vendor": "nvidia", "name": "H100",
        "memory": "80GiB", "compute_capability": "9.0"}]})";
const std::string kConfig =
    R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 128,
        "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "torch_dtype": "bfloat16"})";

// A safetensors file: the 8-byte little-endian length (declared, or the header's own), the
// header, then `data` zero bytes.
std::string safetensors(const std::string& header, uint64_t data, uint64_t declared = 0) {
  const uint64_t length = declared != 0 ? declared : header.size();
  std::string bytes(8, '\0');
  for (size_t i = 0; i < 8; ++i) bytes[i] = static_cast<char>((length >> (8 * i)) & 0xff);
  return bytes + header + std::string(data, '\0');
}
std::string tensor(const std::string& name, const std::string& shape, uint64_t begin, uint64_t end,
                   const std::string& dtype = "F32") {
  return "\"" + name + "\": {\"dtype\": \"" + dtype + "\", \"shape\": " + shape +
         ", \"data_offsets\": [" + std::to_string(begin) + ", " + std::to_string(end) + "]}";
}
const std::string kGoodHeader = "{" + tensor("a.weight", "[2, 2]", 0, 16) + "}";

void manifest(const std::string& text) {
  TempFolder folder;
  detail::read_manifest(write(folder.path() / "p.json", text));
}
void topology(const std::string& text) {
  TempFolder folder;
  sim::read_topology(write(folder.path() / "t.json", text));
}
void config(const std::string& text) {
  TempFolder folder;
  model_from_config(write(folder.path() / "config.json", text));
}
void weights(const std::string& bytes) {
  TempFolder folder;
  model_from_safetensors(write(folder.path() / "model.safetensors", bytes));
}

class HostileFile : public ::testing::TestWithParam<HostileCase> {};

TEST_P(HostileFile, IsRefusedByNameAndGoodFilesStillParse) {
  expect_refused(GetParam());
  EXPECT_NO_THROW(manifest(kManifest));
  EXPECT_NO_THROW(topology(kTopology));
  EXPECT_NO_THROW(config(kConfig));
  EXPECT_NO_THROW(weights(safetensors(kGoodHeader, 16)));
}

const HostileCase kCases[] = {
    // Plugin manifests.
    {"manifest nested 10000 deep", [] { manifest("{\"plugin\": " + nested(10000) + "}"); },
     "nests objects and arrays deeper than 64 levels"},
    {"manifest duplicate key",
     [] { manifest(R"({"file_format_version": "1.0.0", "file_format_version": "9"})"); },
     "has the key 'file_format_version' twice in one object; keys must be unique"},
    {"manifest of 1 MiB",
     [] {
       TempFolder folder;
       detail::read_manifest(sparse(folder.path() / "p.json", 1 << 20));
     },
     "manifest is 1048576 bytes; at most 65536 are accepted"},
    {"manifest not UTF-8", [] { manifest("{\"plugin\": \"\xff\xfe\"}"); }, "ill-formed UTF-8 byte"},
    // Sim topologies.
    {"topology nested 10000 deep", [] { topology("{\"devices\": " + nested(10000) + "}"); },
     "nests objects and arrays deeper than 64 levels"},
    {"topology duplicate key", [] { topology(R"({"name": "a", "name": "b", "devices": []})"); },
     "has the key 'name' twice in one object"},
    {"topology of 2 MiB",
     [] {
       TempFolder folder;
       sim::read_topology(sparse(folder.path() / "t.json", 2 << 20));
     },
     "is 2097152 bytes; at most 1048576 are accepted"},
    // config.json.
    {"config.json nested 10000 deep", [] { config("{\"x\": " + nested(10000) + "}"); },
     "nests objects and arrays deeper than 64 levels"},
    {"config.json of 17 MiB",
     [] {
       TempFolder folder;
       model_from_config(sparse(folder.path() / "config.json", 17 << 20));
     },
     "is 17825792 bytes; at most 16777216 are accepted"},
    {"config.json huge sizes",
     [] {
       config(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                  "vocab_size": 9223372036854775807, "hidden_size": 64,
                  "intermediate_size": 128, "num_hidden_layers": 2,
                  "num_attention_heads": 4, "num_key_value_heads": 2})");
     },
     "vocab_size"},
    // safetensors headers.
    {"safetensors header length past the file", [] { weights(safetensors(kGoodHeader, 16, 5000)); },
     "past the end of the file"},
    {"safetensors header length over 100 MB",
     [] { weights(safetensors(kGoodHeader, 16, uint64_t{1} << 40)); },
     "declares a header of 1099511627776 bytes; at most 100000000 are accepted"},
    {"safetensors overlapping offsets",
     [] {
       weights(safetensors("{" + tensor("a", "[2]", 0, 8) + ", " + tensor("b", "[2]", 4, 12) + "}",
                           12));
     },
     "starts at byte 4 of the data area, where 8 was expected"},
    {"safetensors offsets past the data",
     [] { weights(safetensors("{" + tensor("a", "[4]", 0, 16) + "}", 8)); },
     "offsets past the end of the file"},
    {"safetensors shape overflowing 64 bits",
     [] {
       weights(safetensors(
           "{" + tensor("a", "[4611686018427387904, 4611686018427387904]", 0, 16) + "}", 16));
     },
     "has more elements than fit in a signed 64-bit integer"},
    {"safetensors non-UTF-8 name",
     [] { weights(safetensors("{" + tensor("a\xc3\x28", "[4]", 0, 16) + "}", 16)); },
     "ill-formed UTF-8 byte"},
    {"safetensors duplicate tensor",
     [] {
       weights(safetensors("{" + tensor("a", "[2]", 0, 8) + ", " + tensor("a", "[2]", 8, 16) + "}",
                           16));
     },
     "has the key 'a' twice in one object"},
    {"safetensors header nested 10000 deep",
     [] { weights(safetensors("{\"a\": " + nested(10000) + "}", 0)); },
     "nests objects and arrays deeper than 64 levels"},
};
INSTANTIATE_TEST_SUITE_P(Files, HostileFile, ::testing::ValuesIn(kCases), case_name);

}  // namespace
}  // namespace backplane::hostile
