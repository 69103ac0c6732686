// Reading a versioned ABI struct written by a plugin built against another 1.x header.
#pragma once

#include <cstddef>
#include <cstring>

namespace backplane::detail {

// Copies the fields both sides know into a zeroed T: fields past the writer's struct_size read
// as zero/NULL, fields past ours are ignored. False when the writer's struct is smaller than
// `min_size` (the ABI 1.0 layout) and so cannot be from any 1.x plugin.
template <class T>
bool read_abi_struct(const T* in, size_t min_size, T& out) {
  out = T{};
  if (in == nullptr || in->struct_size < min_size) return false;
  std::memcpy(static_cast<void*>(&out), in,
              in->struct_size < sizeof(T) ? in->struct_size : sizeof(T));
  out.struct_size = sizeof(T);
  return true;
}

}  // namespace backplane::detail
