// config.json model descriptions: model_from_config_json.
#include "fuzz_input.hpp"

#include <backplane/model/model.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace backplane;
  const std::string_view text = fuzz::as_text(data, size);
  fuzz::refusals_allowed([&] { model_from_config_json(text); });
  return 0;
}
