// The message of the exception of type E that `f` throws; a test failure when it throws nothing.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace selection_test {

template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an exception";
  return "";
}

}  // namespace selection_test
