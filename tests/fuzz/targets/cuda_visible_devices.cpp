// CUDA_VISIBLE_DEVICES and CUDA_DEVICE_ORDER. Input: the CUDA_VISIBLE_DEVICES value, a newline,
// the CUDA_DEVICE_ORDER value ("\x01" or absent: unset). Four fixed devices, two with UUIDs
// sharing a prefix. Every visible device must be one of them, listed once.
#include "fuzz_input.hpp"

#include <backplane/rules/visibility.hpp>

#include <set>

namespace {

std::vector<backplane::PhysicalDevice> devices() {
  std::vector<backplane::PhysicalDevice> out(4);
  const char* uuids[] = {
      "GPU-0a1b2c3d-0000-1111-2222-333344445555", "GPU-0a1b2c3d-9999-1111-2222-333344445555",
      "GPU-ffeeddcc-0000-1111-2222-333344445555", "MIG-12345678-0000-1111-2222-333344445555"};
  const char* buses[] = {"0000:17:00.0", "0000:65:00.0", "0000:ca:00.0", "0000:e3:00.0"};
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].uuid = uuids[i];
    out[i].pci_bus_id = buses[i];
    out[i].multiprocessors = static_cast<int>(100 - i);
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace backplane;
  const auto field = fuzz::fields(fuzz::as_text(data, size), 2);
  static const std::vector<PhysicalDevice> physical = devices();
  fuzz::refusals_allowed([&] { parse_cuda_visible_devices(field[0].value_or("")); });
  fuzz::refusals_allowed([&] {
    std::optional<std::string_view> order;
    if (field[1]) order = *field[1];
    const Visibility ordered = cuda_order(physical, order);
    std::vector<std::string> uuids;
    for (const int index : ordered.physical) uuids.push_back(physical.at(index).uuid);
    std::optional<std::string_view> visible;
    if (field[0]) visible = *field[0];
    const Visibility shown = cuda_visible(visible, uuids);
    const std::set<int> distinct(shown.physical.begin(), shown.physical.end());
    fuzz::check(distinct.size() == shown.physical.size(), "a device is visible twice");
    for (const int index : shown.physical) {
      fuzz::check(index >= 0 && index < static_cast<int>(uuids.size()), "index out of range");
    }
  });
  return 0;
}
