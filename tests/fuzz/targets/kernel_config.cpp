// Kernel mappings in transformers' KernelConfig form: JSON text, parsed as a host reading a
// user's file would (JSON errors are the host's), then parse_kernel_config.
#include "fuzz_input.hpp"

#include <backplane/rules/kernel_mapping.hpp>

#include <nlohmann/json.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace backplane;
  const std::string_view text = fuzz::as_text(data, size);
  const nlohmann::json config = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return 0;
  fuzz::refusals_allowed(
      [&] { parse_kernel_config(config, kernel_config_device_keys(), "fuzz.json"); });
  return 0;
}
