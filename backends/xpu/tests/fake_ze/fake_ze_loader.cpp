// A fake Level Zero loader, built as libze_loader.so.1 in its own folder, so the xpu plugin's
// path with GPUs runs on machines without one (the test puts the folder on LD_LIBRARY_PATH).
// One driver with a two-tile Intel Data Center GPU Max 1550 and a VPU (which the plugin must
// skip). Every call checks the stype of what it fills, as a strict driver may. FAKE_ZE_MODE,
// read at each call:
//   uninitialized  zeInit fails with ZE_RESULT_ERROR_UNINITIALIZED
//   no_devices     the driver has no device
//   no_pci         zeDevicePciGetPropertiesExt answers ZE_RESULT_ERROR_UNSUPPORTED_FEATURE
#include <level_zero/ze_api.h>

#include <cstdlib>
#include <cstring>
#include <string>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

constexpr uint64_t kGiB = uint64_t{1} << 30;

int driver_object;
int gpu_object;
int vpu_object;

ze_driver_handle_t driver() {
  return reinterpret_cast<ze_driver_handle_t>(&driver_object);
}
ze_device_handle_t gpu() {
  return reinterpret_cast<ze_device_handle_t>(&gpu_object);
}
ze_device_handle_t vpu() {
  return reinterpret_cast<ze_device_handle_t>(&vpu_object);
}

std::string mode() {
  const char* value = std::getenv("FAKE_ZE_MODE");
  return value != nullptr ? value : "";
}

bool initialized = false;

}  // namespace

FAKE_EXPORT ze_result_t zeInit(ze_init_flags_t flags) {
  if (flags != ZE_INIT_FLAG_GPU_ONLY) return ZE_RESULT_ERROR_INVALID_ENUMERATION;
  if (mode() == "uninitialized") return ZE_RESULT_ERROR_UNINITIALIZED;
  initialized = true;
  return ZE_RESULT_SUCCESS;
}

FAKE_EXPORT ze_result_t zeDriverGet(uint32_t* count, ze_driver_handle_t* drivers) {
  if (!initialized) return ZE_RESULT_ERROR_UNINITIALIZED;
  if (drivers != nullptr && *count >= 1) drivers[0] = driver();
  *count = 1;
  return ZE_RESULT_SUCCESS;
}

FAKE_EXPORT ze_result_t zeDeviceGet(ze_driver_handle_t d, uint32_t* count,
                                    ze_device_handle_t* devices) {
  if (d != driver()) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  const uint32_t available = mode() == "no_devices" ? 0 : 2;
  if (devices == nullptr) {
    *count = available;
    return ZE_RESULT_SUCCESS;
  }
  const ze_device_handle_t all[] = {vpu(), gpu()};
  for (uint32_t i = 0; i < *count && i < available; ++i) devices[i] = all[i];
  if (*count > available) *count = available;
  return ZE_RESULT_SUCCESS;
}

FAKE_EXPORT ze_result_t zeDeviceGetProperties(ze_device_handle_t device,
                                              ze_device_properties_t* p) {
  if (p->stype != ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES &&
      p->stype != ZE_STRUCTURE_TYPE_DEVICE_PROPERTIES_1_2) {
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  }
  if (device == vpu()) {
    p->type = ZE_DEVICE_TYPE_VPU;
    p->vendorId = 0x8086;
    std::strcpy(p->name, "Intel(R) AI Boost");
    return ZE_RESULT_SUCCESS;
  }
  if (device != gpu()) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  p->type = ZE_DEVICE_TYPE_GPU;
  p->vendorId = 0x8086;
  p->deviceId = 0x0bd5;
  p->flags = ZE_DEVICE_PROPERTY_FLAG_ECC;
  p->coreClockRate = 1600;
  p->maxMemAllocSize = 64 * kGiB;
  p->numThreadsPerEU = 8;
  p->physicalEUSimdWidth = 16;
  p->numEUsPerSubslice = 8;
  p->numSubslicesPerSlice = 64;
  p->numSlices = 2;
  for (uint8_t i = 0; i < ZE_MAX_DEVICE_UUID_SIZE; ++i)
    p->uuid.id[i] = static_cast<uint8_t>(0xa0 + i);
  std::strcpy(p->name, "Intel(R) Data Center GPU Max 1550");
  return ZE_RESULT_SUCCESS;
}

// One memory ordinal per tile.
FAKE_EXPORT ze_result_t zeDeviceGetMemoryProperties(ze_device_handle_t device, uint32_t* count,
                                                    ze_device_memory_properties_t* memories) {
  if (device != gpu()) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (memories == nullptr) {
    *count = 2;
    return ZE_RESULT_SUCCESS;
  }
  for (uint32_t i = 0; i < *count && i < 2; ++i) {
    if (memories[i].stype != ZE_STRUCTURE_TYPE_DEVICE_MEMORY_PROPERTIES) {
      return ZE_RESULT_ERROR_INVALID_ARGUMENT;
    }
    memories[i].totalSize = 64 * kGiB;
    std::strcpy(memories[i].name, "HBM");
  }
  if (*count > 2) *count = 2;
  return ZE_RESULT_SUCCESS;
}

FAKE_EXPORT ze_result_t zeDeviceGetModuleProperties(ze_device_handle_t device,
                                                    ze_device_module_properties_t* p) {
  if (device != gpu()) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (p->stype != ZE_STRUCTURE_TYPE_DEVICE_MODULE_PROPERTIES) {
    return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  }
  p->fp16flags = ZE_DEVICE_FP_FLAG_ROUND_TO_NEAREST | ZE_DEVICE_FP_FLAG_FMA;
  p->fp32flags = ZE_DEVICE_FP_FLAG_ROUND_TO_NEAREST | ZE_DEVICE_FP_FLAG_FMA;
  p->fp64flags = ZE_DEVICE_FP_FLAG_ROUND_TO_NEAREST | ZE_DEVICE_FP_FLAG_FMA;
  return ZE_RESULT_SUCCESS;
}

FAKE_EXPORT ze_result_t zeDeviceGetSubDevices(ze_device_handle_t device, uint32_t* count,
                                              ze_device_handle_t* sub_devices) {
  if (device != gpu()) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (sub_devices != nullptr) return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;  // not needed here
  *count = 2;
  return ZE_RESULT_SUCCESS;
}

FAKE_EXPORT ze_result_t zeDevicePciGetPropertiesExt(ze_device_handle_t device,
                                                    ze_pci_ext_properties_t* p) {
  if (device != gpu()) return ZE_RESULT_ERROR_INVALID_NULL_HANDLE;
  if (mode() == "no_pci") return ZE_RESULT_ERROR_UNSUPPORTED_FEATURE;
  if (p->stype != ZE_STRUCTURE_TYPE_PCI_EXT_PROPERTIES) return ZE_RESULT_ERROR_INVALID_ARGUMENT;
  p->address = ze_pci_address_ext_t{0, 0x3a, 0, 0};
  return ZE_RESULT_SUCCESS;
}
