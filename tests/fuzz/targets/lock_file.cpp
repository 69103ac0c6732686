// kernels.lock files: hub::LockFile::parse. A parsed lock dumped and parsed again dumps the same.
#include "fuzz_input.hpp"

#include <backplane/hub/lock.hpp>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace backplane;
  const std::string_view text = fuzz::as_text(data, size);
  fuzz::refusals_allowed([&] {
    const hub::LockFile lock = hub::LockFile::parse(text, "kernels.lock");
    const std::string dumped = lock.dump();
    fuzz::check(hub::LockFile::parse(dumped, "dumped").dump() == dumped,
                "LockFile::parse(lock.dump()) differs from lock");
  });
  return 0;
}
