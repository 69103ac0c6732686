/* A fake libcuda.so.1 for the cuda plugin's tests on machines without a GPU: the driver entry
 * points the plugin resolves, describing fake_devices.h's devices. The test runs with this
 * library's folder first on LD_LIBRARY_PATH. Behaviour is chosen per call by environment:
 *   FAKE_CUDA_INIT_RESULT  what cuInit returns (default 0, CUDA_SUCCESS)
 *   FAKE_CUDA_DEVICES      device count (default 2)
 *   FAKE_CUDA_MIG          1: the last device is a MIG instance
 *   FAKE_CUDA_LAST_CC      the last device's compute capability as digits (75: 7.5)
 * fake_cuda_primary_refs() lets a test check that primary contexts are released. */
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "fake_devices.h"

#define EXPORT __attribute__((visibility("default")))

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st* CUcontext;
typedef struct {
  char bytes[16];
} CUuuid;

enum {
  SUCCESS = 0,
  INVALID_VALUE = 1,
  NOT_INITIALIZED = 3,
  NO_DEVICE = 100,
  INVALID_DEVICE = 101,
  INVALID_CONTEXT = 201,
  NOT_SUPPORTED = 801
};

static int initialized;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int primary_refs[FAKE_MAX_DEVICES];
/* Fake contexts are addresses in this array: one per device. */
static char contexts[FAKE_MAX_DEVICES];
static __thread CUcontext stack[8];
static __thread int depth;

static int valid(CUdevice device) {
  return device >= 0 && device < fake_device_count();
}

EXPORT int fake_cuda_primary_refs(int device) {
  pthread_mutex_lock(&lock);
  const int refs = primary_refs[device];
  pthread_mutex_unlock(&lock);
  return refs;
}

EXPORT int fake_cuda_context_depth(void) {
  return depth;
}

EXPORT CUresult cuGetErrorName(CUresult error, const char** name) {
  switch (error) {
    case SUCCESS:
      *name = "CUDA_SUCCESS";
      return SUCCESS;
    case NOT_INITIALIZED:
      *name = "CUDA_ERROR_NOT_INITIALIZED";
      return SUCCESS;
    case NO_DEVICE:
      *name = "CUDA_ERROR_NO_DEVICE";
      return SUCCESS;
    case 803:
      *name = "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
      return SUCCESS;
    default:
      *name = NULL;
      return INVALID_VALUE;
  }
}

EXPORT CUresult cuGetErrorString(CUresult error, const char** text) {
  switch (error) {
    case SUCCESS:
      *text = "no error";
      return SUCCESS;
    case NOT_INITIALIZED:
      *text = "initialization error";
      return SUCCESS;
    case NO_DEVICE:
      *text = "no CUDA-capable device is detected";
      return SUCCESS;
    case 803:
      *text = "system has unsupported display driver / cuda driver combination";
      return SUCCESS;
    default:
      *text = NULL;
      return INVALID_VALUE;
  }
}

EXPORT CUresult cuInit(unsigned int flags) {
  if (flags != 0) return INVALID_VALUE;
  const CUresult result = fake_env_int("FAKE_CUDA_INIT_RESULT", SUCCESS);
  if (result == SUCCESS) initialized = 1;
  return result;
}

EXPORT CUresult cuDriverGetVersion(int* version) {
  *version = 12040;
  return SUCCESS;
}

EXPORT CUresult cuDeviceGetCount(int* count) {
  if (!initialized) return NOT_INITIALIZED;
  *count = fake_device_count();
  return SUCCESS;
}

EXPORT CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  if (!initialized) return NOT_INITIALIZED;
  if (!valid(ordinal)) return INVALID_DEVICE;
  *device = ordinal;
  return SUCCESS;
}

EXPORT CUresult cuDeviceGetName(char* name, int length, CUdevice device) {
  if (!valid(device)) return INVALID_DEVICE;
  snprintf(name, (size_t)length, "Fake GPU %d", device);
  return SUCCESS;
}

