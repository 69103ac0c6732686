// The result of every kernel library call (attention on CPU and GPU, rmsnorm, activation,
// rotary): a code that mirrors bp_status_code of the plugin ABI one to one, so the plugins
// convert by a cast, and a message naming the argument at fault.
#pragma once

#include <exception>
#include <new>
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

// Runs `call` (which returns a Status) and turns what it throws into a Status, for every
// kernel library's entry points: nothing throws across the plugin ABI. `op` starts the message;
// `buffers` says what memory ran out (" for the pair tables"), or is empty.
template <class Call>
Status guarded_call(const char* op, const char* buffers, Call&& call) {
  try {
    return std::forward<Call>(call)();
  } catch (const std::bad_alloc&) {
    return {StatusCode::kOutOfMemory, std::string(op) + ": out of memory" + buffers};
  } catch (const std::exception& e) {
    return {StatusCode::kInternal, std::string(op) + ": " + e.what()};
  } catch (...) {
    return {StatusCode::kInternal, std::string(op) + ": unknown error"};
  }
}

}  // namespace backplane::kernels
