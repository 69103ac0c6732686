// The other accelerators' variables: HABANA_VISIBLE_MODULES / MUSA_VISIBLE_DEVICES (strict
// index lists), ASCEND_RT_VISIBLE_DEVICES, CN_VISIBLE_DEVICES / MLU_VISIBLE_DEVICES and
// NEURON_RT_VISIBLE_CORES. Input: one value, given to each of them ("\x01": unset); a second
// line is MLU_VISIBLE_DEVICES beside it.
#include "fuzz_input.hpp"

#include <backplane/rules/visibility.hpp>

namespace {

void check_indices(const backplane::Visibility& shown, int count) {
  for (const int index : shown.physical) {
    backplane::fuzz::check(index >= 0 && index < count, "index out of range");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace backplane;
  const auto field = fuzz::fields(fuzz::as_text(data, size), 2);
  std::optional<std::string_view> value;
  if (field[0]) value = *field[0];
  std::optional<std::string_view> second;
  if (field[1]) second = *field[1];
  constexpr int kCount = 8;
  static const std::vector<std::string> uuids = {"MLU-0a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d",
                                                 "MLU-1a1b2c3d-4e5f-6a7b-8c9d-0e1f2a3b4c5d"};
  fuzz::refusals_allowed(
      [&] { check_indices(index_list_visible("HABANA_VISIBLE_MODULES", value, kCount), kCount); });
  fuzz::refusals_allowed([&] { check_indices(ascend_visible(value, kCount), kCount); });
  fuzz::refusals_allowed([&] { check_indices(mlu_visible(value, second, uuids), 2); });
  fuzz::refusals_allowed([&] { check_indices(neuron_visible_cores(value, kCount), kCount); });
  return 0;
}
