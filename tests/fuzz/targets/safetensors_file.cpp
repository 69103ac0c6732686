// A whole .safetensors file (8-byte header length, JSON header, data): model_from_safetensors
// reads only the length and the header, and checks the offsets against the data's size.
#include "fuzz_input.hpp"
#include "temp_folder.hpp"

#include <backplane/model/model.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace backplane;
  static const fuzz::TempFolder folder;
  const auto file = folder.write("model.safetensors", fuzz::as_text(data, size));
  fuzz::refusals_allowed([&] { model_from_safetensors(file); });
  return 0;
}
