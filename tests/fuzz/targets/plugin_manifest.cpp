// Plugin manifests (core/src/manifest.cpp): JSON text as a plugin folder's *.json holds it.
#include "fuzz_input.hpp"

#include "manifest.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace backplane;
  const std::string text(fuzz::as_text(data, size));
  fuzz::refusals_allowed<detail::ManifestError>([&] {
    const detail::Manifest manifest =
        detail::parse_manifest(text, "/opt/backplane/plugins/fuzz.json");
    fuzz::check(manifest.library.is_absolute(), "the manifest's library path is not absolute");
  });
  return 0;
}
