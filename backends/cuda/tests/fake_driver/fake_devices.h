/* The devices the fake CUDA driver and the fake NVML both describe, so that they agree on
 * UUIDs. Test-only: see fake_libcuda.c. */
#ifndef FAKE_DEVICES_H_
#define FAKE_DEVICES_H_

#include <stdio.h>
#include <stdlib.h>

/* Devices are numbered in the fake driver's (post-visibility) order; NVML numbers them in
 * reverse, so a test can tell NVML's index from the driver's. */
#define FAKE_MAX_DEVICES 4

static inline int fake_env_int(const char* name, int fallback) {
  const char* value = getenv(name);
  return value != NULL && *value != '\0' ? atoi(value) : fallback;
}

/* FAKE_CUDA_DEVICES: how many devices (default 2). */
static inline int fake_device_count(void) {
  int n = fake_env_int("FAKE_CUDA_DEVICES", 2);
  return n < 0 ? 0 : (n > FAKE_MAX_DEVICES ? FAKE_MAX_DEVICES : n);
}

/* FAKE_CUDA_MIG=1 makes the last device a MIG instance: its own UUID differs from its GPU's. */
static inline int fake_is_mig(int device) {
  return fake_env_int("FAKE_CUDA_MIG", 0) != 0 && device == fake_device_count() - 1;
}

static inline void fake_uuid_bytes(int device, int own, unsigned char out[16]) {
  for (int k = 0; k < 16; ++k) {
    out[k] = (unsigned char)(0x10 * (device + 1) + k + (own && fake_is_mig(device) ? 0x80 : 0));
  }
}

static inline void fake_uuid_string(int device, int own, char* out, size_t size) {
  unsigned char b[16];
  fake_uuid_bytes(device, own, b);
  snprintf(out, size, "%s-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
           own && fake_is_mig(device) ? "MIG" : "GPU", b[0], b[1], b[2], b[3], b[4], b[5], b[6],
           b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

#define FAKE_GIB (1024ull * 1024ull * 1024ull)
static inline unsigned long long fake_total_memory(int device) {
  return (unsigned long long)(device + 1) * 16ull * FAKE_GIB;
}

#endif /* FAKE_DEVICES_H_ */
