// Warnings for a person (a layer that keeps its own forward, an attention fallback): given to the
// caller's handler, or written once per process to stderr, as transformers' warning_once does.
#pragma once

#include <backplane/export.hpp>

#include <functional>
#include <string>

namespace backplane {

// Receives each warning, word for word.
using WarningHandler = std::function<void(const std::string& warning)>;

// `warning` to `handler`; without one, "backplane: warn: <warning>" on stderr the first time this
// process sees that text. Thread-safe.
BACKPLANE_API void tell_warning(const WarningHandler& handler, const std::string& warning);

}  // namespace backplane
