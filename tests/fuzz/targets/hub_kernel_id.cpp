// Hub kernel ids for attention ("org/repo@rev:function"): HubKernelId::parse, and matches(),
// which must accept whatever parse accepts (it is looser on purpose: transformers' regex lets
// "org/repo@" through, which parse refuses).
#include "fuzz_input.hpp"

#include <backplane/rules/attention.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace backplane;
  const std::string_view text = fuzz::as_text(data, size);
  bool parsed = false;
  fuzz::refusals_allowed([&] {
    const HubKernelId id = HubKernelId::parse(text);
    parsed = true;
    fuzz::check(HubKernelId::parse(id.str()) == id, "HubKernelId::parse(id.str()) != id");
  });
  fuzz::check(!parsed || HubKernelId::matches(text),
              "HubKernelId::matches refuses what parse accepts");
  return 0;
}
