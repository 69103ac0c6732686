// Errors thrown by the C++ API. Messages name the input and what would have been accepted.
// No exception ever crosses the plugin ABI: plugin failures arrive as statuses and are turned
// into these (or into a failed-plugin record) by the core.
#pragma once

#include <backplane/export.hpp>

#include <stdexcept>
#include <string>

namespace backplane {

class BACKPLANE_API Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad user input: a device string, an option value, a file the user named.
class BACKPLANE_API InvalidArgument : public Error {
 public:
  using Error::Error;
};

// The thing asked for is not there (a device index, a backend, a plugin).
class BACKPLANE_API NotFound : public Error {
 public:
  using Error::Error;
};

// The thing exists but cannot be used here (no driver, backend unavailable).
class BACKPLANE_API Unavailable : public Error {
 public:
  using Error::Error;
};

}  // namespace backplane
