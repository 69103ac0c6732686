// max_memory strings: parse_memory_size ("10GiB") and MaxMemory::parse ("0=10GiB,cpu=64GiB").
#include "fuzz_input.hpp"

#include <backplane/model/device_map.hpp>
#include <backplane/units.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace backplane;
  const std::string_view text = fuzz::as_text(data, size);
  fuzz::refusals_allowed([&] { parse_memory_size(text); });
  fuzz::refusals_allowed([&] { MaxMemory::parse(text); });
  return 0;
}
