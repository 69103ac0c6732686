// ROCR_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES, CUDA_VISIBLE_DEVICES and GPU_DEVICE_ORDINAL as HIP
// reads them. Input: the four values on four lines ("\x01" or absent: unset).
#include "fuzz_input.hpp"

#include <backplane/rules/visibility.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace backplane;
  const auto field = fuzz::fields(fuzz::as_text(data, size), 4);
  static const std::vector<std::string> uuids = {"GPU-0123456789abcdef", "GPU-0123456789abcdee",
                                                 "GPU-fedcba9876543210"};
  RocmVariables variables;
  variables.rocr_visible_devices = field[0];
  variables.hip_visible_devices = field[1];
  variables.cuda_visible_devices = field[2];
  variables.gpu_device_ordinal = field[3];
  fuzz::refusals_allowed([&] {
    const Visibility shown = rocm_visible(variables, uuids);
    for (const int index : shown.physical) {
      fuzz::check(index >= 0 && index < static_cast<int>(uuids.size()), "index out of range");
    }
  });
  return 0;
}