static CUresult uuid(CUuuid* out, CUdevice device, int own) {
  if (!valid(device)) return INVALID_DEVICE;
  unsigned char bytes[16];
  fake_uuid_bytes(device, own, bytes);
  memcpy(out->bytes, bytes, 16);
  return SUCCESS;
}

EXPORT CUresult cuDeviceGetUuid(CUuuid* out, CUdevice device) {
  return uuid(out, device, 0);
}

EXPORT CUresult cuDeviceGetUuid_v2(CUuuid* out, CUdevice device) {
  return uuid(out, device, 1);
}

EXPORT CUresult cuDeviceGetPCIBusId(char* bus_id, int length, CUdevice device) {
  if (!valid(device)) return INVALID_DEVICE;
  /* Upper-case, as the real driver writes it. */
  snprintf(bus_id, (size_t)length, "0000:%02X:00.0", 0x1b + 0x20 * device);
  return SUCCESS;
}

EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice device) {
  if (!valid(device)) return INVALID_DEVICE;
  *bytes = (size_t)fake_total_memory(device);
  return SUCCESS;
}

/* 90 for device 0, 86 for the others; FAKE_CUDA_LAST_CC (e.g. 75) for the last device. */
static int fake_compute_capability(int device) {
  if (device == fake_device_count() - 1 && getenv("FAKE_CUDA_LAST_CC") != NULL) {
    return fake_env_int("FAKE_CUDA_LAST_CC", 86);
  }
  return device == 0 ? 90 : 86;
}

EXPORT CUresult cuDeviceGetAttribute(int* value, int attribute, CUdevice device) {
  if (!valid(device)) return INVALID_DEVICE;
  switch (attribute) {
    case 13:
      *value = 1980000;
      return SUCCESS; /* clock rate, kHz */
    case 16:
      *value = 132 - 48 * device;
      return SUCCESS; /* multiprocessors */
    case 18:
      *value = 0;
      return SUCCESS; /* integrated */
    case 32:
      *value = 1;
      return SUCCESS; /* ECC */
    case 36:
      *value = 2619000;
      return SUCCESS; /* memory clock, kHz */
    case 37:
      *value = 5120;
      return SUCCESS; /* bus width */
    case 38:
      *value = 50 * 1024 * 1024;
      return SUCCESS; /* L2 */
    case 39:
      *value = 2048;
      return SUCCESS;
    case 75: /* compute capability major, then minor */
      *value = fake_compute_capability(device) / 10;
      return SUCCESS;
    case 76:
      *value = fake_compute_capability(device) % 10;
      return SUCCESS;
    case 97:
      return NOT_SUPPORTED; /* an attribute this driver does not report */
    default:
      return INVALID_VALUE;
  }
}

EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice device) {
  if (!valid(device)) return INVALID_DEVICE;
  pthread_mutex_lock(&lock);
  ++primary_refs[device];
  pthread_mutex_unlock(&lock);
  *context = (CUcontext)(void*)&contexts[device];
  return SUCCESS;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice device) {
  if (!valid(device)) return INVALID_DEVICE;
  pthread_mutex_lock(&lock);
  const CUresult result = primary_refs[device] > 0 ? SUCCESS : INVALID_CONTEXT;
  if (primary_refs[device] > 0) --primary_refs[device];
  pthread_mutex_unlock(&lock);
  return result;
}

EXPORT CUresult cuCtxPushCurrent_v2(CUcontext context) {
  if (depth == 8) return INVALID_VALUE;
  stack[depth++] = context;
  return SUCCESS;
}

EXPORT CUresult cuCtxPopCurrent_v2(CUcontext* context) {
  if (depth == 0) return INVALID_CONTEXT;
  *context = stack[--depth];
  return SUCCESS;
}

EXPORT CUresult cuMemGetInfo_v2(size_t* free_bytes, size_t* total_bytes) {
  if (depth == 0) return INVALID_CONTEXT;
  const int device = (int)((char*)(void*)stack[depth - 1] - contexts);
  *total_bytes = (size_t)fake_total_memory(device);
  *free_bytes = *total_bytes / 4;
  return SUCCESS;
}
