// Device strings ("cuda:0", "cpu"): parse_device against the built-in types and against a
// custom list. A parsed device must print as a string that parses back to itself.
#include "fuzz_input.hpp"

#include <backplane/rules/device.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace backplane;
  const std::string_view text = fuzz::as_text(data, size);
  fuzz::refusals_allowed([&] {
    const Device device = parse_device(text);
    fuzz::check(parse_device(device.str()) == device, "parse_device(device.str()) != device");
  });
  static const std::vector<std::string> custom = {"cpu", "privateuseone", "my_accel", "cuda"};
  fuzz::refusals_allowed([&] { parse_device(text, custom); });
  return 0;
}
