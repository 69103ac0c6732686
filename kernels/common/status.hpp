// The result of a layer kernel call (rmsnorm, activation, rotary): a code that mirrors
// bp_status_code of the plugin ABI one to one, and a message naming the argument at fault.
#pragma once

#include <string>
#include <utility>

namespace backplane::kernels {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,
  kUnimplemented = 5,
  kInternal = 6,
  kOutOfMemory = 7,
};

struct Status {
  StatusCode code = StatusCode::kOk;
  std::string message;  // empty when ok

  bool ok() const { return code == StatusCode::kOk; }
  static Status Ok() { return {}; }
  static Status InvalidArgument(std::string m) {
    return {StatusCode::kInvalidArgument, std::move(m)};
  }
};

}  // namespace backplane::kernels
