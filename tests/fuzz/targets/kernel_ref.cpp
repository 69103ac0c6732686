// The strings inside a kernel mapping: KernelMode::parse ("inference|torch_compile") and
// LayerKernelRef::parse ("org/repo@v2:Layer"). A parsed reference prints as one that parses back.
#include "fuzz_input.hpp"

#include <backplane/rules/kernel_mapping.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace backplane;
  const std::string_view text = fuzz::as_text(data, size);
  fuzz::refusals_allowed([&] {
    const KernelMode mode = KernelMode::parse(text);
    fuzz::check(KernelMode::parse(mode.str()) == mode, "KernelMode::parse(mode.str()) != mode");
  });
  fuzz::refusals_allowed([&] {
    const LayerKernelRef ref = LayerKernelRef::parse(text);
    const LayerKernelRef again = LayerKernelRef::parse(ref.str());
    fuzz::check(
        again.repo == ref.repo && again.layer == ref.layer && again.revision == ref.revision,
        "LayerKernelRef::parse(ref.str()) differs from ref");
  });
  return 0;
}
