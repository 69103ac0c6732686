// Hub kernel ids for attention ("org/repo@rev:function"): HubKernelId::parse, and matches(),
// which must agree with parse about what has the form.
#include "fuzz_input.hpp"

#include <backplane/attention.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace backplane;
  const std::string_view text = fuzz::as_text(data, size);
  bool parsed = false;
  fuzz::refusals_allowed([&] {
    const HubKernelId id = HubKernelId::parse(text);
    parsed = true;
    fuzz::check(HubKernelId::parse(id.str()) == id, "HubKernelId::parse(id.str()) != id");
  });
  fuzz::check(parsed == HubKernelId::matches(text), "HubKernelId::matches disagrees with parse");
  return 0;
}
