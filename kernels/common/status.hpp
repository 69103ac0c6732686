// The result of every kernel library call (attention on CPU and GPU, rmsnorm, activation,
// rotary): a code that mirrors bp_status_code of the plugin ABI one to one, so the plugins
// convert by a cast, and a message naming the argument at fault.
#pragma once

#include <string>
#include <utility>

namespace backplane::kernels {

enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,
  kUnavailable = 4,  // no device or driver: a state of the machine, not a bad call
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
