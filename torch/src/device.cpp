// Device names between backplane, LibTorch and DLPack (device.hpp says which maps to which).
// Only c10 headers here: LibTorch's own parser decides which device types it knows.
#include <backplane/error.hpp>
#include <backplane/torch/device.hpp>

#include <c10/core/DeviceType.h>
#include <c10/util/Exception.h>
#include <torch/version.h>

#include <string>

namespace backplane::torch {
namespace {

// DLPack 0.7 added kDLOneAPI (14); Debian's header (0.6) predates it.
constexpr auto kDLOneAPIType = static_cast<DLDeviceType>(14);

struct DLPackName {
  const char* backplane;
  DLDeviceType dlpack;
  const char* dlpack_name;
};

constexpr DLPackName kDLPackNames[] = {
    {"cpu", kDLCPU, "kDLCPU"},     {"cuda", kDLCUDA, "kDLCUDA"},
    {"rocm", kDLROCM, "kDLROCM"},  {"xpu", kDLOneAPIType, "kDLOneAPI"},
    {"mps", kDLMetal, "kDLMetal"},
};

std::string dlpack_names(bool with_backplane_names) {
  std::string out;
  for (const DLPackName& n : kDLPackNames) {
    if (!out.empty()) out += ", ";
    out += with_backplane_names ? std::string(n.dlpack_name) + " (" + n.backplane + ")"
                                : std::string(n.backplane);
  }
  return out;
}

const char* dlpack_type_name(int type) {
  switch (type) {
    case 1:
      return "kDLCPU";
    case 2:
      return "kDLCUDA";
    case 3:
      return "kDLCUDAHost";
    case 4:
      return "kDLOpenCL";
    case 7:
      return "kDLVulkan";
    case 8:
      return "kDLMetal";
    case 9:
      return "kDLVPI";
    case 10:
      return "kDLROCM";
    case 11:
      return "kDLROCMHost";
    case 12:
      return "kDLExtDev";
    case 13:
      return "kDLCUDAManaged";
    case 14:
      return "kDLOneAPI";
    case 15:
      return "kDLWebGPU";
    case 16:
      return "kDLHexagon";
    case 17:
      return "kDLMAIA";
    default:
      return nullptr;
  }
}

}  // namespace

c10::Device torch_device(const Device& device) {
  const std::string type = device.type() == "rocm" ? "cuda" : device.type();
  const std::string text = device.index() ? type + ":" + std::to_string(*device.index()) : type;
  try {
    return c10::Device(text);
  } catch (const c10::Error& e) {
    throw InvalidArgument("device '" + device.str() +
                          "' has no LibTorch " TORCH_VERSION
                          " device (rocm maps to LibTorch's cuda): " +
                          e.what_without_backtrace());
  }
}

Device backplane_device(const c10::Device& device) {
  std::optional<int> index;
  if (device.has_index()) index = static_cast<int>(device.index());
  if (device.type() == c10::DeviceType::HIP) return Device("rocm", index);
  return Device(c10::DeviceTypeName(device.type(), /*lower_case=*/true), index);
}

DLDevice dlpack_device(const Device& device) {
  for (const DLPackName& n : kDLPackNames) {
    if (device.type() != n.backplane) continue;
    const int index = device.index().value_or(0);
    if (index < 0) {
      throw InvalidArgument("device '" + device.str() + "' has a negative index");
    }
    return DLDevice{n.dlpack, index};
  }
  throw InvalidArgument("device '" + device.str() + "' has no DLPack device type; DLPack names " +
                        dlpack_names(false));
}

Device backplane_device(const DLDevice& device) {
  for (const DLPackName& n : kDLPackNames) {
    if (device.device_type != n.dlpack) continue;
    if (device.device_id < 0) {
      throw InvalidArgument("DLPack device " + to_string(device) + " has a negative device_id");
    }
    if (device.device_type == kDLCPU) return Device("cpu");
    return Device(n.backplane, device.device_id);
  }
  throw InvalidArgument("DLPack device " + to_string(device) +
                        " has no backplane device; accepted: " + dlpack_names(true));
}

std::string to_string(const DLDevice& device) {
  const char* name = dlpack_type_name(static_cast<int>(device.device_type));
  const std::string type =
      name != nullptr ? std::string(name)
                      : "device type " + std::to_string(static_cast<int>(device.device_type));
  return type + ":" + std::to_string(device.device_id);
}

}  // namespace backplane::torch
