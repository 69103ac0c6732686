// Configured (not built) by tests/sdk/check_torch_consumer.cmake: what matters is that
// find_package(backplane) needs no LibTorch.
#include <backplane/runtime/runtime.hpp>

int main() {
  return backplane::Runtime::open().devices().empty() ? 1 : 0;
}
