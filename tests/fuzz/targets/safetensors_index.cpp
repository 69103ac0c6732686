// A sharded checkpoint's model.safetensors.index.json, next to two valid shards
// (a-00001.safetensors holds "model.embed.weight", a-00002.safetensors "lm_head.weight").
#include "fuzz_input.hpp"
#include "temp_folder.hpp"

#include <backplane/model/model.hpp>

#include <string>

namespace {

// A safetensors file with one F32 tensor of shape [2, 2].
std::string one_tensor_file(const std::string& name) {
  const std::string header =
      "{\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,16]}}";
  std::string bytes(8, '\0');
  for (size_t i = 0; i < 8; ++i) bytes[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return bytes + header + std::string(16, '\0');
}

const backplane::fuzz::TempFolder& folder() {
  static const backplane::fuzz::TempFolder instance;
  static const bool written = [] {
    instance.write("a-00001.safetensors", one_tensor_file("model.embed.weight"));
    instance.write("a-00002.safetensors", one_tensor_file("lm_head.weight"));
    return true;
  }();
  (void)written;
  return instance;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace backplane;
  const auto index = folder().write("model.safetensors.index.json", fuzz::as_text(data, size));
  fuzz::refusals_allowed([&] { model_from_safetensors(index); });
  return 0;
}
