// A fake HIP runtime, built as libamdhip64.so.5 in its own folder, so the rocm plugin's path
// with GPUs runs on machines without one (the test puts the folder on LD_LIBRARY_PATH).
// Two GPUs, an MI250X (gfx90a) and an MI300X (gfx942). FAKE_HIP_MODE, read at each call:
//   no_device  hipInit fails with hipErrorNoDevice
//   zero       hipInit succeeds and hipGetDeviceCount gives 0
// It answers as HIP 5.2 does: hipGetErrorString() repeats the error's name.
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

constexpr int kSuccess = 0;
constexpr int kInvalidValue = 1;
constexpr int kNoDevice = 100;
constexpr int kInvalidDevice = 101;

constexpr size_t kDevicePropSize = 792;  // sizeof(hipDeviceProp_t) in HIP 5.2
constexpr size_t kGcnArchNameOffset = 396;

struct FakeGpu {
  const char* name;
  const char* gcn_arch_name;
  const char* pci_bus_id;  // as HIP prints it
  const char* uuid;        // 16 ASCII hex digits
  size_t memory;
  int compute_units;
  int clock_khz;
};

constexpr size_t kGiB = size_t{1} << 30;
const FakeGpu kGpus[] = {
    {"AMD Instinct MI250X", "gfx90a:sramecc+:xnack-", "0000:C1:00.0", "ab83d2ffef0d3cdf", 64 * kGiB,
     110, 1700000},
    {"AMD Instinct MI300X", "gfx942:sramecc+:xnack-", "0000:0c:00.0", "1c2f3e4d5a6b7c8d",
     192 * kGiB, 304, 2100000},
};

thread_local int current_device = 0;

std::string mode() {
  const char* value = std::getenv("FAKE_HIP_MODE");
  return value != nullptr ? value : "";
}

int device_count() {
  return mode() == "zero" ? 0 : static_cast<int>(sizeof kGpus / sizeof kGpus[0]);
}

bool valid(int device) {
  return device >= 0 && device < device_count();
}

void copy_string(char* out, int length, const char* text) {
  if (length <= 0) return;
  std::strncpy(out, text, static_cast<size_t>(length) - 1);
  out[length - 1] = '\0';
}

}  // namespace

FAKE_EXPORT int hipInit(unsigned flags) {
  if (flags != 0) return kInvalidValue;
  return mode() == "no_device" ? kNoDevice : kSuccess;
}

FAKE_EXPORT int hipRuntimeGetVersion(int* version) {
  *version = 50222411;  // HIP 5.2.22411, as Debian 12's libamdhip64-5 reports
  return kSuccess;
}

FAKE_EXPORT int hipGetDeviceCount(int* count) {
  *count = mode() == "no_device" ? 0 : device_count();
  return mode() == "no_device" ? kNoDevice : kSuccess;
}

FAKE_EXPORT int hipDeviceGetAttribute(int* value, int attribute, int device) {
  if (!valid(device)) return kInvalidDevice;
  switch (attribute) {
    case 5:  // hipDeviceAttributeClockRate
      *value = kGpus[device].clock_khz;
      return kSuccess;
    case 16:  // hipDeviceAttributeIntegrated
      *value = 0;
      return kSuccess;
    case 63:  // hipDeviceAttributeMultiprocessorCount
      *value = kGpus[device].compute_units;
      return kSuccess;
    case 87:  // hipDeviceAttributeWarpSize
      *value = 64;
      return kSuccess;
    default:
      return kInvalidValue;
  }
}

FAKE_EXPORT int hipDeviceGetName(char* name, int length, int device) {
  if (!valid(device)) return kInvalidDevice;
  copy_string(name, length, kGpus[device].name);
  return kSuccess;
}

FAKE_EXPORT int hipDeviceGetPCIBusId(char* bus_id, int length, int device) {
  if (!valid(device)) return kInvalidDevice;
  copy_string(bus_id, length, kGpus[device].pci_bus_id);
  return kSuccess;
}

FAKE_EXPORT int hipDeviceTotalMem(size_t* bytes, int device) {
  if (!valid(device)) return kInvalidDevice;
  *bytes = kGpus[device].memory;
  return kSuccess;
}

FAKE_EXPORT int hipDeviceGetUuid(char* uuid, int device) {
  if (!valid(device)) return kInvalidDevice;
  std::memcpy(uuid, kGpus[device].uuid, 16);
  return kSuccess;
}

FAKE_EXPORT int hipGetDeviceProperties(void* properties, int device) {
  if (!valid(device)) return kInvalidDevice;
  auto* bytes = static_cast<char*>(properties);
  std::memset(bytes, 0, kDevicePropSize);  // the whole HIP 5.2 struct, as the runtime writes it
  copy_string(bytes, 256, kGpus[device].name);
  copy_string(bytes + kGcnArchNameOffset, 256, kGpus[device].gcn_arch_name);
  return kSuccess;
}

FAKE_EXPORT int hipGetDevice(int* device) {
  *device = current_device;
  return kSuccess;
}

FAKE_EXPORT int hipSetDevice(int device) {
  if (!valid(device)) return kInvalidDevice;
  current_device = device;
  return kSuccess;
}

// Free memory tells which device was current: (index + 1) GiB.
FAKE_EXPORT int hipMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  *free_bytes = static_cast<size_t>(current_device + 1) * kGiB;
  *total_bytes = kGpus[current_device].memory;
  return kSuccess;
}

FAKE_EXPORT const char* hipGetErrorName(int error) {
  switch (error) {
    case kSuccess:
      return "hipSuccess";
    case kInvalidValue:
      return "hipErrorInvalidValue";
    case kNoDevice:
      return "hipErrorNoDevice";
    case kInvalidDevice:
      return "hipErrorInvalidDevice";
    default:
      return "hipErrorUnknown";
  }
}

FAKE_EXPORT const char* hipGetErrorString(int error) {
  return hipGetErrorName(error);
}
