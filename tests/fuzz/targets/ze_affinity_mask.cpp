// ZE_AFFINITY_MASK, ZE_FLAT_DEVICE_HIERARCHY and ZE_ENABLE_PCI_ID_DEVICE_ORDER over three Level
// Zero roots (two with two tiles). Input: the three values on three lines ("\x01": unset).
#include "fuzz_input.hpp"

#include <backplane/rules/visibility.hpp>

namespace {

std::vector<backplane::PhysicalDevice> roots() {
  std::vector<backplane::PhysicalDevice> out(3);
  const char* buses[] = {"0000:3a:00.0", "0000:9a:00.0", "0000:00:02.0"};
  const int tiles[] = {2, 2, 1};
  for (size_t i = 0; i < out.size(); ++i) {
    out[i].pci_bus_id = buses[i];
    out[i].sub_devices = tiles[i];
    out[i].integrated = i == 2;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace backplane;
  const auto field = fuzz::fields(fuzz::as_text(data, size), 3);
  static const std::vector<PhysicalDevice> physical = roots();
  LevelZeroVariables variables;
  variables.affinity_mask = field[0];
  variables.flat_device_hierarchy = field[1];
  variables.enable_pci_id_device_order = field[2];
  fuzz::refusals_allowed([&] {
    const LevelZeroVisibility shown = level_zero_visible(variables, physical);
    for (const LevelZeroDevice& device : shown.devices) {
      fuzz::check(device.root >= 0 && device.root < static_cast<int>(physical.size()),
                  "root out of range");
    }
  });
  return 0;
}
