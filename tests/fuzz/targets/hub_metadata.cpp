// Kernel package metadata.json: hub::parse_metadata. Parsed metadata written back out must
// parse to the same text.
#include "fuzz_input.hpp"

#include <backplane/hub/metadata.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace backplane;
  const std::string_view text = fuzz::as_text(data, size);
  fuzz::refusals_allowed([&] {
    const hub::PackageMetadata metadata = hub::parse_metadata(text, "build/fuzz/metadata.json");
    const std::string dumped = hub::to_json(metadata);
    fuzz::check(hub::to_json(hub::parse_metadata(dumped, "dumped")) == dumped,
                "parse_metadata(to_json(m)) differs from m");
  });
  return 0;
}
