// The kernel libraries' Status (status.hpp) as the plugin ABI's bp_status: the one conversion
// that the plugins' entry points (backends/common/attention_entries.hpp, common/package.hpp,
// the rocm plugin's HIP module) use. Kept out of status.hpp so that the libraries need no ABI
// header.
#pragma once

#include <backplane/plugin.h>
#include <backplane/plugin_sdk.hpp>

#include "status.hpp"

namespace backplane::kernels {

static_assert(static_cast<int>(StatusCode::kOk) == BP_OK &&
                  static_cast<int>(StatusCode::kInvalidArgument) == BP_INVALID_ARGUMENT &&
                  static_cast<int>(StatusCode::kUnavailable) == BP_UNAVAILABLE &&
                  static_cast<int>(StatusCode::kUnimplemented) == BP_UNIMPLEMENTED &&
                  static_cast<int>(StatusCode::kInternal) == BP_INTERNAL &&
                  static_cast<int>(StatusCode::kOutOfMemory) == BP_OUT_OF_MEMORY,
              "StatusCode mirrors bp_status_code");

// A code as a kernel module returns it across its own C boundary (an int): one of the
// library's codes, or BP_INTERNAL for anything else, so that a stray value is never passed
// on as a code the ABI does not have.
inline bp_status_code to_bp_status_code(int code) {
  switch (code) {
    case BP_OK:
    case BP_INVALID_ARGUMENT:
    case BP_UNAVAILABLE:
    case BP_UNIMPLEMENTED:
    case BP_INTERNAL:
    case BP_OUT_OF_MEMORY:
      return static_cast<bp_status_code>(code);
    default:
      return BP_INTERNAL;
  }
}

inline bp_status_code to_bp_status_code(StatusCode code) {
  return to_bp_status_code(static_cast<int>(code));
}

// NULL for success, else the host's status with the library's code and message. An
// allocation failure while making it is the ABI's out-of-memory status.
inline bp_status* to_bp_status(const sdk::Host* host, const Status& s) noexcept {
  if (s.ok()) return nullptr;
  try {
    return host->status(to_bp_status_code(s.code), s.message);
  } catch (...) {
    return host->status(BP_OUT_OF_MEMORY, "out of memory");
  }
}

}  // namespace backplane::kernels
