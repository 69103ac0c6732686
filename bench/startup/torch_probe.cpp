// Minimal LibTorch host program: the startup cost a host application pays just to ask
// LibTorch whether CUDA is there. bench/startup.sh compares `hwprobe --json` against it.
#include <torch/cuda.h>

#include <cstdio>

int main() {
  const bool available = torch::cuda::is_available();
  const auto count = torch::cuda::device_count();
  std::printf("torch::cuda::is_available() = %s\ntorch::cuda::device_count() = %zu\n",
              available ? "true" : "false", static_cast<std::size_t>(count));
  return 0;
}
