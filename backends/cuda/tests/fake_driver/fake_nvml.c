/* A fake libnvidia-ml.so.1 for the cuda plugin's tests, agreeing with fake_libcuda.c on the
 * devices. NVML's index is the reverse of the driver's order (as when CUDA_DEVICE_ORDER or
 * CUDA_VISIBLE_DEVICES reorders), and a MIG instance is found by its MIG- UUID.
 *   FAKE_NVML_INIT_RESULT  what nvmlInit_v2 returns (default 0, NVML_SUCCESS)
 * fake_nvml_init_count() lets a test check that every nvmlInit is matched by nvmlShutdown. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "fake_devices.h"

#define EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;
typedef struct nvmlDevice_st* nvmlDevice_t;
typedef struct {
  unsigned long long total, free, used;
} nvmlMemory_t;

enum { OK = 0, UNINITIALIZED = 1, INVALID_ARGUMENT = 2, NOT_FOUND = 6 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int init_count;

/* Handles: 1..n for GPUs, 101..100+n for MIG instances. */
static nvmlDevice_t handle_of(int value) {
  return (nvmlDevice_t)(uintptr_t)value;
}
static int value_of(nvmlDevice_t device) {
  return (int)(uintptr_t)device;
}

static int initialized(void) {
  pthread_mutex_lock(&lock);
  const int n = init_count;
  pthread_mutex_unlock(&lock);
  return n > 0;
}

EXPORT int fake_nvml_init_count(void) {
  pthread_mutex_lock(&lock);
  const int n = init_count;
  pthread_mutex_unlock(&lock);
  return n;
}

EXPORT nvmlReturn_t nvmlInit_v2(void) {
  const nvmlReturn_t result = fake_env_int("FAKE_NVML_INIT_RESULT", OK);
  if (result != OK) return result;
  pthread_mutex_lock(&lock);
  ++init_count;
  pthread_mutex_unlock(&lock);
  return OK;
}

EXPORT nvmlReturn_t nvmlShutdown(void) {
  pthread_mutex_lock(&lock);
  const nvmlReturn_t result = init_count > 0 ? OK : UNINITIALIZED;
  if (init_count > 0) --init_count;
  pthread_mutex_unlock(&lock);
  return result;
}

EXPORT const char* nvmlErrorString(nvmlReturn_t result) {
  switch (result) {
    case OK:
      return "Success";
    case 9:
      return "Driver Not Loaded";
    default:
      return "Unknown Error";
  }
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* count) {
  if (!initialized()) return UNINITIALIZED;
  *count = (unsigned)fake_device_count();
  return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char* uuid, nvmlDevice_t* device) {
  if (!initialized()) return UNINITIALIZED;
  if (uuid == NULL || device == NULL) return INVALID_ARGUMENT;
  for (int i = 0; i < fake_device_count(); ++i) {
    char text[64];
    fake_uuid_string(i, 0, text, sizeof text);
    if (strcmp(text, uuid) == 0) {
      *device = handle_of(1 + i);
      return OK;
    }
    fake_uuid_string(i, 1, text, sizeof text);
    if (fake_is_mig(i) && strcmp(text, uuid) == 0) {
      *device = handle_of(101 + i);
      return OK;
    }
  }
  return NOT_FOUND;
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int* index) {
  if (!initialized()) return UNINITIALIZED;
  const int value = value_of(device);
  if (value < 1 || value > fake_device_count()) return INVALID_ARGUMENT; /* not for MIG */
  *index = (unsigned)(fake_device_count() - value);
  return OK;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t* memory) {
  if (!initialized()) return UNINITIALIZED;
  int value = value_of(device);
  const int mig = value > 100;
  if (mig) value -= 100;
  if (value < 1 || value > fake_device_count()) return INVALID_ARGUMENT;
  /* Total installed memory, a little more than the driver's usable total. */
  memory->total = fake_total_memory(value - 1) + FAKE_GIB / 2;
  memory->free = mig ? FAKE_GIB : (unsigned long long)value * 3ull * FAKE_GIB;
  memory->used = memory->total - memory->free;
  return OK;
}
