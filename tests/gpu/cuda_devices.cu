// The CUDA runtime's own device list, for tests/gpu/cuda_check.sh to compare with hwprobe: one
// tab-separated line per device, in the runtime's order (after CUDA_VISIBLE_DEVICES and
// CUDA_DEVICE_ORDER):  index  uuid  pci_bus_id  major.minor  name
// No device (cudaErrorNoDevice) prints nothing and succeeds; any other error fails.
#include <cuda_runtime.h>

#include <cstdio>

int main() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaErrorNoDevice) return 0;
  if (status != cudaSuccess) {
    std::fprintf(stderr, "cudaGetDeviceCount: %s: %s\n", cudaGetErrorName(status),
                 cudaGetErrorString(status));
    return 1;
  }
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp p{};
    char bus_id[64] = {};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess ||
        cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, i) != cudaSuccess) {
      std::fprintf(stderr, "device %d: cannot read its properties\n", i);
      return 1;
    }
    const auto* b = reinterpret_cast<const unsigned char*>(p.uuid.bytes);
    std::printf(
        "%d\tGPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x\t%s\t%d.%d\t%"
        "s\n",
        i, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
        b[14], b[15], bus_id, p.major, p.minor, p.name);
  }
  return 0;
}
